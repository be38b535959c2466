//! The always-on part of a live run (`--window`): handshakes go into the open window; at
//! every tick the windows that closed are judged against the baselines, their groups
//! compared (`--group-by`), and written — one JSON line per window, one per anomaly
//! event, one per canary comparison — to `--windows FILE` (flushed line by line, reopened
//! on request), the baselines to `--state FILE` (atomically), the events to the metrics
//! and to the caller.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::baseline::{
    AnomalyEvent, AnomalyOptions, BaselineState, Baselines, STATE_SCHEMA, STATE_SCHEMA_V1,
    STATE_SCHEMA_V2,
};
use super::canary::{Canaries, CanaryOptions, CanaryRecord};
use super::metrics::ObserveMetrics;
use super::window::{WindowOptions, WindowRecord, Windows};
use crate::files::{FileError, FileMode};
use crate::sync::lock;

/// What `--window` asks for.
#[derive(Debug, Clone, Default)]
pub struct WatchSetup {
    /// The windows' shape.
    pub windows: WindowOptions,
    /// When a window is an anomaly.
    pub anomalies: AnomalyOptions,
    /// Where the window and event records go (JSON Lines).
    pub stream: Option<PathBuf>,
    /// Where the baselines are kept across restarts.
    pub state: Option<PathBuf>,
    /// How groups are compared (with [`WindowOptions::group_by`]).
    pub canary: CanaryOptions,
}

/// Why the baselines' state file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{}: not a baseline state file tlsperf wrote ({reason}); move it away to start anew", .path.display())]
pub struct StateError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

impl crate::error::Classify for StateError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// What a closed window brought.
#[derive(Debug)]
pub struct Closed {
    /// The window.
    pub window: WindowRecord,
    /// The anomalies that started or ended with it.
    pub events: Vec<AnomalyEvent>,
    /// Its groups compared with the stable one (`--group-by`).
    pub canaries: Vec<CanaryRecord>,
}

/// The windows, their baselines and their sinks.
#[derive(Debug)]
pub struct Watch {
    /// Shared with the analysis (captured handshakes) and the probes' listener.
    pub windows: Arc<Mutex<Windows>>,
    baselines: Baselines,
    canaries: Canaries,
    stream: Option<(PathBuf, io::LineWriter<std::fs::File>)>,
    stream_path: Option<PathBuf>,
    state: Option<PathBuf>,
    metrics: Option<Arc<ObserveMetrics>>,
    /// The first error writing the stream or the state (the run goes on).
    error: Option<String>,
    /// The machine's CPU pressure, read as each window closes.
    pressure: super::pressure::CpuPressure,
    /// The last windows' CPU pressure (at most [`PRESSURE_KEPT`]), for the events' `before`.
    recent_pressure: std::collections::VecDeque<f64>,
}

/// How many windows' CPU pressure an event's `cpu_pressure_before` is the median of.
const PRESSURE_KEPT: usize = 60;

fn open_stream(path: &Path, append: bool) -> Result<io::LineWriter<std::fs::File>, FileError> {
    let file = crate::files::open_log(path, FileMode::Public, append)?;
    Ok(io::LineWriter::with_capacity(256 * 1024, file))
}

