//! One handshake as the kernel side of the probes reports it: the ring-buffer record
//! (`struct hs_event` in `bpf/probes.bpf.c`, decoded field by field, no `unsafe`) and the
//! [`ProbeRecord`] it becomes, with every phase defined by the probe points that bound it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The size of `struct hs_event`.
pub const RAW_EVENT_LEN: usize = 13 * 8 + 4 * 4 + 16 + 16 + 2 * 3 + 5 + 1 + 2 + 2 + 16;

/// The parts of work, in the order of `PART_*` in `bpf/probes.bpf.c` (the names of their
/// phases): Go's certificate callback; chain verification; signing; key exchange;
/// trust-store loading inside the handshake calls.
pub const PARTS: [&str; 5] = [
    "callback",
    "verification",
    "signature",
    "key_exchange",
    "trust_load",
];

/// The index of `trust_load` in [`PARTS`].
const TRUST: usize = 4;

/// Which side of the connection the process was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// It accepted the connection (or called SSL_accept).
    Server,
    /// It connected (or called SSL_connect).
    Client,
    /// Neither was seen (an SSL object without a known socket or state).
    Unknown,
}

impl Role {
    /// `server`, `client` or `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
            Role::Unknown => "unknown",
        }
    }
}

/// The TLS library the handshake ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Library {
    /// OpenSSL or an OpenSSL-compatible library (libssl's exported calls).
    OpenSsl,
    /// Go's crypto/tls.
    Go,
}

impl Library {
    /// `openssl` or `go`.
    pub fn name(self) -> &'static str {
        match self {
            Library::OpenSsl => "openssl",
            Library::Go => "go",
        }
    }
}

/// How the handshake ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeResult {
    /// The library reported success.
    Ok,
    /// The handshake function returned an error (Go).
    Error,
    /// The connection's SSL object was freed before the handshake succeeded (OpenSSL:
    /// an alert, a reset, a timeout; the library does not say which).
    Abandoned,
}

impl HandshakeResult {
    /// `ok`, `error` or `abandoned`.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeResult::Ok => "ok",
            HandshakeResult::Error => "error",
            HandshakeResult::Abandoned => "abandoned",
        }
    }
}

/// One probed handshake. Instants are CLOCK_MONOTONIC nanoseconds (`bpf_ktime_get_ns`);
/// durations are nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRecord {
    /// Process id (the thread group).
    pub pid: u32,
    /// The thread that made the first handshake call.
    pub tid: u32,
    /// The process's name (`comm`) when the handshake ended.
    pub comm: String,
    /// Server or client.
    pub role: Role,
    /// The library.
    pub library: Library,
    /// How it ended.
    pub result: HandshakeResult,
    /// The socket's descriptor in the process (-1: unknown).
    pub fd: i32,
    /// This process's end of the connection, when its socket was seen.
    pub local: Option<SocketAddr>,
    /// The peer's end.
    pub peer: Option<SocketAddr>,
    /// `sock:inet_sock_set_state` to ESTABLISHED: the TCP handshake completed.
    pub established_ns: Option<u64>,
    /// Server: `accept`/`accept4` returned the socket; client: `connect` was called.
    pub socket_ns: Option<u64>,
    /// The first handshake call was entered.
    pub first_call_ns: u64,
    /// The call that ended the handshake returned.
    pub end_ns: u64,
    /// Time inside the handshake calls.
    pub work_ns: u64,
    /// Time between them (OpenSSL) or parked for the peer's data (Go).
    pub waiting_ns: u64,
    /// Of the handshake calls' time, the part its thread (OpenSSL) or goroutine (Go) ran
    /// on a CPU: the sum of its running intervals (see `bpf/probes.bpf.c`). `None` when
    /// not measured (a Go program without the runtime's scheduler points).
    pub on_cpu_ns: Option<u64>,
    /// Of the handshake calls' time, per part of [`PARTS`], the time inside its functions
    /// on the handshake's thread (OpenSSL) or goroutine (Go), summed: Go's
    /// `crypto/tls.(*Config).getCertificate`; OpenSSL's `X509_verify_cert`,
    /// `EVP_DigestSign`, `EVP_PKEY_generate`/`_derive` and
    /// `X509_load_cert_crl_file_ex`/`X509_load_cert_file_ex`; Go's in
    /// `target::GO_PARTS` (see `bpf/probes.bpf.c`). `None` when not measured (its
    /// library has no such part, or a probed file lacks its functions).
    pub parts: [Option<u64>; PARTS.len()],
    /// Trust-store loading on the handshake's thread before its first call, since the
    /// thread's previous handshake began: a client's (it builds the store for the
    /// connection it makes), or a server's begun after it accepted the connection.
    /// `None` when trust loading is not measured.
    pub trust_before_ns: Option<u64>,
    /// The length of its signature in bytes (OpenSSL: `EVP_DigestSign`'s `*siglen`),
    /// when it signed.
    pub signature_len: Option<u16>,
    /// Go: the signing key's kind (`ecdsa`, `rsa`, `ed25519`: which signing method ran),
    /// when it signed.
    pub signature_kind: Option<&'static str>,
    /// Go: the key exchange's group (its TLS code point, the CurveID passed to the key
    /// share's generation), when one was generated.
    pub group: Option<u16>,
    /// Library calls that drove the handshake (Go: 1, its handshake function).
    pub calls: u32,
    /// The handshake was seen from its start, with every probe in place: its SSL object
    /// was set up, or its socket accepted or connected, while probed (OpenSSL), or its
    /// handshake function entered (Go). Records that are not began before the probes
    /// were armed and are counted apart, never as handshakes.
    pub whole: bool,
    /// Its waits for the peer could be told from its work. Always for OpenSSL (the time
    /// between its calls and inside their reads); for Go, when the connection's
    /// descriptor was found (its reads time the waits). When not, only the span is known.
    pub split: bool,
    /// The process's cgroup, container and pod, read when tlsperf took the record
    /// (`None`: the process was gone by then).
    pub workload: Option<std::sync::Arc<super::workload::Workload>>,
}

