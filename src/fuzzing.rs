//! The bodies of the cargo-fuzz targets in `fuzz/`: one function per target, of the
//! fuzzer's bytes, that panics when the input finds a bug and returns otherwise. The
//! targets (`fuzz/fuzz_targets/*.rs`) only call them, and `tests/fuzz_corpus.rs` replays
//! each target's seed corpus (`fuzz/corpus/TARGET/`) through the same function in a
//! normal `cargo test`, so an input that crashed once stays fixed.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::server::ProducesTickets;

use crate::load::result::{LoadResult, merge};
use crate::observe::decode::{Flags, Segment};
use crate::observe::flow::{FlowTable, Limits};
use crate::observe::quic_flow::QuicTable;
use crate::tls::tickets::{self, TicketKeyRing};
use crate::trust::pem::{PemStream, decode, looks_like_pem};
use crate::trust::{self, Source};

/// A target's function: the fuzzer's bytes in, a panic for a bug.
pub type Target = fn(&[u8]);

/// Every target: its name (that of its `fuzz/fuzz_targets/NAME.rs` and its
/// `fuzz/corpus/NAME/` directory) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("pem_bundle", pem_bundle),
    ("trust_analyze", trust_analyze),
    ("load_result_merge", load_result_merge),
    ("ticket_decrypt", ticket_decrypt),
    ("observe_flow", observe_flow),
    ("observe_quic", observe_quic),
];

/// The PEM bundle decoder: any bytes decode without panicking, and feeding them in chunks
/// (as files are streamed) finds the same certificates as decoding at once, and reports
/// damage in both or neither.
pub fn pem_bundle(data: &[u8]) {
    let whole = decode(data);
    if !looks_like_pem(data) || data.is_empty() {
        return;
    }
    // The chunk size comes from the first byte, so the fuzzer explores it too.
    let chunk = usize::from(data[0]).max(1) * 7;
    let mut stream = PemStream::new();
    let mut certs = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    for part in data.chunks(chunk) {
        pending.extend_from_slice(part);
        let used = stream.feed(&pending, false, &mut |der, line, block| {
            certs.push((der.to_vec(), line, block));
        });
        pending.drain(..used);
    }
    let used = stream.feed(&pending, true, &mut |der, line, block| {
        certs.push((der.to_vec(), line, block));
    });
    assert_eq!(used, pending.len(), "at EOF everything is consumed");
    let problems = stream.finish(data.len() as u64);
    let at_once: Vec<(Vec<u8>, usize, usize)> = whole
        .certs
        .iter()
        .map(|c| (c.der.to_vec(), c.line, c.block))
        .collect();
    assert_eq!(
        certs, at_once,
        "chunked and whole decoding disagree on certificates"
    );
    // Damage is reported either way. (The lists themselves may differ on pathological
    // input: a BEGIN marker sharing dashes with the END before it is seen whole but not
    // across a chunk boundary.)
    assert_eq!(
        problems.is_empty(),
        whole.problems.is_empty(),
        "damage reported one way and not the other"
    );
}

/// Trust-store loading and analysis of an arbitrary bundle file (written to a temporary
/// file, in `/dev/shm` when there is one): never a panic; no more problems than bytes.
pub fn trust_analyze(data: &[u8]) {
    let file = tempfile::Builder::new()
        .tempfile_in("/dev/shm")
        .or_else(|_| tempfile::NamedTempFile::new())
        .expect("a temporary file for the bundle");
    std::fs::write(file.path(), data).expect("the bundle written to its temporary file");
    let source = Source::Bundle(file.path().to_path_buf());
    if let Ok(loaded) = trust::load(&source, &trust::StoreLoadOptions::CERTS) {
        let a = trust::analyze::analyze(&loaded, time::OffsetDateTime::UNIX_EPOCH, true);
        assert!(a.problems.len() <= data.len() + 1);
    }
}

/// Load results read from arbitrary JSON: parsing never panics, and a result that parses
/// merges with itself exactly (counts double) or is refused.
pub fn load_result_merge(data: &[u8]) {
    let Ok(r) = crate::doc::parse::<LoadResult>(Path::new("fuzz.json"), data) else {
        return;
    };
    if let Ok(m) = merge(&[r.clone(), r.clone()], false) {
        assert_eq!(m.requests.completed, r.requests.completed.saturating_mul(2));
        assert_eq!(m.machines, r.machines.saturating_mul(2));
    }
}

