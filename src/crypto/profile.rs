//! `--flamegraph`: where the CPU time of a `tlsperf crypto` command goes, as a flame-graph
//! SVG.
//!
//! This module owns the sampling profiler (pprof-rs) and everything it produces:
//!
//! - [`FlamegraphTarget`]: the output file, checked before anything is measured (its
//!   directory exists and takes a new file, the path is not a directory).
//! - [`Sampling`]: the profiler while it runs. `SIGPROF` from `setitimer(ITIMER_PROF)`,
//!   asked for [`Sampling::FREQUENCY`] times per second of the process's CPU time; each
//!   sample is the interrupted thread's stack. The kernel fires that timer on its
//!   scheduler tick, so the real rate is at most `CONFIG_HZ` per busy core (about 180 to
//!   250 samples per CPU-second with the common `CONFIG_HZ=250`): the SVG and the CLI
//!   give the number actually taken.
//! - [`Profile`]: the stopped profiler's stacks, folded (`root;…;leaf count`), rendered
//!   by inferno into an SVG and written atomically ([`crate::files::write_atomic`]).
//!
//! **Unwinding.** Stacks are walked by pprof's default unwinder (backtrace-rs over
//! libgcc's `_Unwind_Backtrace`, i.e. the DWARF call-frame information in `.eh_frame`),
//! not by frame pointers. Frame-pointer walking would need every crate rebuilt with
//! `-C force-frame-pointers=yes`, and would still break inside AWS-LC: its C is compiled
//! by the cc crate without frame pointers, and its perlasm assembly keeps none, so every
//! sample in an assembly kernel would lose its callers. AWS-LC's assembly does carry CFI
//! directives, so the DWARF unwinder walks from an assembly kernel up through AWS-LC's C,
//! aws-lc-rs, rustls and tlsperf to `main`, in the release binary as it is built.
//!
//! **What is dropped.** Samples that land in libc, libgcc, libpthread or the vDSO are
//! discarded (pprof's blocklist: unwinding from inside the unwinder or the dynamic
//! loader can deadlock in a signal handler), so time spent in, say, glibc's `memcpy` is
//! missing from the graph. Signal frames of the profiler itself are cut off each stack.
//!
//! **Allocation.** pprof's signal handler records into preallocated buckets (spilling to
//! a temporary file with `write(2)`) and does not allocate, so the binary's counting
//! allocator ([`super::alloc`]) sees no allocations from sampling.
//!
//! Engines here never print: the CLI says where the SVG went.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Classify, ErrorClass};
use crate::files::{self, FileError, FileMode};

