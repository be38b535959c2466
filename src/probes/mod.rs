//! Probes inside the process (`tlsperf observe --probes`): eBPF uprobes on OpenSSL's
//! handshake calls and Go's `crypto/tls` handshake functions, and the kernel's accept,
//! connect and TCP-state tracepoints, stitched in the kernel into one record per
//! handshake that splits the process's time into waiting (the accept queue, the event
//! loop or scheduler before the first call, waiting for the peer) and work (inside the
//! library), with the process and thread that did it. No kprobes: this needs uprobes,
//! tracepoints (tracefs) and BPF ring buffers.
//!
//! Modules:
//! - `bpf/`: the BPF programs' C source, the compiled object tlsperf embeds, and the
//!   script that rebuilds it.
//! - [`gosym`]: Go binaries → the handshake functions' entry and return offsets.
//! - [`target`]: processes and files → the libraries to attach to.
//! - [`loader`]: the object loaded and attached (aya).
//! - [`calibrate`]: a probe pair's own time, measured at attach time and not charged to
//!   the functions timed.
//! - [`handoff`]: the attachments removed by a process of their own, so tlsperf exits at once.
//! - [`event`]: a ring-buffer record → a [`event::ProbeRecord`].
//! - [`report`]: records → the `probes` part of an observation.
//! - [`join`]: records ↔ captured connections, by addresses and time.
//! - [`owners`]: the process at each end of every TCP connection, from tracepoints alone
//!   (observe's process attribution; no TLS library needed).
//! - [`follow`]: files replaced and processes gone or restarted while the run goes on,
//!   attached to again or said in words.
//! - [`workload`]: a process's cgroup, container and Kubernetes pod.
//!
//! [`Session`] runs it all: [`Session::start`] (everything attached), [`Session::arm`]
//! (from now on handshakes are followed: none is counted that began before every probe
//! was in place), [`Session::poll`] now and then, [`Session::drain`] (handshakes in
//! progress end, none begins) and [`Session::finish`] (nothing more is recorded; the
//! probes are detached).

pub mod calibrate;
pub mod event;
pub mod follow;
pub mod gosym;
pub mod handoff;
pub mod join;
pub mod loader;
pub mod owners;
pub mod report;
pub mod target;
pub mod workload;

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Classify, ErrorClass};
use event::ProbeRecord;
pub use join::WireIndex;
pub use report::{ProbeReport, WireHandshake};

/// What to probe.
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    /// These processes and their descendants (forked later too).
    pub pids: Vec<u32>,
    /// These executables or libraries, in every process that runs them.
    pub exes: Vec<PathBuf>,
    /// OpenSSL: probe SSL_read, SSL_write, their `_ex` forms and SSL_peek too, for
    /// programs that let them drive the handshake (no SSL_do_handshake, SSL_accept or
    /// SSL_connect). Off by default: they run on every request, not only handshakes.
    pub read_write: bool,
    /// Go: split work into on CPU and blocked too, with uprobes on `runtime.execute` and
    /// `runtime.gopark`. Off by default: they trap on every goroutine switch of the
    /// program, handshake or not (OpenSSL's split, from `sched:sched_switch`, is always
    /// on).
    pub go_on_cpu: bool,
    /// The parts of work besides Go's certificate callback (chain verification,
    /// signature, key exchange, trust-store loading): a uprobe and a uretprobe on each
    /// libcrypto function (OpenSSL: six hits per full handshake) and Go's part functions.
    /// Off by default: they cost nginx 6–11% more CPU per full handshake than the probes
    /// without them (docs/benchmarks.md), against the 2% a default may cost.
    pub parts: bool,
}

/// Why the probes cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The kernel or the permissions lack something the probes need.
    #[error("{0}")]
    Unsupported(String),
    /// What to probe could not be found or used.
    #[error("{0}")]
    Target(String),
    /// The BPF object could not be loaded.
    #[error("cannot load the BPF probes: {0}")]
    Load(String),
    /// A probe could not be attached.
    #[error("cannot attach a probe to {what}: {reason}")]
    Attach {
        /// Where.
        what: String,
        /// Why.
        reason: String,
    },
    /// SIGINT or SIGTERM came while the probes were being attached: what was attached is
    /// removed (by a process of its own) and nothing is observed.
    #[error(
        "interrupted while attaching the probes ({attached} attached, now removed): nothing was observed"
    )]
    Interrupted {
        /// The attachments made before the signal.
        attached: usize,
    },
}

