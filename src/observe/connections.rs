//! Per-connection output (`observe --handshake-log FILE`, spelt `--connections` before): one JSON object per completed
//! handshake, one per line (JSON Lines), in the order the handshakes completed, so that
//! what observe saw can be joined with a server's access log by address, port and time.
//! The fields are [`ConnectionRecord`]'s; `docs/json.md` lists them. With `--probes`, a
//! line waits for its connection's probe record (up to 5 s) and carries its phases.
//! [`ConnectionsStream`] is the file, written line by line while the run goes on.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::timeline::{Handshake, Phases, Transport};
use super::tls;
use crate::files::{FileError, FileMode};
use crate::probes::event::ProbeRecord;
use crate::probes::report::RecordPhases;
use crate::probes::workload::Workload;

/// The process's view of the connection's handshake (`--probes`), from the probe record
/// joined to it.
#[derive(Debug, Serialize)]
pub struct ProbeLine {
    /// `server` or `client`.
    pub role: &'static str,
    /// "comm (pid N)".
    pub process: String,
    /// The thread that made the first handshake call.
    pub tid: u32,
    /// The instant the record was joined on (its TCP handshake's completion, else its
    /// socket's, else its first call), ns since the Unix epoch.
    pub at_ns: u64,
    /// Its phases.
    #[serde(flatten)]
    pub phases: RecordPhases,
    /// The process's `cgroup`, and its `container_id` and `pod_uid` where the cgroup
    /// path names them (absent when the process was gone before it could be read).
    #[serde(flatten)]
    pub workload: Option<Workload>,
}

impl ProbeLine {
    /// The line part of `r`; `offset`: CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    pub fn of(r: &ProbeRecord, offset: i128) -> ProbeLine {
        let at = i128::from(r.instant_ns());
        ProbeLine {
            role: r.role.name(),
            process: r.process(),
            tid: r.tid,
            at_ns: u64::try_from(at + offset).unwrap_or(0),
            phases: RecordPhases::of(r),
            workload: r.workload.as_deref().cloned(),
        }
    }
}

/// A ClientHello's offered groups, written as an array of their names (without
/// collecting them first).
#[derive(Debug)]
pub struct OfferedGroups<'a>(pub &'a tls::Offer);

impl Serialize for OfferedGroups<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.groups().iter().map(|g| tls::group_label(*g)))
    }
}

/// One completed handshake, as a line of the connections file.
#[derive(Debug, Serialize)]
pub struct ConnectionRecord<'a> {
    /// `tcp` or `quic`: the transport that carried it.
    pub transport: &'static str,
    /// When the connection began (its SYN, the first ClientHello when the SYN was not
    /// captured; QUIC: the client's first Initial), ns since the Unix epoch, as captured.
    pub start_ns: Option<u64>,
    /// The client's `address:port`.
    pub client: String,
    /// The server's `address:port`.
    pub server: String,
    /// The ClientHello's SNI.
    pub sni: Option<&'a str>,
    /// The first protocol the ClientHello's ALPN offered (null without ALPN).
    pub alpn: Option<&'a str>,
    /// The groups its supported_groups offered, in its order.
    pub offered_groups: OfferedGroups<'a>,
    /// It offered a pre-shared key (a TLS 1.3 resumption).
    pub psk_offered: bool,
    /// `full`, `full-hrr`, `resumed` or `0rtt`.
    pub kind: &'static str,
    /// A HelloRetryRequest came first (a `full-hrr`, or a resumption after one).
    pub hrr: bool,
    /// QUIC: a Retry came first (address validation); absent over TCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<bool>,
    /// How a resumed session was found (`psk`, `ticket`, `session-id`).
    pub resumption: Option<&'static str>,
    /// `TLSv1.3`, `TLSv1.2`…
    pub version: String,
    /// The key-exchange group (`none` for a TLS 1.2 resumption).
    pub group: String,
    /// The cipher suite's IANA number, `0x1301`.
    pub suite: String,
    /// Each phase in ns (null when one of its boundaries was not captured).
    pub phases_ns: &'a Phases,
    /// Bytes of the server's flight (record headers included).
    pub server_flight_bytes: u64,
    /// The local process at the client end (live capture; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_process: Option<&'a str>,
    /// The local process at the server end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_process: Option<&'a str>,
    /// `--probes`: the probed handshake joined to this connection (the first record
    /// that took it, server or client); null when none did within 5 s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Option<ProbeLine>>,
}