/// A failure of `--flamegraph`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The output path is unusable (checked before measuring).
    #[error("--flamegraph")]
    Target(#[source] FileError),
    /// The profiler could not start (another one runs in this process, or `SIGPROF` could
    /// not be set up).
    #[error("cannot start the CPU profiler: {0}")]
    Start(String),
    /// The samples could not be read back.
    #[error("cannot collect the CPU profile: {0}")]
    Collect(String),
    /// Not a single sample was taken: nothing to draw.
    #[error(
        "no CPU samples were taken in {:.3} s at {} Hz: the run was too short to profile (raise --duration)",
        .duration.as_secs_f64(), .frequency
    )]
    NoSamples {
        /// How long the profiler ran.
        duration: Duration,
        /// Samples per second of CPU time asked for.
        frequency: u32,
    },
    /// inferno could not draw the stacks.
    #[error("cannot draw the flame graph")]
    Render(#[source] std::io::Error),
    /// The finished SVG could not be written.
    #[error("cannot write the flame graph")]
    Write(#[source] FileError),
    /// Sampling needs `SIGPROF` and `setitimer`: Unix only.
    #[error("--flamegraph is not supported on this platform (it needs Unix signals)")]
    Unsupported,
}

impl Classify for ProfileError {
    fn class(&self) -> ErrorClass {
        match self {
            ProfileError::Target(e) => e.class(),
            ProfileError::Unsupported => ErrorClass::Input,
            // The path was checked before the run: a failure now is the run's, not the
            // user's.
            ProfileError::Start(_)
            | ProfileError::Collect(_)
            | ProfileError::NoSamples { .. }
            | ProfileError::Render(_)
            | ProfileError::Write(_) => ErrorClass::Runtime,
        }
    }
}

/// Where a flame graph goes and what its title says, checked before the run.
#[derive(Debug, Clone)]
pub struct FlamegraphTarget {
    path: PathBuf,
    title: String,
}

impl FlamegraphTarget {
    /// Checks that `path` can be written now: it names a file, is not a directory, and its
    /// directory exists and takes a new file (an existing file is replaced at the end).
    /// `title` heads the SVG: say what was profiled.
    pub fn new(path: &Path, title: impl Into<String>) -> Result<Self, ProfileError> {
        files::check_writable(path).map_err(ProfileError::Target)?;
        Ok(FlamegraphTarget {
            path: path.to_path_buf(),
            title: title.into(),
        })
    }

    /// The SVG's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SVG's title.
    pub fn title(&self) -> &str {
        &self.title
    }
}

/// The sampling profiler while it runs. Dropping it stops sampling and discards the
/// samples; [`Sampling::stop`] keeps them. One at a time per process.
pub struct Sampling {
    #[cfg(unix)]
    guard: pprof::ProfilerGuard<'static>,
    started: std::time::Instant,
}

impl std::fmt::Debug for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampling")
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

/// Shared objects whose samples are dropped (see the module doc).
#[cfg(unix)]
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

impl Sampling {
    /// Samples per second of CPU time: 999, not 1000, so the sampling does not run in
    /// lockstep with work timed in milliseconds.
    pub const FREQUENCY: u32 = 999;

    /// Starts sampling every thread of the process.
    #[cfg(unix)]
    pub fn start() -> Result<Sampling, ProfileError> {
        let frequency = i32::try_from(Self::FREQUENCY).unwrap_or(i32::MAX);
        let guard = pprof::ProfilerGuardBuilder::default()
            .frequency(frequency)
            .blocklist(&BLOCKLIST)
            .build()
            .map_err(|e| ProfileError::Start(e.to_string()))?;
        Ok(Sampling {
            guard,
            started: std::time::Instant::now(),
        })
    }

    /// Sampling needs Unix signals: fails with [`ProfileError::Unsupported`] elsewhere.
    #[cfg(not(unix))]
    pub fn start() -> Result<Sampling, ProfileError> {
        Err(ProfileError::Unsupported)
    }

    /// Stops sampling and symbolizes the stacks.
    #[cfg(unix)]
    pub fn stop(self) -> Result<Profile, ProfileError> {
        let duration = self.started.elapsed();
        let report = self
            .guard
            .report()
            .build()
            .map_err(|e| ProfileError::Collect(e.to_string()))?;
        drop(self.guard);
        let mut stacks: Vec<(Vec<String>, u64)> = Vec::with_capacity(report.data.len());
        for (frames, count) in &report.data {
            let Ok(count) = u64::try_from(*count) else {
                continue;
            };
            if count == 0 {
                continue;
            }
            // pprof lists the leaf first and, per frame, the innermost inlined function
            // first: reverse both for root-first.
            let mut names = vec![frames.thread_name_or_id()];
            for frame in frames.frames.iter().rev() {
                for symbol in frame.iter().rev() {
                    names.push(symbol.name());
                }
            }
            stacks.push((names, count));
        }
        Ok(Profile::from_stacks(stacks, duration, Self::FREQUENCY))
    }

    /// Unreachable elsewhere ([`Sampling::start`] fails first).
    #[cfg(not(unix))]
    pub fn stop(self) -> Result<Profile, ProfileError> {
        Err(ProfileError::Unsupported)
    }
}

/// Stopped samples, folded: one line per distinct stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// `root;…;leaf count`, sorted.
    folded: Vec<String>,
    samples: u64,
    duration: Duration,
    frequency: u32,
}

/// What [`Profile::write`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The SVG.
    pub path: PathBuf,
    /// Samples drawn.
    pub samples: u64,
    /// Size of the SVG.
    pub bytes: usize,
}