impl Classify for ProbeError {
    fn class(&self) -> ErrorClass {
        match self {
            ProbeError::Unsupported(_) | ProbeError::Target(_) => ErrorClass::Input,
            ProbeError::Interrupted { .. } => ErrorClass::Interrupted,
            ProbeError::Load(_) | ProbeError::Attach { .. } => ErrorClass::Runtime,
        }
    }
}

pub(crate) const TRACEFS: &str = "/sys/kernel/tracing";

/// Asks the attachment of the probes under way, or the next, to stop, as SIGINT or
/// SIGTERM do when nothing else handles them: for a caller that handles those signals
/// itself (the CLI's live runs register theirs before the probes are attached, so that
/// no signal between the attachment and the run meets the default action). What was
/// attached is removed and [`ProbeError::Interrupted`] returned; a later attachment in
/// the same process (one that `follow` makes) is refused the same way.
pub fn interrupt_attaching() {
    loader::request_interrupt();
}

/// Checks what the probes need of this kernel and these permissions, in plain words.
/// Mounts tracefs when it is missing and this process may (as `perf` and `bpftrace`
/// users are told to).
pub fn check_kernel() -> Result<Vec<String>, ProbeError> {
    let mut notes = Vec::new();
    if !bpf_capable() {
        return Err(ProbeError::Unsupported(
            "--probes needs the capabilities CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), \
             which this process does not have: run it as root (in a container, one given \
             those capabilities), or grant them with sudo setcap \
             cap_bpf,cap_perfmon,cap_dac_read_search+ep $(command -v tlsperf); packet \
             observation works without them"
                .into(),
        ));
    }
    if !Path::new("/sys/bus/event_source/devices/uprobe/type").exists() {
        return Err(ProbeError::Unsupported(
            "this kernel has no uprobes (no /sys/bus/event_source/devices/uprobe): it was \
             built without CONFIG_UPROBE_EVENTS, which --probes needs"
                .into(),
        ));
    }
    if let Ok(l) = std::fs::read_to_string("/sys/kernel/security/lockdown")
        && l.contains("[confidentiality]")
    {
        return Err(ProbeError::Unsupported(
            "the kernel is locked down (lockdown=confidentiality): it forbids BPF programs \
             from reading process memory, which --probes needs"
                .into(),
        ));
    }
    mount_tracefs(&mut notes)?;
    Ok(notes)
}

/// True when this process may load BPF programs that read other processes: CAP_BPF and
/// CAP_PERFMON, or CAP_SYS_ADMIN.
pub(crate) fn bpf_capable() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| cap_eff & (1u64 << bit) != 0;
    // CAP_SYS_ADMIN 21; CAP_PERFMON 38, CAP_BPF 39 (Linux 5.8+).
    has(21) || (has(38) && has(39))
}

/// Makes the kernel's tracepoints reachable: mounts tracefs at [`TRACEFS`] when it is not
/// (a note says so).
pub(crate) fn mount_tracefs(notes: &mut Vec<String>) -> Result<(), ProbeError> {
    let events = Path::new(TRACEFS).join("events/syscalls");
    if !events.exists() {
        let target =
            std::ffi::CString::new(TRACEFS).map_err(|e| ProbeError::Unsupported(e.to_string()))?;
        let fstype = c"tracefs";
        // SAFETY: all three are valid NUL-terminated strings; no data argument.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 || !events.exists() {
            return Err(ProbeError::Unsupported(format!(
                "the kernel's tracepoints are not reachable: tracefs is not mounted at \
                 {TRACEFS} and mounting it failed ({}); mount it with `mount -t tracefs \
                 tracefs {TRACEFS}` (in a container, bind-mount the host's)",
                std::io::Error::last_os_error()
            )));
        }
        notes.push(format!(
            "mounted tracefs at {TRACEFS} (the kernel's tracepoints need it)"
        ));
    }
    Ok(())
}

