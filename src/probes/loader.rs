//! Loading the committed BPF object (`bpf/probes.bpf.o`) with aya and attaching its
//! programs: the kernel's tracepoints always, OpenSSL's calls to each library found, Go's
//! handshake functions at their entry and at every return instruction. Owns the
//! attachment (nothing is counted until [`arm`], once everything is attached; SIGINT or
//! SIGTERM while attaching stops before the next probe and hands what was attached to
//! [`detach`]), the draining, disarming and detachment, and the maps' layout; reading the
//! ring buffer is [`super::Session`]'s.

use std::path::Path;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::trace_point::TracePointLink;
use aya::programs::uprobe::UProbeLink;
use aya::programs::{TracePoint, UProbe, uprobe::UProbeScope};
use aya::{Ebpf, EbpfLoader};

use super::ProbeError;
use super::gosym::GoFunction;
use super::handoff::Holder;
use super::target::{GO_FUNCTIONS, GO_PARTS, GO_SCHEDULER, OPENSSL_PARTS, Target, TargetKind};
use aya::programs::uprobe::UProbeAttachLocation;

/// The BPF object, built by `bpf/build.sh` from `bpf/probes.bpf.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!("bpf/probes.bpf.o");

/// The kernel's tracepoints: (program, category, event). Every syscall is seen through
/// the two raw_syscalls tracepoints: each attachment takes the kernel a grace period to
/// remove, so few is fast (the probed process's cost per handshake measured the same,
/// within the noise, with the syscalls' own tracepoints: docs/benchmarks.md). accept,
/// accept4 and connect tie a socket to its connection; reads and writes name a
/// handshake's connection when the library was not given its descriptor (OpenSSL driven
/// through BIOs, a wrapped Go connection), and reads time the waits for the peer.
/// sched_switch times the running intervals of a thread inside a handshake (on CPU).
const TRACEPOINTS: [(&str, &str, &str); 5] = [
    ("on_fork", "sched", "sched_process_fork"),
    ("on_switch", "sched", "sched_switch"),
    ("on_set_state", "sock", "inet_sock_set_state"),
    ("on_sys_enter", "raw_syscalls", "sys_enter"),
    ("on_sys_exit", "raw_syscalls", "sys_exit"),
];

/// `settings.state`: nothing begins (before every probe is attached).
const STATE_IDLE: u32 = 0;
/// `settings.state`: handshakes begin and are followed.
const STATE_ARMED: u32 = 1;
/// `settings.state`: handshakes in progress finish; none begins.
const STATE_DRAINING: u32 = 2;

/// `settings.oncpu`: OpenSSL's handshakes' on-CPU time is measured (sched_switch).
const ONCPU_OPENSSL: u32 = 1;
/// `settings.oncpu`: Go's too (runtime.execute and runtime.gopark in every Go program).
const ONCPU_GO: u32 = 2;

/// `struct settings`: filter, child_pid_off, state, next_pid_off, oncpu, parts_openssl,
/// parts_go, pair_ns (see [`super::calibrate`]).
type Settings = [u32; 8];

/// The BPF programs that time each function of [`GO_PARTS`] (entry, return), in its order.
const GO_PART_PROGRAMS: [(&str, &str); 13] = [
    ("go_callback_enter", "go_callback_return"),
    ("go_verify_enter", "go_verify_return"),
    ("go_sign_ecdsa_enter", "go_sign_return"),
    ("go_sign_rsa_enter", "go_sign_return"),
    ("go_sign_ed25519_enter", "go_sign_return"),
    ("go_sign_ed25519_enter", "go_sign_return"),
    ("go_kex_keygen_enter", "go_kex_return"),
    ("go_kex_enter", "go_kex_return"),
    ("go_kex_enter", "go_kex_return"),
    ("go_kex_keygen_enter", "go_kex_return"),
    ("go_kex_enter", "go_kex_return"),
    ("go_trust_enter", "go_trust_return"),
    ("go_trust_enter", "go_trust_return"),
];

/// Each part's bit in `settings.parts_go` and `settings.parts_openssl` (`PART_*` of
/// probes.bpf.c).
const PART_BITS: [(&str, u32); 5] = [
    ("callback", 1 << 0),
    ("verification", 1 << 1),
    ("signature", 1 << 2),
    ("key_exchange", 1 << 3),
    ("trust_load", 1 << 4),
];