impl ProbeRecord {
    /// Server: the TCP handshake's completion → `accept` returned.
    pub fn accept_queue_ns(&self) -> Option<u64> {
        if self.role != Role::Server {
            return None;
        }
        match (self.established_ns, self.socket_ns) {
            (Some(e), Some(s)) if s >= e => Some(s - e),
            _ => None,
        }
    }

    /// `accept` returned (server) or `connect` was called (client) → the first handshake
    /// call.
    pub fn until_first_call_ns(&self) -> Option<u64> {
        self.socket_ns
            .filter(|s| self.first_call_ns >= *s)
            .map(|s| self.first_call_ns - s)
    }

    /// The record's own instant, where it meets the wire: its TCP handshake's completion,
    /// else its socket's, else its first handshake call.
    pub fn instant_ns(&self) -> u64 {
        self.established_ns
            .or(self.socket_ns)
            .unwrap_or(self.first_call_ns)
    }

    /// The first call → the end.
    pub fn span_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.first_call_ns)
    }

    /// Time inside the library, when it could be told from waiting.
    pub fn work(&self) -> Option<u64> {
        self.split.then_some(self.work_ns)
    }

    /// Time waiting for the peer, when it could be told from work.
    pub fn waiting(&self) -> Option<u64> {
        self.split.then_some(self.waiting_ns)
    }

    /// Of [`ProbeRecord::work`], the time on a CPU (at most the work: its running
    /// intervals may reach a few microseconds into a read on the connection).
    pub fn on_cpu(&self) -> Option<u64> {
        Some(self.on_cpu_ns?.min(self.work()?))
    }

    /// Of [`ProbeRecord::work`], what no part measured accounts for: work − the parts
    /// measured (at least 0), when work and at least one part are known.
    pub fn rest(&self) -> Option<u64> {
        let work = self.work()?;
        if self.parts.iter().all(Option::is_none) {
            return None;
        }
        let parts: u64 = self.parts.iter().flatten().sum();
        Some(work.saturating_sub(parts))
    }

    /// The key exchange's group by name (`x25519`, `secp256r1`…; `0xNNNN` for one
    /// without a name here), when known.
    pub fn group_name(&self) -> Option<String> {
        Some(match self.group? {
            23 => "secp256r1".into(),
            24 => "secp384r1".into(),
            25 => "secp521r1".into(),
            29 => "x25519".into(),
            30 => "x448".into(),
            other => format!("0x{other:04x}"),
        })
    }

    /// Of [`ProbeRecord::work`], the part named `name` of [`PARTS`], when measured and
    /// work is known.
    pub fn part(&self, name: &str) -> Option<u64> {
        self.work()?;
        let i = PARTS.iter().position(|p| *p == name)?;
        self.parts[i]
    }

    /// The key type its signature's length tells (`rsa-2048`, `ecdsa-p256`, `ed25519`…):
    /// an RSA signature is as long as its modulus, an ECDSA one (DER) about twice its
    /// curve's size, an EdDSA one fixed. `None` without a signature or for a length no
    /// common key gives.
    pub fn signature_key(&self) -> Option<&'static str> {
        if let Some(kind) = self.signature_kind {
            return Some(kind);
        }
        Some(match self.signature_len? {
            64 => "ed25519",
            114 => "ed448",
            66..=72 => "ecdsa-p256",
            98..=104 => "ecdsa-p384",
            132..=139 => "ecdsa-p521",
            128 => "rsa-1024",
            256 => "rsa-2048",
            384 => "rsa-3072",
            512 => "rsa-4096",
            1024 => "rsa-8192",
            _ => return None,
        })
    }

    /// Of [`ProbeRecord::work`], the time off the CPU inside the calls: sleeping, waiting
    /// on a lock or for I/O other than the peer's data, waiting for a CPU.
    pub fn blocked(&self) -> Option<u64> {
        Some(self.work()? - self.on_cpu()?)
    }

    /// "comm (pid N)", the key of the per-process rows.
    pub fn process(&self) -> String {
        format!("{} (pid {})", self.comm, self.pid)
    }
}