impl<'a> ConnectionRecord<'a> {
    /// The record of `h`.
    pub fn of(h: &'a Handshake) -> ConnectionRecord<'a> {
        ConnectionRecord {
            transport: h.transport.name(),
            start_ns: h.start_ns,
            client: h.client.to_string(),
            server: h.server.to_string(),
            sni: h.sni.as_deref(),
            alpn: h.offer.alpn.as_deref(),
            offered_groups: OfferedGroups(&h.offer),
            psk_offered: h.offer.psk,
            kind: h.kind.name(),
            hrr: h.hrr,
            retry: (h.transport == Transport::Quic).then_some(h.retry),
            resumption: h.resumption,
            version: tls::version_label(h.version).into_owned(),
            group: h
                .group
                .map_or("none".into(), |g| tls::group_label(g).into_owned()),
            suite: format!("{:#06x}", h.suite),
            phases_ns: &h.phases,
            server_flight_bytes: h.server_flight_bytes,
            client_process: h.client_process.as_deref(),
            server_process: h.server_process.as_deref(),
            probe: None,
        }
    }
}

/// Writes records to a stream; the first write error is kept (and the rest skipped) for
/// [`ConnectionLog::finish`] to return, so the analysis is never stopped by its output.
pub struct ConnectionLog {
    out: Box<dyn Write + Send>,
    written: u64,
    error: Option<io::Error>,
}

impl std::fmt::Debug for ConnectionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionLog")
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl ConnectionLog {
    /// A log writing to `out` (buffer it: one write per record otherwise).
    pub fn new(out: Box<dyn Write + Send>) -> ConnectionLog {
        ConnectionLog {
            out,
            written: 0,
            error: None,
        }
    }

    /// Writes the line of `h`.
    pub fn record(&mut self, h: &Handshake) {
        self.write(&ConnectionRecord::of(h));
    }

    /// Writes the line of `h` with the probe record joined to it (`--probes`; `None`:
    /// none was).
    pub fn record_probed(&mut self, h: &Handshake, probe: Option<ProbeLine>) {
        let mut line = ConnectionRecord::of(h);
        line.probe = Some(probe);
        self.write(&line);
    }

    fn write(&mut self, line: &ConnectionRecord<'_>) {
        if self.error.is_some() {
            return;
        }
        let r = serde_json::to_writer(&mut self.out, line)
            .map_err(io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"));
        match r {
            Ok(()) => self.written += 1,
            Err(e) => self.error = Some(e),
        }
    }

    /// Writes the next records to `out`, the current output flushed and closed (an
    /// error there is kept for [`ConnectionLog::finish`]).
    pub fn replace(&mut self, out: Box<dyn Write + Send>) {
        let old = std::mem::replace(&mut self.out, out);
        let mut old = old;
        if let Err(e) = old.flush()
            && self.error.is_none()
        {
            self.error = Some(e);
        }
    }

    /// Flushes; the number of records written, or the first error met.
    pub fn finish(&mut self) -> io::Result<u64> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.written)
    }
}

/// `--handshake-log FILE`: each line written as its handshake completes (or, with the
/// probes, as its record joins), flushed line by line so a reader tailing FILE sees it at
/// once; reopened on request (SIGHUP, after logrotate moved it). FILE is written in place
/// ([`crate::files::open_log`]): a FIFO or a terminal is written to, never replaced.
#[derive(Debug)]
pub struct ConnectionsStream {
    /// The log the analysis writes to.
    pub log: Arc<Mutex<ConnectionLog>>,
    /// The file named.
    pub dest: PathBuf,
}

/// The buffer of one line: a line longer than this is written in more than one piece.
const LINE_BUFFER: usize = 64 * 1024;

fn open(dest: &Path, append: bool) -> Result<Box<dyn Write + Send>, FileError> {
    let file = crate::files::open_log(dest, FileMode::Public, append)?;
    Ok(Box::new(io::LineWriter::with_capacity(LINE_BUFFER, file)))
}