fn part_bit(part: &str) -> u32 {
    PART_BITS
        .iter()
        .find(|(p, _)| *p == part)
        .map_or(0, |(_, b)| *b)
}

/// The BPF programs that time each OpenSSL part of [`OPENSSL_PARTS`] (entry uprobe,
/// uretprobe), and its bit in `settings.parts_openssl` (`PART_*` of probes.bpf.c).
const OPENSSL_PART_PROGRAMS: [(&str, &str, &str); 4] = [
    ("verification", "ossl_verify_enter", "ossl_verify_return"),
    ("signature", "ossl_sign_enter", "ossl_sign_return"),
    ("key_exchange", "ossl_kex_enter", "ossl_kex_return"),
    ("trust_load", "ossl_trust_enter", "ossl_trust_return"),
];

/// OpenSSL's parts measured: a part's bit when every file probed that has any part
/// function (a libcrypto; a program with OpenSSL linked in) has one of that part's; none
/// when no such file is probed.
fn openssl_parts_measured(targets: &[Target]) -> u32 {
    let with_parts: Vec<Vec<&str>> = targets
        .iter()
        .map(Target::openssl_parts)
        .filter(|p| !p.is_empty())
        .collect();
    if with_parts.is_empty() {
        return 0;
    }
    OPENSSL_PART_PROGRAMS
        .iter()
        .filter(|(part, ..)| {
            with_parts.iter().all(|fs| {
                fs.iter()
                    .any(|f| OPENSSL_PARTS.iter().any(|(s, p)| s == f && p == part))
            })
        })
        .fold(0, |m, (part, ..)| m | part_bit(part))
}

/// OpenSSL's exported calls: (symbol, entry program, with the return probe).
const OPENSSL_CALLS: [(&str, &str, bool); 14] = [
    ("SSL_set_fd", "ssl_set_fd", false),
    ("SSL_set_accept_state", "ssl_set_accept_state", false),
    ("SSL_set_connect_state", "ssl_set_connect_state", false),
    ("SSL_do_handshake", "ssl_do_handshake", true),
    ("SSL_accept", "ssl_accept", true),
    ("SSL_connect", "ssl_connect", true),
    ("SSL_read_early_data", "ssl_read_early_data", true),
    ("SSL_write_early_data", "ssl_write_early_data", true),
    ("SSL_read", "ssl_read_write", true),
    ("SSL_write", "ssl_read_write", true),
    ("SSL_read_ex", "ssl_read_write", true),
    ("SSL_write_ex", "ssl_read_write", true),
    ("SSL_peek", "ssl_read_write", true),
    ("SSL_free", "ssl_free", false),
];

/// One attachment (a [`UProbeLink`] or a [`TracePointLink`]), owned apart from its
/// program so that all of them detach at once: dropping it detaches it.
type Link = Box<dyn Send>;