impl Watch {
    /// Reads the state file (when it exists); nothing is written until
    /// [`Watch::open`].
    pub fn new(setup: &WatchSetup) -> Result<Watch, WatchError> {
        let baselines = match &setup.state {
            Some(path) if path.exists() => {
                let text =
                    crate::files::read_input_to_string(path, crate::files::InputKind::Results)
                        .map_err(|source| FileError::Write {
                            path: path.clone(),
                            source,
                        })?;
                let state: BaselineState = serde_json::from_str(&text).map_err(|e| StateError {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                if ![STATE_SCHEMA, STATE_SCHEMA_V2, STATE_SCHEMA_V1]
                    .contains(&state.schema.as_str())
                {
                    return Err(StateError {
                        path: path.clone(),
                        reason: format!(
                            "schema {:?}, not {STATE_SCHEMA:?}, {STATE_SCHEMA_V2:?} or \
                             {STATE_SCHEMA_V1:?}",
                            state.schema
                        ),
                    }
                    .into());
                }
                Baselines::restore(setup.anomalies.clone(), state)
            }
            _ => Baselines::new(setup.anomalies.clone()),
        };
        Ok(Watch {
            windows: Arc::new(Mutex::new(Windows::new(setup.windows.clone()))),
            baselines,
            canaries: Canaries::new(setup.canary.clone()),
            stream: None,
            stream_path: setup.stream.clone(),
            state: setup.state.clone(),
            metrics: None,
            error: None,
            pressure: super::pressure::CpuPressure::new(
                std::path::Path::new(super::pressure::PSI_CPU),
                super::live::now_ns(),
            ),
            recent_pressure: std::collections::VecDeque::new(),
        })
    }

    /// Opens the stream (an existing regular file is truncated: checked before) and
    /// counts the anomalies in `metrics` too.
    pub fn open(&mut self, metrics: Option<Arc<ObserveMetrics>>) -> Result<(), FileError> {
        if let Some(path) = &self.stream_path {
            self.stream = Some((path.clone(), open_stream(path, false)?));
        }
        self.metrics = metrics;
        Ok(())
    }

    /// Closes what is due by `now_ns`, judges it and writes it.
    pub fn tick(&mut self, now_ns: u64) -> Option<Closed> {
        let (mut window, headlines) = {
            let mut w = lock(&self.windows);
            let window = w.tick(now_ns)?;
            (window, w.take_headlines())
        };
        window.cpu_pressure = self.pressure.share(now_ns);
        let mut events = self.baselines.judge(&mut window);
        let before = crate::stats::summary::median(self.recent_pressure.make_contiguous());
        for e in &mut events {
            e.cpu_pressure = window.cpu_pressure;
            e.cpu_pressure_before = before;
        }
        if let Some(p) = window.cpu_pressure {
            if self.recent_pressure.len() >= PRESSURE_KEPT {
                self.recent_pressure.pop_front();
            }
            self.recent_pressure.push_back(p);
        }
        let canaries = self.canaries.compare(&window, &headlines);
        self.write(&window, &events, &canaries);
        if let Some(m) = &self.metrics {
            for e in &events {
                m.anomaly(e);
            }
            m.long_baselines(&window);
        }
        if let Some(path) = &self.state {
            let state = self.baselines.state();
            let written = serde_json::to_vec(&state)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    crate::files::write_atomic(path, &bytes, FileMode::Public, true)
                        .map_err(|e| crate::error::sentence(&e))
                });
            if let Err(e) = written {
                self.error.get_or_insert(e);
            }
        }
        Some(Closed {
            window,
            events,
            canaries,
        })
    }

    /// The end of the run: the open window, closed at `now_ns`, written (not judged:
    /// a part of a window is not learnt from).
    pub fn finish(mut self, now_ns: u64) -> Result<Option<WindowRecord>, String> {
        let last = lock(&self.windows).finish(now_ns);
        if let Some(w) = &last {
            self.write(w, &[], &[]);
        }
        if let Some((_, out)) = &mut self.stream
            && let Err(e) = out.flush()
        {
            self.error.get_or_insert(e.to_string());
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(last),
        }
    }

    /// Opens the stream again (appending), after logrotate moved it away.
    pub fn reopen(&mut self) -> Result<(), FileError> {
        if let Some((path, out)) = &mut self.stream {
            let _ = out.flush();
            *out = open_stream(path, true)?;
        }
        Ok(())
    }

    /// The stream's path.
    pub fn stream_path(&self) -> Option<&Path> {
        self.stream_path.as_deref()
    }

    fn write(&mut self, w: &WindowRecord, events: &[AnomalyEvent], canaries: &[CanaryRecord]) {
        let Some((path, out)) = &mut self.stream else {
            return;
        };
        let mut lines = vec![serde_json::to_string(w)];
        lines.extend(events.iter().map(serde_json::to_string));
        lines.extend(canaries.iter().map(serde_json::to_string));
        for line in lines {
            let written = line.map_err(io::Error::from).and_then(|mut text| {
                text.push('\n');
                out.write_all(text.as_bytes())
            });
            if let Err(e) = written {
                self.error
                    .get_or_insert(format!("cannot write {}: {e}", path.display()));
                return;
            }
        }
    }
}

/// Why the windows could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The stream or the state file.
    #[error(transparent)]
    File(#[from] FileError),
    /// The state file.
    #[error(transparent)]
    State(#[from] StateError),
}

impl crate::error::Classify for WatchError {
    fn class(&self) -> crate::error::ErrorClass {
        match self {
            WatchError::File(e) => e.class(),
            WatchError::State(e) => e.class(),
        }
    }
}
