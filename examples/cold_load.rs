//! One trust-store load, the first in a fresh process, timed in-process: what a client
//! pays on its first handshake when it loads roots lazily. `bench/trust.sh` runs it many
//! times, alternating loaders, to compare cold loads fairly (each loader first in its own
//! process).
//!
//! Usage: `cold_load tlsperf|native|pki-types|none [BUNDLE]` — prints microseconds and the
//! number of certificates or anchors loaded.

use std::time::Instant;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "tlsperf".into());
    let bundle = args
        .next()
        .unwrap_or_else(|| "/etc/ssl/certs/ca-certificates.crt".into());
    let t = Instant::now();
    let n = match which.as_str() {
        "tlsperf" => match tlsperf::trust::TrustStore::system() {
            Ok(store) => store.len(),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        },
        "native" => rustls_native_certs::load_native_certs().certs.len(),
        "pki-types" => {
            let mut store = rustls::RootCertStore::empty();
            let certs: Vec<_> = CertificateDer::pem_file_iter(&bundle)
                .map(|it| it.filter_map(Result::ok).collect())
                .unwrap_or_default();
            store.add_parsable_certificates(certs);
            store.len()
        }
        // Process start-up only, for syscall baselines.
        "none" => 0,
        other => {
            eprintln!("error: unknown loader '{other}' (tlsperf, native, pki-types or none)");
            std::process::exit(2);
        }
    };
    let us = t.elapsed().as_secs_f64() * 1e6;
    println!("{us:.1} {n}");
}
