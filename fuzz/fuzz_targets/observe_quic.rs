//! `tlsperf::fuzzing::observe_quic` (src/fuzzing.rs), the property it checks documented there.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tlsperf::fuzzing::observe_quic(data));