impl ConnectionsStream {
    /// Opens `dest` (checked before: an existing regular file is truncated).
    pub fn open(dest: &Path) -> Result<ConnectionsStream, FileError> {
        Ok(ConnectionsStream {
            log: Arc::new(Mutex::new(ConnectionLog::new(open(dest, false)?))),
            dest: dest.to_path_buf(),
        })
    }

    /// Opens the file again, appending (created anew when it was moved away), and
    /// writes the next lines there.
    pub fn reopen(&self) -> Result<(), FileError> {
        let out = open(&self.dest, true)?;
        let mut log = crate::sync::lock(&self.log);
        log.replace(out);
        Ok(())
    }

    /// Flushes; the number of handshakes written.
    pub fn finish(self) -> io::Result<u64> {
        crate::sync::lock(&self.log).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::timeline::HandshakeKind;

    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn one_line_per_handshake_with_every_field() {
        let h = Handshake {
            kind: HandshakeKind::Resumed,
            resumption: Some("psk"),
            version: 0x0304,
            group: Some(0x1d),
            suite: 0x1301,
            sni: Some("example.test".into()),
            offer: Default::default(),
            client: "10.0.0.2:50000".parse().unwrap(),
            server: "[2001:db8::1]:443".parse().unwrap(),
            phases: Phases {
                connect: Some(1000),
                server_think: Some(2000),
                server_flight: None,
                client_think: Some(3000),
                tls: Some(6000),
                first_app_byte: None,
                server_first_byte: Some(9000),
            },
            server_flight_bytes: 4321,
            start_ns: Some(1_764_633_600_000_000_000),
            hrr: true,
            retry: false,
            transport: crate::observe::timeline::Transport::Tcp,
            client_process: None,
            server_process: Some("nginx (pid 7)".into()),
        };
        let buf = Shared::default();
        let mut log = ConnectionLog::new(Box::new(buf.clone()));
        log.record(&h);
        log.record(&h);
        assert_eq!(log.finish().unwrap(), 2);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["start_ns"], 1_764_633_600_000_000_000u64);
        assert_eq!(v["client"], "10.0.0.2:50000");
        assert_eq!(v["server"], "[2001:db8::1]:443");
        assert_eq!(v["sni"], "example.test");
        assert_eq!(v["kind"], "resumed");
        assert_eq!(v["resumption"], "psk");
        assert_eq!(v["hrr"], true);
        assert_eq!(v["version"], "TLSv1.3");
        assert_eq!(v["group"], "x25519");
        assert_eq!(v["suite"], "0x1301");
        assert_eq!(v["phases_ns"]["server_think"], 2000);
        assert!(v["phases_ns"]["server_flight"].is_null());
        assert_eq!(v["phases_ns"]["server_first_byte"], 9000);
        assert_eq!(v["server_flight_bytes"], 4321);
        assert_eq!(v["server_process"], "nginx (pid 7)");
        assert!(v.get("client_process").is_none());
        assert_eq!(v["transport"], "tcp");
        assert!(v["alpn"].is_null(), "{v}");
        assert_eq!(v["offered_groups"], serde_json::json!([]));
        assert_eq!(v["psk_offered"], false);
        assert!(v.get("retry").is_none(), "{v}");
        // A QUIC handshake says so, and whether a Retry came first.
        let quic = Handshake {
            transport: Transport::Quic,
            retry: true,
            offer: quic_offer(),
            ..h
        };
        let buf = Shared::default();
        let mut log = ConnectionLog::new(Box::new(buf.clone()));
        log.record(&quic);
        log.finish().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&buf.0.lock().unwrap()).unwrap();
        assert_eq!(v["transport"], "quic");
        assert_eq!(v["retry"], true);
        assert_eq!(v["alpn"], "h3");
        assert_eq!(
            v["offered_groups"],
            serde_json::json!(["x25519", "secp256r1"])
        );
        assert_eq!(v["psk_offered"], true);
    }

    /// What an HTTP/3 client's ClientHello offers: ALPN h3, x25519 and secp256r1, a PSK.
    fn quic_offer() -> tls::Offer {
        let b = tls::hello_with(&[
            (16, &[0, 3, 2, b'h', b'3']),
            (10, &[0, 4, 0, 0x1d, 0, 0x17]),
            (41, &[0; 4]),
        ]);
        tls::client_hello(&b).unwrap().offer
    }
}