/// The libraries `opts` name (its `--exe` paths made absolute: [`target::exe_paths`]);
/// the system's libssl when it names none. One target per file (device and inode).
pub fn targets(opts: &ProbeOptions) -> Result<Vec<target::Target>, ProbeError> {
    let mut out = Vec::new();
    for pid in &opts.pids {
        let found = target::pid_targets(*pid)?;
        // A process with no TLS library yet may start some later: fine when --exe
        // names what they will load.
        if !found.iter().any(target::Target::has_calls) && opts.exes.is_empty() {
            return Err(target::no_library(*pid));
        }
        out.extend(found);
    }
    for exe in target::exe_paths(&opts.exes)? {
        let t = target::exe_target(&exe)?;
        // A libssl's parts of work are its libcrypto's.
        let beside = target::libcrypto_beside(&t.path);
        out.push(t);
        if let Some(crypto) = beside
            && let Some(c) = target::file_target(&crypto)?
        {
            out.push(c);
        }
    }
    if opts.pids.is_empty() && opts.exes.is_empty() {
        out = target::system_targets()?;
    }
    // One attachment per file, however it was named: by device and inode
    // (`/lib/…/libssl.so.3` from --exe and `/usr/lib/…/libssl.so.3` from a process's map
    // are one file where /lib links to /usr/lib; probed twice, each call would be counted
    // twice).
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|t| target::inode(&t.path).is_none_or(|id| seen.insert(id)));
    Ok(out)
}

/// How long a record waits for its connection's capture.
const JOIN_WAIT: Duration = Duration::from_secs(5);

/// How long the end of a run waits for the handshakes in progress to finish.
const DRAIN: Duration = Duration::from_millis(300);

/// Called with each probed handshake seen from its start, as it is aggregated (e.g.
/// Prometheus metrics).
pub struct Listener(pub Box<dyn FnMut(&ProbeRecord) + Send>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listener")
    }
}

/// The probes, running: attached in the kernel, a thread reading the ring buffer.
#[derive(Debug)]
pub struct Session {
    /// `--pid` was given: the kernel probes only the processes in its filter.
    filtered: bool,
    listener: Option<Listener>,
    loaded: loader::Loaded,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    rx: Receiver<ProbeRecord>,
    received: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    agg: report::ProbeAggregate,
    pending: VecDeque<(ProbeRecord, Instant)>,
    wire: Option<Arc<Mutex<WireIndex>>>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC (the join's clocks).
    offset: i128,
    in_progress_at_end: u64,
    /// When draining began, and when the kernel's table was last looked at.
    draining: Option<(Instant, Instant)>,
    follower: follow::Watcher,
    /// When the `--pid` filter was last handed to the follower.
    filter_sent: Instant,
    /// What the follower did or could not do, not yet taken by [`Session::take_events`].
    events: Vec<follow::Event>,
    /// The same, kept for the report (at most [`follow::MAX_EVENTS`]).
    followed: Vec<String>,
    workloads: workload::Cache,
}

/// The most records waiting for their captured connection.
const PENDING_KEPT: usize = 1 << 18;

/// The records queued between the reader and [`Session::poll`].
const QUEUE: usize = 1 << 16;

fn read_events(
    mut ring: aya::maps::RingBuf<aya::maps::MapData>,
    tx: SyncSender<ProbeRecord>,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
) {
    let fd = ring.as_raw_fd();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        while let Some(item) = ring.next() {
            received.fetch_add(1, Ordering::Relaxed);
            let Ok(r) = event::decode(&item) else {
                tracing::warn!("a probe record of {} bytes could not be read", item.len());
                continue;
            };
            match tx.try_send(r) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        if stopping {
            return;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, 50) };
    }
}

impl Session {
    /// Checks the kernel, finds the libraries, loads and attaches the probes and starts
    /// reading; nothing is followed until [`Session::arm`]. `join`: the ports of a live
    /// capture to join records with (open it before arming, so that it sees every
    /// connection the probes do).
    pub fn start(
        opts: &ProbeOptions,
        join: Option<&[u16]>,
    ) -> Result<(Session, Vec<String>), ProbeError> {
        let notes = check_kernel()?;
        let targets = targets(opts)?;
        let exes = target::exe_paths(&opts.exes)?;
        let follower = follow::Follower::new(&opts.pids, &exes, &targets).spawn();
        let mut filter = Vec::new();
        for pid in &opts.pids {
            filter.push(*pid);
            filter.extend(target::descendants(*pid));
        }
        let mut loaded = loader::load(
            &targets,
            (!opts.pids.is_empty()).then_some(filter.as_slice()),
            opts.read_write,
            opts.go_on_cpu,
            opts.parts,
        )?;
        let ring = loader::take_events(&mut loaded)?;
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let reader = {
            let (stop, received, dropped) = (
                Arc::clone(&stop),
                Arc::clone(&received),
                Arc::clone(&dropped),
            );
            std::thread::Builder::new()
                .name("tlsperf-probes".into())
                .spawn(move || read_events(ring, tx, stop, received, dropped))
                .map_err(|e| ProbeError::Load(format!("cannot start the reader thread: {e}")))?
        };
        Ok((
            Session {
                filtered: !opts.pids.is_empty(),
                listener: None,
                loaded,
                stop,
                reader: Some(reader),
                rx,
                received,
                dropped,
                agg: report::ProbeAggregate::default(),
                pending: VecDeque::new(),
                wire: join.map(|ports| Arc::new(Mutex::new(WireIndex::new(ports.to_vec())))),
                offset: join::clock_offset(),
                in_progress_at_end: 0,
                draining: None,
                follower,
                filter_sent: Instant::now(),
                events: Vec::new(),
                followed: Vec::new(),
                workloads: workload::Cache::default(),
            },
            notes,
        ))
    }

