//! Trust-store loading and analysis of an arbitrary bundle file: never a panic; every
//! certificate kept parses.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tlsperf::trust::{self, Source};

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let dir = DIR.get_or_init(|| tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap());
    let path = dir.path().join("bundle.pem");
    std::fs::write(&path, data).unwrap();
    if let Ok(loaded) = trust::load(&Source::Bundle(path), &trust::StoreLoadOptions::CERTS) {
        let a = trust::analyze::analyze(&loaded, time::OffsetDateTime::UNIX_EPOCH, true);
        assert!(a.problems.len() <= data.len() + 1);
    }
});