/// The probes in the kernel: the loaded object, its links and what was attached.
pub struct Loaded {
    /// The object; dropping it detaches what [`detach`] has not.
    pub ebpf: Ebpf,
    /// One line per attachment, for `-v` and the report.
    pub attached: Vec<String>,
    links: Vec<Link>,
    /// `settings` (the state is set apart).
    settings: Settings,
    /// OpenSSL's SSL_read/SSL_write family is probed too.
    read_write: bool,
    /// Go: (the scheduler points are attached, they were asked for, the parts measured):
    /// see [`attach_go`].
    go: (bool, bool, u32),
    /// `--probe-parts`: the parts of work besides Go's callback were asked for.
    parts: bool,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

fn attach_error(what: &str, e: impl std::fmt::Display) -> ProbeError {
    ProbeError::Attach {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut UProbe, ProbeError> {
    let p = ebpf
        .program_mut(name)
        .ok_or_else(|| attach_error(name, "the BPF object has no such program"))?;
    let p: &mut UProbe = p.try_into().map_err(|e| attach_error(name, e))?;
    if p.fd().is_err() {
        p.load().map_err(|e| attach_error(name, verifier(e)))?;
    }
    Ok(p)
}

/// aya's program error with the verifier's log cut to its last lines.
fn verifier(e: aya::programs::ProgramError) -> String {
    let s = e.to_string();
    let lines: Vec<&str> = s.lines().collect();
    if lines.len() > 12 {
        lines[lines.len() - 12..].join("\n")
    } else {
        s
    }
}

fn tracepoint(
    ebpf: &mut Ebpf,
    links: &mut Vec<Link>,
    (prog, category, event): (&str, &str, &str),
) -> Result<(), ProbeError> {
    let what = format!("tracepoint {category}:{event}");
    let p = ebpf
        .program_mut(prog)
        .ok_or_else(|| attach_error(&what, "the BPF object has no such program"))?;
    let p: &mut TracePoint = p.try_into().map_err(|e| attach_error(&what, e))?;
    if p.fd().is_err() {
        p.load().map_err(|e| attach_error(&what, verifier(e)))?;
    }
    let id = p
        .attach(category, event)
        .map_err(|e| attach_error(&what, e))?;
    let link: TracePointLink = p.take_link(id).map_err(|e| attach_error(&what, e))?;
    links.push(Box::new(link));
    Ok(())
}

fn uprobe(
    ebpf: &mut Ebpf,
    links: &mut Vec<Link>,
    prog: &str,
    path: &Path,
    at: aya::programs::uprobe::UProbeAttachLocation<'_>,
    what: &str,
) -> Result<(), ProbeError> {
    uprobe_in(ebpf, links, prog, path, at, what, UProbeScope::AllProcesses)
}

/// [`uprobe`], firing only in the processes `scope` says.
fn uprobe_in(
    ebpf: &mut Ebpf,
    links: &mut Vec<Link>,
    prog: &str,
    path: &Path,
    at: aya::programs::uprobe::UProbeAttachLocation<'_>,
    what: &str,
    scope: UProbeScope,
) -> Result<(), ProbeError> {
    if interrupt::came() {
        return Err(ProbeError::Interrupted {
            attached: links.len(),
        });
    }
    let p = program(ebpf, prog)?;
    let id = p
        .attach(at, path, scope)
        .map_err(|e| attach_error(what, e))?;
    let link: UProbeLink = p.take_link(id).map_err(|e| attach_error(what, e))?;
    links.push(Box::new(link));
    Ok(())
}

/// Where the tracepoint `sched:event` keeps `field` on this kernel (its tracefs format):
/// `sched_process_fork`'s `child_pid`, `sched_switch`'s `next_pid`.
fn field_offset(event: &str, field: &str) -> Result<u32, ProbeError> {
    let path = format!("{}/events/sched/{event}/format", super::TRACEFS);
    let format = std::fs::read_to_string(&path)
        .map_err(|e| ProbeError::Unsupported(format!("cannot read {path}: {e}")))?;
    let needle = format!(" {field};");
    format
        .lines()
        .find(|l| l.contains(&needle))
        .and_then(|l| l.split("offset:").nth(1))
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| {
            ProbeError::Unsupported(format!(
                "{path} has no {field} field: this kernel's {event} tracepoint is not one \
                 tlsperf knows"
            ))
        })
}

/// Loads the object and attaches everything `targets` need, unarmed: nothing is counted
/// until [`arm`]. `filter`: only these processes (and what they fork) are probed; `None`:
/// every process using the targets. `read_write`: OpenSSL's SSL_read/SSL_write family
/// too (for libraries that drive the handshake through them; each is a trap on every
/// call, handshake or not). `go_on_cpu`: Go's scheduler points too (on CPU and blocked;
/// each is a trap on every goroutine switch).
pub fn load(
    targets: &[Target],
    filter: Option<&[u32]>,
    read_write: bool,
    go_on_cpu: bool,
    parts: bool,
) -> Result<Loaded, ProbeError> {
    // SIGINT and SIGTERM end the attachment before the next probe (see [`interrupt`]).
    let guard = interrupt::Guard::install();
    let mut ebpf = EbpfLoader::new()
        .load(OBJECT)
        .map_err(|e| ProbeError::Load(e.to_string()))?;
    // The filter first, so that nothing fires unfiltered; the state idle until armed.
    // Go's on-CPU time, when asked for, needs both scheduler points in every Go program
    // probed.
    let go_sched = go_on_cpu
        && targets.iter().all(|t| match &t.kind {
            TargetKind::Go(functions) => GO_SCHEDULER
                .iter()
                .all(|n| functions.iter().any(|f| f.name == *n)),
            TargetKind::OpenSsl(_) => true,
        });
    // A part of Go's work is measured when one of its functions is in every Go program
    // probed.
    let go_has_part = |part: &str| {
        targets.iter().all(|t| match &t.kind {
            TargetKind::Go(functions) => GO_PARTS
                .iter()
                .any(|(f, p)| *p == part && functions.iter().any(|g| g.name == *f)),
            TargetKind::OpenSsl(_) => true,
        })
    };
    // Without --probe-parts only Go's certificate callback, which costs one probe pair.
    let parts_go = PART_BITS
        .iter()
        .filter(|(p, _)| (parts || *p == "callback") && go_has_part(p))
        .fold(0, |m, (_, bit)| m | bit);
    let parts_openssl = if parts {
        openssl_parts_measured(targets)
    } else {
        0
    };
    let mut settings = [
        u32::from(filter.is_some()),
        field_offset("sched_process_fork", "child_pid")?,
        STATE_IDLE,
        field_offset("sched_switch", "next_pid")?,
        ONCPU_OPENSSL | if go_sched { ONCPU_GO } else { 0 },
        parts_openssl,
        parts_go,
        0,
    ];
    write_settings(&mut ebpf, settings)?;
    if let Some(pids) = filter {
        let map = ebpf
            .map_mut("targets")
            .ok_or_else(|| ProbeError::Load("the BPF object has no targets map".into()))?;
        let mut t: HashMap<&mut MapData, u32, u8> =
            HashMap::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
        for pid in pids {
            t.insert(pid, 1, 0)
                .map_err(|e| ProbeError::Load(e.to_string()))?;
        }
    }
    let mut attached = Vec::new();
    let mut links = Vec::new();
    for tp in TRACEPOINTS {
        tracepoint(&mut ebpf, &mut links, tp)?;
    }
    attached.push(
        "kernel: sched_process_fork, sched_switch (on CPU), inet_sock_set_state, \
         raw_syscalls (accept, accept4, connect; read, write, recvfrom, sendto, recvmsg, \
         sendmsg, readv, writev of handshakes in progress)"
            .into(),
    );
    if parts_openssl != 0 {
        let mut attach = |ebpf: &mut Ebpf,
                          prog: &str,
                          path: &Path,
                          offset: u64,
                          what: &str,
                          scope: UProbeScope| {
            let at = aya::programs::uprobe::UProbeAttachLocation::AbsoluteOffset(offset);
            uprobe_in(ebpf, &mut links, prog, path, at, what, scope)
        };
        match super::calibrate::measure(&mut ebpf, &mut attach)? {
            Some(pair) => {
                settings[7] = pair.median_ns;
                write_settings(&mut ebpf, settings)?;
                attached.push(format!(
                    "calibration: a probe pair's own time {:.2} µs (median of {} calls of a \
                     function of tlsperf's that does nothing), taken off each OpenSSL part's \
                     timed call",
                    f64::from(pair.median_ns) / 1e3,
                    pair.calls
                ));
            }
            None => attached.push(
                "calibration: not made (tlsperf's own file not found): OpenSSL's parts \
                 include a probe pair's own time per call"
                    .into(),
            ),
        }
    }
    if targets
        .iter()
        .any(|t| matches!(t.kind, TargetKind::OpenSsl(_)))
    {
        let missing: Vec<&str> = OPENSSL_PART_PROGRAMS
            .iter()
            .filter(|(part, ..)| parts_openssl & part_bit(part) == 0)
            .map(|(part, ..)| *part)
            .collect();
        if !parts {
            attached.push(
                "openssl: parts of work (verification, signature, key exchange, trust \
                 loading) off: --probe-parts measures them"
                    .into(),
            );
        } else if !missing.is_empty() {
            attached.push(format!(
                "openssl: parts {} not measured: no libcrypto probed has them (each part \
                 needs one of its functions in every libcrypto probed; see docs/probes.md)",
                missing.join(", ")
            ));
        }
    }
    let mut loaded = Loaded {
        ebpf,
        attached,
        links,
        settings,
        read_write,
        go: (go_sched, go_on_cpu, parts_go),
        parts,
    };
    // On any failure what was attached is handed to a process of its own to remove
    // ([`detach`]), so the exit is not held back by the kernel's removal of each (a grace
    // period apiece).
    let mut result = Ok(());
    for t in targets {
        result = attach_target(&mut loaded, t);
        if result.is_err() {
            break;
        }
    }
    if result.is_ok() && interrupt::came() {
        result = Err(ProbeError::Interrupted {
            attached: loaded.links.len(),
        });
    }
    drop(guard);
    match result {
        Ok(()) => Ok(loaded),
        Err(e) => {
            detach(&mut loaded);
            Err(e)
        }
    }
}

/// Asks the attachment under way, or the next, to stop (see
/// [`super::interrupt_attaching`]).
pub(crate) fn request_interrupt() {
    interrupt::request();
}

/// SIGINT and SIGTERM while the probes are attached: noted (by an async-signal-safe
/// handler that sets a flag) instead of killing the process, whose exit would then wait
/// for the kernel to remove every probe attached so far, one grace period each.
mod interrupt {
    use std::sync::atomic::{AtomicBool, Ordering};

    static CAME: AtomicBool = AtomicBool::new(false);
    const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

    extern "C" fn note(_: libc::c_int) {
        CAME.store(true, Ordering::SeqCst);
    }

    /// What [`note`] does, for a caller that handles the signals itself.
    pub(crate) fn request() {
        CAME.store(true, Ordering::SeqCst);
    }

    /// Whether a signal came since the guard was installed, or a stop was
    /// [`request`]ed.
    pub(super) fn came() -> bool {
        CAME.load(Ordering::SeqCst)
    }

    /// The handler, for the signals whose disposition was the default; the default is
    /// put back when dropped (a signal noted meanwhile is then reported as
    /// [`super::ProbeError::Interrupted`], not raised again).
    pub(super) struct Guard {
        replaced: Vec<(libc::c_int, libc::sigaction)>,
    }

    impl Guard {
        /// Installs the handler where the disposition is the default (then a signal
        /// noted before is forgotten: it was another run's); where the caller handles
        /// the signals itself, it asks the attachment to stop with [`request`].
        pub(super) fn install() -> Guard {
            let mut replaced = Vec::new();
            for sig in SIGNALS {
                // SAFETY: sigaction with a zeroed (then filled) struct; the handler only
                // stores to an atomic, which is async-signal-safe.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                        || old.sa_sigaction != libc::SIG_DFL
                    {
                        continue;
                    }
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction = note as extern "C" fn(libc::c_int) as usize;
                    // Restarted, so no system call of the attachment fails with EINTR.
                    new.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut new.sa_mask);
                    if replaced.is_empty() {
                        CAME.store(false, Ordering::SeqCst);
                    }
                    if libc::sigaction(sig, &new, &mut old) == 0 {
                        replaced.push((sig, old));
                    }
                }
            }
            Guard { replaced }
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            for (sig, old) in &self.replaced {
                // SAFETY: puts back the action read at install.
                unsafe {
                    libc::sigaction(*sig, old, std::ptr::null_mut());
                }
            }
        }
    }
}