/// Session tickets from the network: decrypting arbitrary bytes never panics and never
/// yields a session; a real ticket (of the input's bytes past the second as plaintext)
/// with any byte changed (position and mask from the first two) does not decrypt. The
/// ring's keys are made once per process and never written anywhere the input could
/// come from.
pub fn ticket_decrypt(data: &[u8]) {
    static RING: OnceLock<Arc<TicketKeyRing>> = OnceLock::new();
    let ring = RING.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory for the ticket ring");
        let path = dir.path().join("ring.json");
        tickets::init(&path, false).expect("a new ticket ring");
        // The ring keeps its keys once read; the file is removed with the directory.
        TicketKeyRing::open(&path, Duration::from_secs(3600)).expect("the new ticket ring")
    });
    assert!(ring.decrypt(data).is_none(), "random bytes decrypted");
    if data.len() >= 3 {
        let plain = &data[2..];
        let Some(mut ticket) = ring.encrypt(plain) else {
            return;
        };
        assert_eq!(ring.decrypt(&ticket).as_deref(), Some(plain));
        let i = usize::from(data[0]) % ticket.len();
        let mask = data[1] | 1;
        ticket[i] ^= mask;
        assert!(ring.decrypt(&ticket).is_none(), "tampered ticket decrypted");
    }
}

/// The flow parser of `tlsperf observe` fed arbitrary TCP segments between two endpoints
/// (direction, flags, sequence and acknowledgment numbers and payload all from the
/// input): reassembly, TLS framing, handshake parsing and the timeline never panic, and
/// no more connections end (in an outcome) than were tracked.
///
/// Each segment is 10 bytes and its payload: a control byte (bit 0: from the server;
/// bits 1–4: SYN, ACK, FIN, RST; bits 5–7: seconds since the previous segment), the
/// sequence and acknowledgment numbers (4 bytes each, big-endian), the payload's length
/// (1 byte; cut to what is left) and the payload. Trailing bytes too few for a segment
/// are ignored.
pub fn observe_flow(data: &[u8]) {
    let client = SocketAddr::from(([10, 0, 0, 1], 40000));
    let server = SocketAddr::from(([10, 0, 0, 2], 443));
    let mut table = FlowTable::new(Limits {
        max_out_of_order: 4096,
        ..Limits::default()
    });
    let mut outcomes = 0u64;
    let mut rest = data;
    let mut ns = 0u64;
    while rest.len() >= 10 {
        let ctl = rest[0];
        let seq = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]);
        let ack = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
        let len = usize::from(rest[9]).min(rest.len() - 10);
        let payload = &rest[10..10 + len];
        rest = &rest[10 + len..];
        let (src, dst) = if ctl & 1 == 0 {
            (client, server)
        } else {
            (server, client)
        };
        let seg = Segment {
            src,
            dst,
            seq,
            ack,
            flags: Flags {
                syn: ctl & 2 != 0,
                ack: ctl & 4 != 0,
                fin: ctl & 8 != 0,
                rst: ctl & 16 != 0,
            },
            payload,
            payload_len: payload.len(),
        };
        ns += u64::from(ctl >> 5) * 1_000_000_000;
        table.segment(ns, &seg, &mut |_| outcomes += 1);
    }
    table.finish(&mut |_| outcomes += 1);
    assert!(outcomes <= table.counters().tracked);
}

/// The QUIC side of `tlsperf observe` fed arbitrary UDP datagrams between two endpoints
/// (direction, time and payload from the input): packet parsing, Initial opening, CRYPTO
/// reassembly, handshake parsing and the timeline never panic, and no more connections
/// end (in an outcome) than were tracked.
///
/// Each datagram is 3 bytes and its payload: a control byte (bit 0: from the server;
/// bits 5–7: milliseconds since the previous datagram), the payload's length (2 bytes,
/// big-endian; cut to what is left) and the payload. Trailing bytes too few for a
/// datagram are ignored.
pub fn observe_quic(data: &[u8]) {
    let client = SocketAddr::from(([10, 0, 0, 1], 40000));
    let server = SocketAddr::from(([10, 0, 0, 2], 443));
    let mut table = QuicTable::new(Limits::default());
    let mut outcomes = 0u64;
    let mut rest = data;
    let mut ns = 0u64;
    while rest.len() >= 3 {
        let ctl = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let payload = &rest[3..3 + len];
        rest = &rest[3 + len..];
        let (src, dst) = if ctl & 1 == 0 {
            (client, server)
        } else {
            (server, client)
        };
        ns += u64::from(ctl >> 5) * 1_000_000;
        table.datagram(ns, ns, src, dst, payload, &mut |_| outcomes += 1);
    }
    table.finish(&mut |_| outcomes += 1);
    assert!(outcomes <= table.counters().tracked);
}
