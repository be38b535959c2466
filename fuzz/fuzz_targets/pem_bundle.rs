//! The PEM bundle decoder: any bytes decode without panicking, and feeding them in chunks
//! (as files are streamed) finds the same certificates as decoding at once, and reports
//! damage in both or neither.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsperf::trust::pem::{PemStream, decode, looks_like_pem};

fuzz_target!(|data: &[u8]| {
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
    assert_eq!(certs, at_once, "chunked and whole decoding disagree on certificates");
    // Damage is reported either way. (The lists themselves may differ on pathological
    // input: a BEGIN marker sharing dashes with the END before it is seen whole but not
    // across a chunk boundary.)
    assert_eq!(
        problems.is_empty(),
        whole.problems.is_empty(),
        "damage reported one way and not the other"
    );
});
