//! Session tickets from the network: decrypting arbitrary bytes never panics and never
//! yields a session; a real ticket with any byte changed does not decrypt.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use rustls::server::ProducesTickets;
use tlsperf::tls::tickets::{self, TicketKeyRing};

struct Ring {
    _dir: tempfile::TempDir,
    ring: Arc<TicketKeyRing>,
}

static RING: OnceLock<Ring> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let r = RING.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring.json");
        tickets::init(&path, false).unwrap();
        let ring = TicketKeyRing::open(&path, Duration::from_secs(3600)).unwrap();
        Ring { _dir: dir, ring }
    });
    assert!(r.ring.decrypt(data).is_none(), "random bytes decrypted");
    // Tamper with a real ticket: position and mask from the input.
    if data.len() >= 3 {
        let plain = &data[2..];
        let Some(mut ticket) = r.ring.encrypt(plain) else {
            return;
        };
        assert_eq!(r.ring.decrypt(&ticket).as_deref(), Some(plain));
        let i = usize::from(data[0]) % ticket.len();
        let mask = data[1] | 1;
        ticket[i] ^= mask;
        assert!(r.ring.decrypt(&ticket).is_none(), "tampered ticket decrypted");
    }
});
