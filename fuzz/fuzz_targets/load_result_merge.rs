//! Load results read from arbitrary JSON: parsing never panics, and a result that parses
//! merges with itself exactly (counts double, histograms merge).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsperf::load::result::{merge, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(r) = parse(std::path::Path::new("fuzz.json"), data) else {
        return;
    };
    if let Ok(m) = merge(&[r.clone(), r.clone()]) {
        assert_eq!(m.requests.completed, r.requests.completed.saturating_mul(2));
        assert_eq!(m.machines, r.machines.saturating_mul(2));
    }
});
