//! The flow parser of `tlsperf observe` fed arbitrary TCP segments between two endpoints
//! (direction, flags, sequence and acknowledgment numbers and payload all from the
//! input): reassembly, TLS framing, handshake parsing and the timeline never panic, and
//! every connection tracked ends in exactly one outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsperf::observe::decode::{Flags, Segment};
use tlsperf::observe::flow::{FlowTable, Limits};

fuzz_target!(|data: &[u8]| {
    let client = "10.0.0.1:40000".parse().unwrap();
    let server = "10.0.0.2:443".parse().unwrap();
    let mut table = FlowTable::new(Limits {
        max_out_of_order: 4096,
        ..Limits::default()
    });
    let mut outcomes = 0u64;
    let mut rest = data;
    let mut ns = 0u64;
    // Each segment: control byte, seq (4), ack (4), payload length (1), payload.
    while rest.len() >= 10 {
        let ctl = rest[0];
        let seq = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]);
        let ack = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
        let len = usize::from(rest[9]).min(rest.len() - 10);
        let payload = &rest[10..10 + len];
        rest = &rest[10 + len..];
        let (src, dst) = if ctl & 1 == 0 { (client, server) } else { (server, client) };
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
});