/// Attaches the probes `t` needs (at start, or to a file that replaced one while the
/// run goes on: see [`super::follow`]). Armed or not, they follow the run's state.
pub fn attach_target(loaded: &mut Loaded, t: &Target) -> Result<(), ProbeError> {
    let Loaded {
        ebpf,
        links,
        attached,
        read_write,
        go,
        settings,
        parts,
        ..
    } = loaded;
    let parts_openssl = settings[5];
    match &t.kind {
        TargetKind::OpenSsl(offered) => {
            let mut symbols = Vec::new();
            for (symbol, prog, ret) in OPENSSL_CALLS {
                let Some(&(_, at)) = offered.iter().find(|(s, _)| *s == symbol) else {
                    continue;
                };
                if prog == "ssl_read_write" && !*read_write {
                    continue;
                }
                let what = format!("{symbol} in {}", t.path.display());
                let entry = UProbeAttachLocation::SymbolOffset(symbol, at);
                uprobe(ebpf, links, prog, &t.path, entry, &what)?;
                if ret {
                    let at = symbol.into();
                    uprobe(ebpf, links, "ssl_call_return", &t.path, at, &what)?;
                }
                symbols.push(symbol.to_string());
            }
            for (symbol, part) in OPENSSL_PARTS {
                if parts_openssl & part_bit(part) == 0 {
                    continue;
                }
                let Some(&(_, offset)) = offered.iter().find(|(s, _)| *s == symbol) else {
                    continue;
                };
                let Some((_, enter, ret)) = OPENSSL_PART_PROGRAMS.iter().find(|(p, ..)| *p == part)
                else {
                    continue;
                };
                let what = format!("{symbol} in {}", t.path.display());
                let at = || UProbeAttachLocation::AbsoluteOffset(offset);
                uprobe(ebpf, links, enter, &t.path, at(), &what)?;
                uprobe(ebpf, links, ret, &t.path, at(), &what)?;
                symbols.push(format!("{symbol}: {part}"));
            }
            attached.push(format!(
                "openssl: {} ({})",
                t.path.display(),
                symbols.join(", ")
            ));
        }
        TargetKind::Go(functions) => {
            attach_go(ebpf, links, attached, &t.path, functions, *go, *parts)?
        }
    }
    Ok(())
}