impl Profile {
    /// Folds stacks given root first (function names, as many samples each). The profiler's
    /// own frames at the leaf end (backtrace-rs and pprof, when not already cut) are
    /// dropped, and so are hash suffixes of Rust symbols (`::h0123456789abcdef`).
    pub fn from_stacks(
        stacks: impl IntoIterator<Item = (Vec<String>, u64)>,
        duration: Duration,
        frequency: u32,
    ) -> Profile {
        let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
        let mut samples = 0;
        for (names, count) in stacks {
            let mut names: Vec<String> = names.iter().map(|n| clean(n)).collect();
            while names.len() > 1 && names.last().is_some_and(|n| is_profiler_frame(n)) {
                names.pop();
            }
            if names.is_empty() || count == 0 {
                continue;
            }
            *counts.entry(names.join(";")).or_default() += count;
            samples += count;
        }
        let folded = counts
            .into_iter()
            .map(|(stack, n)| format!("{stack} {n}"))
            .collect();
        Profile {
            folded,
            samples,
            duration,
            frequency,
        }
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// How long sampling ran (wall clock).
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The folded stacks, `root;…;leaf count`, one per distinct stack, sorted.
    pub fn folded(&self) -> &[String] {
        &self.folded
    }

    /// The flame graph as SVG, headed by `title`; fails when no sample was taken.
    pub fn svg(&self, title: &str) -> Result<Vec<u8>, ProfileError> {
        if self.samples == 0 {
            return Err(ProfileError::NoSamples {
                duration: self.duration,
                frequency: self.frequency,
            });
        }
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        let mut subtitle = String::new();
        let _ = write!(
            subtitle,
            "{} samples of CPU time (asked at {} Hz) over {:.2} s of wall-clock time",
            self.samples,
            self.frequency,
            self.duration.as_secs_f64()
        );
        opts.subtitle = Some(subtitle);
        opts.count_name = "samples".into();
        // The same function gets the same color in every graph.
        opts.hash = true;
        let mut svg = Vec::new();
        inferno::flamegraph::from_lines(
            &mut opts,
            self.folded.iter().map(String::as_str),
            &mut svg,
        )
        .map_err(ProfileError::Render)?;
        Ok(svg)
    }

    /// Renders the SVG and writes it atomically to the target, replacing a file there.
    pub fn write(&self, target: &FlamegraphTarget) -> Result<Written, ProfileError> {
        let svg = self.svg(&target.title)?;
        files::write_atomic(&target.path, &svg, FileMode::Public, true)
            .map_err(ProfileError::Write)?;
        Ok(Written {
            path: target.path.clone(),
            samples: self.samples,
            bytes: svg.len(),
        })
    }
}

/// A frame name fit for a folded line: no `;` (the separator; it appears in array types
/// such as `[u8; 32]`) and no Rust symbol hash.
fn clean(name: &str) -> String {
    let name = strip_hash(name);
    name.replace(';', ",")
}

/// `a::b::h0123456789abcdef` → `a::b`.
fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

/// Frames of the sampling machinery itself, found at the leaf end of a stack.
fn is_profiler_frame(name: &str) -> bool {
    name.starts_with("backtrace::")
        || name.starts_with("pprof::")
        || name == "perf_signal_handler"
        || name == "__restore_rt"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn folds_stacks_and_cleans_names() {
        let p = Profile::from_stacks(
            [
                (
                    s(&[
                        "main",
                        "tlsperf::crypto::sign::run::h0123456789abcdef",
                        "<[u8; 32] as Foo>::bar",
                        "backtrace::backtrace::libunwind::trace",
                    ]),
                    3,
                ),
                (s(&["main", "tlsperf::crypto::sign::run"]), 2),
                (s(&["main", "tlsperf::crypto::sign::run"]), 1),
                (s(&["main", "idle"]), 0),
            ],
            Duration::from_millis(10),
            999,
        );
        assert_eq!(p.samples(), 6);
        assert_eq!(
            p.folded(),
            [
                "main;tlsperf::crypto::sign::run 3",
                "main;tlsperf::crypto::sign::run;<[u8, 32] as Foo>::bar 3",
            ]
        );
    }

    #[test]
    fn renders_an_svg_with_title_and_frames() {
        let p = Profile::from_stacks(
            [(s(&["tlsperf", "main", "aws_lc_ED25519_sign"]), 5)],
            Duration::from_millis(5),
            999,
        );
        let svg = String::from_utf8(p.svg("tlsperf crypto sign <x>").unwrap()).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("<svg"));
        assert!(svg.contains("aws_lc_ED25519_sign"));
        assert!(svg.contains("tlsperf crypto sign &lt;x&gt;"));
        assert!(svg.contains("5 samples of CPU time (asked at 999 Hz)"));
    }

    #[test]
    fn no_samples_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svg");
        let target = FlamegraphTarget::new(&path, "t").unwrap();
        let p = Profile::from_stacks([], Duration::from_millis(1), 999);
        let err = p.write(&target).unwrap_err();
        assert!(matches!(err, ProfileError::NoSamples { .. }), "{err}");
        assert_eq!(err.class(), ErrorClass::Runtime);
        assert!(!path.exists());
    }

    #[test]
    fn bad_targets_are_input_errors_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope").join("f.svg");
        let err = FlamegraphTarget::new(&missing, "t").unwrap_err();
        assert_eq!(err.class(), ErrorClass::Input);
        let chain = format!("{:#}", anyhow::Error::new(err));
        assert!(chain.contains("--flamegraph"), "{chain}");
        assert!(chain.contains(&missing.display().to_string()), "{chain}");
        let err = FlamegraphTarget::new(dir.path(), "t").unwrap_err();
        assert_eq!(err.class(), ErrorClass::Input);
        // Nothing was left behind by the check.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    // Sampling itself is tested end to end on the binary (tests/crypto_flamegraph.rs):
    // SIGPROF in this shared test process would interrupt the other tests' threads.
}