    /// Every probe is in place: from now on a handshake is followed from its start.
    pub fn arm(&mut self) -> Result<(), ProbeError> {
        loader::arm(&mut self.loaded)
    }

    /// Begins the end of the run: no handshake begins any more, those in progress go on
    /// to their end. (A capture joined to the probes keeps reading meanwhile.)
    pub fn drain(&mut self) {
        if self.draining.is_none() {
            // A failure leaves the probes armed: the run then ends at `finish`.
            let _ = loader::drain(&mut self.loaded);
            self.draining = Some((Instant::now(), Instant::now()));
        }
    }

    /// True once draining is over: no handshake is in progress (the kernel's table is
    /// looked at every 20 ms at most), or [`DRAIN`] has passed.
    pub fn drained(&mut self) -> bool {
        let Some((began, looked)) = &mut self.draining else {
            return false;
        };
        if began.elapsed() >= DRAIN {
            return true;
        }
        if looked.elapsed() < Duration::from_millis(20) {
            return false;
        }
        *looked = Instant::now();
        loader::in_progress(&self.loaded).unwrap_or(0) == 0
    }

    /// Calls `listener` with every probed handshake from now on.
    pub fn on_record(&mut self, listener: Listener) {
        self.listener = Some(listener);
    }

    /// Where the packet path puts its completed handshakes (when joining).
    pub fn wire_index(&self) -> Option<Arc<Mutex<WireIndex>>> {
        self.wire.clone()
    }

    /// Takes the records read so far: each joins its captured connection, or waits for it
    /// up to a few seconds (`all`: not any longer).
    pub fn poll(&mut self, all: bool) {
        if !all {
            self.follow_up();
        }
        while let Ok(mut r) = self.rx.try_recv() {
            r.workload = self.workloads.of(r.pid);
            if let Some(Listener(f)) = &mut self.listener
                && r.whole
            {
                f(&r);
            }
            self.pending.push_back((r, Instant::now()));
        }
        let Some(wire) = &self.wire else {
            for (r, _) in self.pending.drain(..) {
                self.agg.add(&r, None);
            }
            return;
        };
        let mut index = match wire.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        self.offset = join::clock_offset();
        let mut keep = VecDeque::new();
        // Beyond PENDING_KEPT, the oldest wait no longer: memory stays bounded whatever
        // the rate.
        let over = self.pending.len().saturating_sub(PENDING_KEPT);
        for (i, (r, at)) in self.pending.drain(..).enumerate() {
            if !r.whole {
                self.agg.add(&r, None);
                continue;
            }
            match index.take(&r, self.offset) {
                Some(w) => self.agg.add(&r, Some(&w)),
                None if all || i < over || at.elapsed() > JOIN_WAIT => {
                    if index.covers(&r) {
                        self.agg.unmatched();
                    }
                    self.agg.add(&r, None);
                }
                None => keep.push_back((r, at)),
            }
        }
        self.pending = keep;
        index.flush_lines(all, self.offset);
    }

    /// Applies what the follower found, if it found anything ([`follow`]): cheap enough
    /// to call for every captured frame, so that a replaced file is attached to as soon as
    /// the follower has looked at it, not at the next [`Session::poll`].
    pub fn follow_now(&mut self) {
        if self.follower.pending() {
            self.follow_up();
        }
    }