/// The processes the `--pid` filter lets through (the kernel adds what they fork).
pub fn filtered_pids(loaded: &Loaded) -> Result<Vec<u32>, ProbeError> {
    let map = loaded
        .ebpf
        .map("targets")
        .ok_or_else(|| ProbeError::Load("the BPF object has no targets map".into()))?;
    let t: HashMap<&MapData, u32, u8> =
        HashMap::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    Ok(t.keys().filter_map(Result::ok).collect())
}

/// Takes `pid` out of the `--pid` filter (it exited, or names another process now).
pub fn unfilter(loaded: &mut Loaded, pid: u32) -> Result<(), ProbeError> {
    let map = loaded
        .ebpf
        .map_mut("targets")
        .ok_or_else(|| ProbeError::Load("the BPF object has no targets map".into()))?;
    let mut t: HashMap<&mut MapData, u32, u8> =
        HashMap::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    match t.remove(&pid) {
        Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
        Err(e) => Err(ProbeError::Load(e.to_string())),
    }
}

/// Attaches `prog` at the entry of Go function `f` in `path` and, with `ret`, that
/// program at each of its return instructions (never a uretprobe: see gosym).
fn go_function(
    ebpf: &mut Ebpf,
    links: &mut Vec<Link>,
    path: &Path,
    f: &GoFunction,
    prog: &str,
    ret: Option<&str>,
) -> Result<(), ProbeError> {
    let what = format!("{} in {}", f.name, path.display());
    uprobe(ebpf, links, prog, path, f.entry_offset.into(), &what)?;
    if let Some(ret) = ret {
        for at in &f.return_offsets {
            uprobe(ebpf, links, ret, path, (*at).into(), &what)?;
        }
    }
    Ok(())
}

