//! Loading the committed BPF object (`bpf/probes.bpf.o`) with aya and attaching its
//! programs: the kernel's tracepoints always, OpenSSL's calls to each library found, Go's
//! handshake functions at their entry and at every return instruction. Owns the
//! attachment and the maps' layout; reading the ring buffer is [`super::Session`]'s.

use std::path::Path;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::{TracePoint, UProbe, uprobe::UProbeScope};
use aya::{Ebpf, EbpfLoader};

use super::ProbeError;
use super::target::{Target, TargetKind};
use aya::programs::uprobe::UProbeAttachLocation;

/// The BPF object, built by `bpf/build.sh` from `bpf/probes.bpf.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!("bpf/probes.bpf.o");

/// The kernel's tracepoints: (program, category, event).
const TRACEPOINTS: [(&str, &str, &str); 8] = [
    ("on_fork", "sched", "sched_process_fork"),
    ("on_set_state", "sock", "inet_sock_set_state"),
    ("on_accept4_enter", "syscalls", "sys_enter_accept4"),
    ("on_accept4_exit", "syscalls", "sys_exit_accept4"),
    ("on_accept_enter", "syscalls", "sys_enter_accept"),
    ("on_accept_exit", "syscalls", "sys_exit_accept"),
    ("on_connect_enter", "syscalls", "sys_enter_connect"),
    ("on_connect_exit", "syscalls", "sys_exit_connect"),
];

/// Go only: reads on a connection in handshake, to tell waiting from work.
const GO_TRACEPOINTS: [(&str, &str, &str); 2] = [
    ("on_read_enter", "syscalls", "sys_enter_read"),
    ("on_read_exit", "syscalls", "sys_exit_read"),
];

/// OpenSSL's exported calls: (symbol, entry program, with the return probe).
const OPENSSL_CALLS: [(&str, &str, bool); 14] = [
    ("SSL_set_fd", "ssl_set_fd", false),
    ("SSL_set_accept_state", "ssl_set_accept_state", false),
    ("SSL_set_connect_state", "ssl_set_connect_state", false),
    ("SSL_do_handshake", "ssl_do_handshake", true),
    ("SSL_accept", "ssl_accept", true),
    ("SSL_connect", "ssl_connect", true),
    ("SSL_read_early_data", "ssl_early_data", true),
    ("SSL_write_early_data", "ssl_early_data", true),
    ("SSL_read", "ssl_read_write", true),
    ("SSL_write", "ssl_read_write", true),
    ("SSL_read_ex", "ssl_read_write", true),
    ("SSL_write_ex", "ssl_read_write", true),
    ("SSL_peek", "ssl_read_write", true),
    ("SSL_free", "ssl_free", false),
];

/// The probes in the kernel: the loaded object (its links detach when it is dropped)
/// and what was attached.
pub struct Loaded {
    /// The object; dropping it detaches every program.
    pub ebpf: Ebpf,
    /// One line per attachment, for `-v` and the report.
    pub attached: Vec<String>,
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

fn tracepoint(ebpf: &mut Ebpf, prog: &str, category: &str, event: &str) -> Result<(), ProbeError> {
    let what = format!("tracepoint {category}:{event}");
    let p = ebpf
        .program_mut(prog)
        .ok_or_else(|| attach_error(&what, "the BPF object has no such program"))?;
    let p: &mut TracePoint = p.try_into().map_err(|e| attach_error(&what, e))?;
    p.load().map_err(|e| attach_error(&what, verifier(e)))?;
    p.attach(category, event)
        .map_err(|e| attach_error(&what, e))?;
    Ok(())
}

fn uprobe(
    ebpf: &mut Ebpf,
    prog: &str,
    path: &Path,
    at: aya::programs::uprobe::UProbeAttachLocation<'_>,
    what: &str,
) -> Result<(), ProbeError> {
    let p = program(ebpf, prog)?;
    p.attach(at, path, UProbeScope::AllProcesses)
        .map_err(|e| attach_error(what, e))?;
    Ok(())
}

/// Where `sched_process_fork` keeps `child_pid` on this kernel (its tracefs format).
fn child_pid_offset() -> Result<u32, ProbeError> {
    let path = format!("{}/events/sched/sched_process_fork/format", super::TRACEFS);
    let format = std::fs::read_to_string(&path)
        .map_err(|e| ProbeError::Unsupported(format!("cannot read {path}: {e}")))?;
    format
        .lines()
        .find(|l| l.contains(" child_pid;"))
        .and_then(|l| l.split("offset:").nth(1))
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| {
            ProbeError::Unsupported(format!(
                "{path} has no child_pid field: this kernel's fork tracepoint is not one \
                 tlsperf knows"
            ))
        })
}

