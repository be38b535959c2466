//! `tlsperf::fuzzing::load_result_merge` (src/fuzzing.rs), the property it checks documented there.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tlsperf::fuzzing::load_result_merge(data));