/// A Go program's probes: its handshake functions, the parts of work found in it (when
/// found in every Go program probed: `parts_go`), and with `go_sched` the runtime's
/// scheduler points (`go_on_cpu`: they were asked for).
fn attach_go(
    ebpf: &mut Ebpf,
    links: &mut Vec<Link>,
    attached: &mut Vec<String>,
    path: &Path,
    functions: &[GoFunction],
    (go_sched, go_on_cpu, parts_go): (bool, bool, u32),
    parts: bool,
) -> Result<(), ProbeError> {
    let shown = path.display();
    for f in functions {
        let rets = f.return_offsets.len();
        if let Some(((_, part), (enter, ret))) = GO_PARTS
            .iter()
            .zip(GO_PART_PROGRAMS)
            .find(|((n, _), _)| *n == f.name)
        {
            if parts_go & part_bit(part) != 0 {
                go_function(ebpf, links, path, f, enter, Some(ret))?;
                attached.push(format!(
                    "go: {} in {shown} (entry and {rets} return instructions: {part})",
                    f.name
                ));
            }
        } else if GO_FUNCTIONS.contains(&f.name.as_str()) {
            let entry = if f.name.ends_with("serverHandshake") {
                "go_server_enter"
            } else {
                "go_client_enter"
            };
            go_function(ebpf, links, path, f, entry, Some("go_return"))?;
            attached.push(format!(
                "go: {} in {shown} (entry and {rets} return instructions)",
                f.name
            ));
        }
    }
    for (part, _) in PART_BITS {
        if !parts && part != "callback" {
            continue;
        }
        let names: Vec<&str> = GO_PARTS
            .iter()
            .filter(|(_, p)| *p == part)
            .map(|(f, _)| *f)
            .collect();
        if !names.iter().any(|n| functions.iter().any(|g| g.name == *n)) {
            attached.push(format!(
                "go: {shown} has none of {} (inlined or absent): Go handshakes' {part} part \
                 is not measured",
                names.join(", ")
            ));
        }
    }
    let missing: Vec<&str> = GO_SCHEDULER
        .iter()
        .filter(|n| !functions.iter().any(|f| f.name == **n))
        .copied()
        .collect();
    attached.push(if go_sched {
        for f in functions
            .iter()
            .filter(|f| GO_SCHEDULER.contains(&f.name.as_str()))
        {
            let prog = if f.name == "runtime.execute" {
                "go_execute"
            } else {
                "go_park"
            };
            go_function(ebpf, links, path, f, prog, None)?;
        }
        format!(
            "go: {} in {shown} (entries: on CPU)",
            GO_SCHEDULER.join(", ")
        )
    } else if !go_on_cpu {
        format!("go: {shown}: on CPU and blocked not measured (--probe-go-on-cpu)")
    } else if missing.is_empty() {
        format!(
            "go: {shown}: on-CPU time not measured (another Go program probed lacks the \
             runtime's scheduler points)"
        )
    } else {
        format!(
            "go: {shown} has no {}: Go handshakes' on-CPU time is not measured",
            missing.join(" or ")
        )
    });
    Ok(())
}