/// Loads the object and attaches everything `targets` need. `filter`: only these
/// processes (and what they fork) are probed; `None`: every process using the targets.
/// `read_write`: OpenSSL's SSL_read/SSL_write family too (for libraries that drive the
/// handshake through them; each is a trap on every call, handshake or not).
pub fn load(
    targets: &[Target],
    filter: Option<&[u32]>,
    read_write: bool,
) -> Result<Loaded, ProbeError> {
    let mut ebpf = EbpfLoader::new()
        .load(OBJECT)
        .map_err(|e| ProbeError::Load(e.to_string()))?;
    // The filter first, so that nothing fires unfiltered.
    {
        let map = ebpf
            .map_mut("settings")
            .ok_or_else(|| ProbeError::Load("the BPF object has no settings map".into()))?;
        let mut settings: Array<&mut MapData, u64> =
            Array::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
        // struct settings { u32 filter; u32 child_pid_off; } in host order.
        let value = u64::from(filter.is_some()) | (u64::from(child_pid_offset()?) << 32);
        settings
            .set(0, value, 0)
            .map_err(|e| ProbeError::Load(e.to_string()))?;
    }
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
    for (prog, category, event) in TRACEPOINTS {
        tracepoint(&mut ebpf, prog, category, event)?;
    }
    attached
        .push("kernel: sched_process_fork, inet_sock_set_state, accept, accept4, connect".into());
    let mut go = false;
    for t in targets {
        match &t.kind {
            TargetKind::OpenSsl(offered) => {
                let mut symbols = Vec::new();
                for (symbol, prog, ret) in OPENSSL_CALLS {
                    let Some(&(_, at)) = offered.iter().find(|(s, _)| *s == symbol) else {
                        continue;
                    };
                    if prog == "ssl_read_write" && !read_write {
                        continue;
                    }
                    let what = format!("{symbol} in {}", t.path.display());
                    let entry = UProbeAttachLocation::SymbolOffset(symbol, at);
                    uprobe(&mut ebpf, prog, &t.path, entry, &what)?;
                    if ret {
                        uprobe(&mut ebpf, "ssl_call_return", &t.path, symbol.into(), &what)?;
                    }
                    symbols.push(symbol);
                }
                attached.push(format!(
                    "openssl: {} ({})",
                    t.path.display(),
                    symbols.join(", ")
                ));
            }
            TargetKind::Go(functions) => {
                go = true;
                for f in functions {
                    let entry = if f.name.ends_with("serverHandshake") {
                        "go_server_enter"
                    } else {
                        "go_client_enter"
                    };
                    let what = format!("{} in {}", f.name, t.path.display());
                    uprobe(&mut ebpf, entry, &t.path, f.entry_offset.into(), &what)?;
                    for ret in &f.return_offsets {
                        uprobe(&mut ebpf, "go_return", &t.path, (*ret).into(), &what)?;
                    }
                    attached.push(format!(
                        "go: {} in {} (entry and {} return instructions)",
                        f.name,
                        t.path.display(),
                        f.return_offsets.len()
                    ));
                }
            }
        }
    }
    if go {
        for (prog, category, event) in GO_TRACEPOINTS {
            tracepoint(&mut ebpf, prog, category, event)?;
        }
        attached.push("kernel: read (Go connections in handshake only)".into());
    }
    Ok(Loaded { ebpf, attached })
}

/// Detaches and unloads every program: nothing more is written to the ring buffer or
/// the maps, which stay readable.
pub fn detach(loaded: &mut Loaded) {
    for (_, p) in loaded.ebpf.programs_mut() {
        // A program that fails to unload stays attached until the object is dropped.
        let _ = match p {
            aya::programs::Program::UProbe(p) => p.unload(),
            aya::programs::Program::TracePoint(p) => p.unload(),
            _ => Ok(()),
        };
    }
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