    /// Applies what the follower found ([`follow`]): attaches to the files that
    /// replaced those given, takes what is gone out of the `--pid` filter, and keeps what
    /// happened for [`Session::take_events`] and the report; hands it the filter to look
    /// at about once a second.
    fn follow_up(&mut self) {
        let mut events = Vec::new();
        for found in self.follower.found() {
            for (t, said) in found.attach {
                match loader::attach_target(&mut self.loaded, &t) {
                    Ok(()) => events.push(follow::Event {
                        warning: false,
                        text: said,
                    }),
                    Err(e) => events.push(follow::Event {
                        warning: true,
                        text: format!(
                            "{} changed and cannot be attached to again ({e}): the \
                             processes started from it are not observed",
                            t.path.display()
                        ),
                    }),
                }
            }
            for pid in found.stale {
                // A pid that stays is probed as before: no worse than not looking.
                let _ = loader::unfilter(&mut self.loaded, pid);
                self.workloads.forget(pid);
            }
            events.extend(found.events);
        }
        if self.filtered && self.filter_sent.elapsed() >= follow::PERIOD {
            self.filter_sent = Instant::now();
            match loader::filtered_pids(&self.loaded) {
                Ok(pids) => self.follower.filter(pids),
                Err(e) => tracing::warn!("cannot read the --pid filter: {e}"),
            }
        }
        for e in &events {
            if self.followed.len() < follow::MAX_EVENTS {
                self.followed.push(e.text.clone());
            }
        }
        self.events.extend(events);
    }

    /// What the probes followed (files attached to again) or could not (processes gone,
    /// files replaced by ones that cannot be probed) since the last call, in words.
    pub fn take_events(&mut self) -> Vec<follow::Event> {
        std::mem::take(&mut self.events)
    }

    /// The report so far.
    pub fn snapshot(&self) -> ProbeReport {
        let mut r = self.agg.report();
        r.attached = self.loaded.attached.clone();
        r.followed = self.followed.clone();
        self.fill_counts(&mut r.counts);
        if let Ok(loads) = loader::trust_loads(&self.loaded) {
            for (pid, comm, loads, ns) in loads {
                if r.trust_loads.len() >= report::MAX_ROWS {
                    break;
                }
                r.trust_loads.insert(
                    format!("{comm} (pid {pid})"),
                    report::TrustLoads {
                        loads,
                        total_ns: ns,
                    },
                );
            }
        }
        if let Ok(buckets) = loader::kernel_histograms(&self.loaded) {
            for (pid, role, phase, _bucket, n) in buckets {
                // The span phase counts every completed handshake once.
                if phase == 4 {
                    let role = match role {
                        1 => "server",
                        2 => "client",
                        _ => "unknown",
                    };
                    *r.kernel_counts
                        .entry(format!("pid {pid} {role}"))
                        .or_default() += n;
                }
            }
        }
        r
    }

    /// The counts so far (what [`Session::snapshot`] says of them), without building the
    /// rows: what an agent needs each second (lost records for `/metrics`).
    pub fn counts(&self) -> report::ProbeCounts {
        let mut c = self.agg.counts();
        self.fill_counts(&mut c);
        c
    }

    /// The kernel's and the reader's counts, into `c`.
    fn fill_counts(&self, c: &mut report::ProbeCounts) {
        if let Ok([started, emitted, lost, table_full]) = loader::counters(&self.loaded) {
            c.started = started;
            c.emitted = emitted;
            c.lost = lost;
            c.table_full = table_full;
        }
        c.received = self.received.load(Ordering::Relaxed);
        c.dropped = self.dropped.load(Ordering::Relaxed);
        c.in_progress_at_end = self.in_progress_at_end;
        if let Some(w) = &self.wire {
            let w = match w.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            c.unmatched_wire = w.unmatched(self.reader.is_none());
        }
    }

    /// Stops the reader thread once it has read what the ring buffer holds.
    fn stop_reader(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }

    /// Ends the run: no handshake begins any more, those in progress are given
    /// [`DRAIN`] to finish (what is still in progress then is counted as such, neither
    /// completed nor failed), then nothing more is recorded, what the ring buffer holds
    /// is read, and the report returned while the probes are detached (see
    /// [`loader::detach`]).
    pub fn finish(mut self) -> ProbeReport {
        self.drain();
        while !self.drained() {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.in_progress_at_end = loader::in_progress(&self.loaded).unwrap_or(0);
        // Nothing more is recorded: what the ring buffer holds now is all there is.
        let _ = loader::disarm(&mut self.loaded);
        self.stop_reader();
        self.poll(true);
        let report = self.snapshot();
        loader::detach(&mut self.loaded);
        report
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop_reader();
    }
}