/// Why a ring-buffer record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "a probe record of {0} bytes, expected {RAW_EVENT_LEN}: the BPF object and tlsperf disagree"
)]
pub struct BadRecord(pub usize);

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[self.at..self.at + N]);
        self.at += N;
        out
    }
    fn u64(&mut self) -> u64 {
        u64::from_ne_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_ne_bytes(self.take())
    }
    fn u16(&mut self) -> u16 {
        u16::from_ne_bytes(self.take())
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
}

fn address(family: u16, addr: &[u8; 16], port: u16) -> Option<SocketAddr> {
    let ip = match family {
        2 => IpAddr::V4(Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3])),
        10 => {
            let v6 = Ipv6Addr::from(*addr);
            // A v4-mapped peer of a dual-stack socket is the IPv4 address on the wire.
            match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }
        }
        _ => return None,
    };
    (port != 0).then_some(SocketAddr::new(ip, port))
}

fn nonzero(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Decodes one `struct hs_event`.
pub fn decode(buf: &[u8]) -> Result<ProbeRecord, BadRecord> {
    if buf.len() < RAW_EVENT_LEN {
        return Err(BadRecord(buf.len()));
    }
    let mut c = Cursor { buf, at: 0 };
    let established_ns = nonzero(c.u64());
    let socket_ns = nonzero(c.u64());
    let first_call_ns = c.u64();
    let end_ns = c.u64();
    let work_ns = c.u64();
    let waiting_ns = c.u64();
    let on_cpu_ns = c.u64();
    let mut part_ns = [0u64; PARTS.len()];
    for p in &mut part_ns {
        *p = c.u64();
    }
    let trust_pre_ns = c.u64();
    let pid = c.u32();
    let tid = c.u32();
    let calls = c.u32();
    let fd = c.u32() as i32;
    let laddr: [u8; 16] = c.take();
    let raddr: [u8; 16] = c.take();
    let lport = c.u16();
    let rport = c.u16();
    let family = c.u16();
    let role = match c.u8() {
        1 => Role::Server,
        2 => Role::Client,
        _ => Role::Unknown,
    };
    let library = match c.u8() {
        2 => Library::Go,
        _ => Library::OpenSsl,
    };
    let result = match c.u8() {
        1 => HandshakeResult::Ok,
        2 => HandshakeResult::Error,
        _ => HandshakeResult::Abandoned,
    };
    let flags = c.u8();
    let parts = c.u8();
    let key_kind = c.u8();
    let sig_len = c.u16();
    let group = c.u16();
    let comm: [u8; 16] = c.take();
    // Bit i of `parts`: PART_i of probes.bpf.c was measured for its library.
    let measured = |i: usize| parts & (1 << i) != 0;
    let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
    Ok(ProbeRecord {
        workload: None,
        pid,
        tid,
        comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        role,
        library,
        result,
        fd,
        local: address(family, &laddr, lport),
        peer: address(family, &raddr, rport),
        established_ns,
        socket_ns,
        first_call_ns,
        end_ns,
        work_ns,
        waiting_ns,
        // F_ONCPU of probes.bpf.c.
        on_cpu_ns: (flags & 8 != 0).then_some(on_cpu_ns),
        parts: std::array::from_fn(|i| measured(i).then_some(part_ns[i])),
        trust_before_ns: measured(TRUST).then_some(trust_pre_ns),
        signature_len: (sig_len != 0).then_some(sig_len),
        // KEY_* of probes.bpf.c.
        signature_kind: match key_kind {
            1 => Some("ecdsa"),
            2 => Some("rsa"),
            3 => Some("ed25519"),
            _ => None,
        },
        group: (group != 0).then_some(group),
        calls,
        // F_WHOLE and F_FD_SEEN of probes.bpf.c.
        whole: flags & 1 != 0,
        split: library != Library::Go || flags & 4 != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_decodes_field_by_field() {
        let mut b = Vec::new();
        // estab, sock, first, end, work, wait, on CPU; parts callback, verification,
        // signature, key exchange, trust load; trust load before the first call.
        for v in [100u64, 150, 200, 900, 300, 400, 120, 70, 0, 20, 10, 5, 1000] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [42u32, 43, 3, 7] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        let mut l = [0u8; 16];
        l[..4].copy_from_slice(&[127, 0, 0, 1]);
        let mut r = [0u8; 16];
        r[..4].copy_from_slice(&[127, 0, 0, 2]);
        b.extend_from_slice(&l);
        b.extend_from_slice(&r);
        for v in [8443u16, 50000, 2] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        // role, lib, result, flags, parts (callback, signature, key exchange, trust
        // load: no verification), key kind, sig_len, group.
        b.extend_from_slice(&[1, 1, 1, 1 | 8, 1 | 4 | 8 | 16, 0]);
        b.extend_from_slice(&512u16.to_ne_bytes());
        b.extend_from_slice(&29u16.to_ne_bytes());
        let mut comm = [0u8; 16];
        comm[..5].copy_from_slice(b"nginx");
        b.extend_from_slice(&comm);
        assert_eq!(b.len(), RAW_EVENT_LEN);
        let r = decode(&b).unwrap();
        assert_eq!(r.pid, 42);
        assert_eq!(r.comm, "nginx");
        assert_eq!(r.role, Role::Server);
        assert_eq!(r.local, Some("127.0.0.1:8443".parse().unwrap()));
        assert_eq!(r.peer, Some("127.0.0.2:50000".parse().unwrap()));
        assert_eq!(r.accept_queue_ns(), Some(50));
        assert_eq!(r.until_first_call_ns(), Some(50));
        assert_eq!(r.span_ns(), 700);
        assert_eq!(r.calls, 3);
        assert!(r.whole);
        assert_eq!(r.work(), Some(300));
        assert_eq!((r.on_cpu(), r.blocked()), (Some(120), Some(180)));
        assert_eq!(r.parts, [Some(70), None, Some(20), Some(10), Some(5)]);
        assert_eq!(r.part("verification"), None);
        assert_eq!(r.trust_before_ns, Some(1000));
        // 300 − (70 + 20 + 10 + 5): the load before the first call is not work's.
        assert_eq!(r.rest(), Some(195));
        assert_eq!(r.signature_key(), Some("rsa-4096"));
        assert_eq!(r.group_name().as_deref(), Some("x25519"));
        // A Go record without its descriptor: its waits are not known.
        b[RAW_EVENT_LEN - 25] = 2;
        let go = decode(&b).unwrap();
        assert_eq!(go.library, Library::Go);
        assert_eq!((go.work(), go.waiting()), (None, None));
        assert_eq!((go.on_cpu(), go.blocked()), (None, None));
        // Not measured: neither is known, work is.
        b[RAW_EVENT_LEN - 25] = 1;
        b[RAW_EVENT_LEN - 23] = 1;
        let unmeasured = decode(&b).unwrap();
        assert_eq!(unmeasured.work(), Some(300));
        assert_eq!((unmeasured.on_cpu(), unmeasured.blocked()), (None, None));
        b[RAW_EVENT_LEN - 22] = 0;
        let none = decode(&b).unwrap();
        assert_eq!((none.rest(), none.trust_before_ns), (None, None));
        assert_eq!(decode(&b[..10]), Err(BadRecord(10)));
    }
}