fn write_settings(ebpf: &mut Ebpf, value: Settings) -> Result<(), ProbeError> {
    let map = ebpf
        .map_mut("settings")
        .ok_or_else(|| ProbeError::Load("the BPF object has no settings map".into()))?;
    let mut settings: Array<&mut MapData, Settings> =
        Array::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    // struct settings in host order.
    settings
        .set(0, value, 0)
        .map_err(|e| ProbeError::Load(e.to_string()))
}

fn set_state(loaded: &mut Loaded, state: u32) -> Result<(), ProbeError> {
    loaded.settings[2] = state;
    write_settings(&mut loaded.ebpf, loaded.settings)
}

/// Every probe is attached: handshakes, sockets and SSL objects from now on are
/// followed.
pub fn arm(loaded: &mut Loaded) -> Result<(), ProbeError> {
    set_state(loaded, STATE_ARMED)
}

/// The run is ending: handshakes in progress are followed to their end, none begins.
pub fn drain(loaded: &mut Loaded) -> Result<(), ProbeError> {
    set_state(loaded, STATE_DRAINING)
}

/// Handshakes still in progress in the kernel's table.
pub fn in_progress(loaded: &Loaded) -> Result<u64, ProbeError> {
    let map = loaded
        .ebpf
        .map("hs")
        .ok_or_else(|| ProbeError::Load("the BPF object has no hs map".into()))?;
    let h: HashMap<&MapData, [u8; 16], [u8; 176]> =
        HashMap::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    Ok(h.keys().filter(Result::is_ok).count() as u64)
}

/// Stops every program from recording anything new (handshakes in progress included):
/// what the ring buffer holds then is the run's last word.
pub fn disarm(loaded: &mut Loaded) -> Result<(), ProbeError> {
    set_state(loaded, STATE_IDLE)
}

/// Detaches every program without waiting for the kernel, which removes one attachment
/// at a time, each after a grace period (~60 ms each on this kind of VM, 1.9 s for 33
/// attachments whether dropped from one thread or 33), and would hold an exit back as
/// long. The links go to a process of their own ([`Holder`]), whose exit removes them;
/// when it cannot be forked, to a thread of this process, which then does not exit
/// before the kernel is done. Either way nothing stays attached once they are gone.
/// Disarm first: until its link is gone, a program still runs.
pub fn detach(loaded: &mut Loaded) {
    let links = std::mem::take(&mut loaded.links);
    if links.is_empty() {
        return;
    }
    if let Some(holder) = Holder::spawn() {
        // Cheap: the holder's copies keep every attachment until it exits.
        drop(links);
        holder.release();
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("tlsperf-detach".into())
        .spawn(move || {
            // Dropped side by side: the kernel still takes them one at a time, but
            // their grace periods overlap (1.9 s for 33, against 3.0 s in turn).
            std::thread::scope(|s| {
                for link in links {
                    let spawned = std::thread::Builder::new()
                        .name("tlsperf-detach".into())
                        .spawn_scoped(s, move || drop(link));
                    drop(spawned);
                }
            });
        });
    // A thread that cannot start drops the links here, in turn.
    drop(spawned);
}

/// The ring buffer of finished handshakes, taken out of the object for the reader.
pub fn take_events(loaded: &mut Loaded) -> Result<RingBuf<MapData>, ProbeError> {
    let map = loaded
        .ebpf
        .take_map("events")
        .ok_or_else(|| ProbeError::Load("the BPF object has no events map".into()))?;
    RingBuf::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))
}

/// The kernel's counters: started, emitted, lost (ring buffer full), table full.
pub fn counters(loaded: &Loaded) -> Result<[u64; 4], ProbeError> {
    let map = loaded
        .ebpf
        .map("counters")
        .ok_or_else(|| ProbeError::Load("the BPF object has no counters map".into()))?;
    let a: PerCpuArray<&MapData, u64> =
        PerCpuArray::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    let mut out = [0u64; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let per_cpu = a
            .get(&(i as u32), 0)
            .map_err(|e| ProbeError::Load(e.to_string()))?;
        *o = per_cpu.iter().sum();
    }
    Ok(out)
}

/// Trust-store loading per process as the kernel counted it: (pid, comm, loads, ns).
pub type TrustLoads = (u32, String, u64, u64);

/// The kernel's per-process count of trust-store loads (`trust_procs`).
pub fn trust_loads(loaded: &Loaded) -> Result<Vec<TrustLoads>, ProbeError> {
    let map = loaded
        .ebpf
        .map("trust_procs")
        .ok_or_else(|| ProbeError::Load("the BPF object has no trust_procs map".into()))?;
    // struct trust_proc { u64 ns; u64 loads; char comm[16]; } in host order.
    let h: HashMap<&MapData, u32, [u8; 32]> =
        HashMap::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    let mut out = Vec::new();
    for kv in h.iter() {
        let (pid, v) = kv.map_err(|e| ProbeError::Load(e.to_string()))?;
        let u = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v[i..i + 8]);
            u64::from_ne_bytes(b)
        };
        let comm = &v[16..];
        let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
        out.push((
            pid,
            String::from_utf8_lossy(&comm[..end]).into_owned(),
            u(8),
            u(0),
        ));
    }
    Ok(out)
}

/// One bucket of a kernel histogram: (pid, role 0–2, phase 0–4, log2 bucket, count).
pub type KernelBucket = (u32, u8, u8, u8, u64);

/// The kernel's log2 histograms, bucket by bucket.
pub fn kernel_histograms(loaded: &Loaded) -> Result<Vec<KernelBucket>, ProbeError> {
    let map = loaded
        .ebpf
        .map("hist")
        .ok_or_else(|| ProbeError::Load("the BPF object has no hist map".into()))?;
    let h: HashMap<&MapData, u64, u64> =
        HashMap::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
    let mut out = Vec::new();
    for kv in h.iter() {
        let (k, v) = kv.map_err(|e| ProbeError::Load(e.to_string()))?;
        // struct hist_key { u32 tgid; u8 role, phase, bucket, pad; } in host order.
        let b = k.to_ne_bytes();
        out.push((
            u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            b[4],
            b[5],
            b[6],
            v,
        ));
    }
    Ok(out)
}
