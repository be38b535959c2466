//! Opens N TLS connections to a server on loopback, completes each handshake, keeps them
//! all open and idle for a while, then closes them: how much memory does a server need per
//! idle TLS connection? Used by `bench/serve.sh` (which raises the descriptor limit).
//!
//! Usage: `hold_connections 127.0.0.1:PORT N SECONDS [SLOW]` — prints the number of
//! connections held and the seconds it took to open them; certificates are not verified
//! (this measures the server, not trust). With SLOW, that many slowloris connections are
//! opened first (TCP, then the first 5 bytes of a TLS record and nothing more) and, at
//! the end, the line `slowloris S C` says how many of them the server had closed.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8443".into());
    let n: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
        .min(100_000);
    let hold = Duration::from_secs(
        args.next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10)
            .min(600),
    );
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("default versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth(),
    );
    let slow: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
        .min(100_000);
    // Slowloris: a TLS record header announcing a handshake message, then silence.
    let mut stalled = Vec::with_capacity(slow);
    for _ in 0..slow {
        let Ok(mut tcp) = TcpStream::connect(&addr) else {
            break;
        };
        let _ = tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]);
        stalled.push(tcp);
    }
    let started = Instant::now();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let Ok(mut tcp) = TcpStream::connect(&addr) else {
            break;
        };
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
        let Ok(mut conn) = rustls::ClientConnection::new(
            config.clone(),
            ServerName::try_from("localhost").expect("name"),
        ) else {
            break;
        };
        let mut ok = true;
        while conn.is_handshaking() {
            if conn.complete_io(&mut tcp).is_err() {
                ok = false;
                break;
            }
        }
        let _ = tcp.flush();
        if !ok {
            break;
        }
        held.push((conn, tcp));
    }
    println!("{} {:.1}", held.len(), started.elapsed().as_secs_f64());
    let _ = std::io::stdout().flush();
    std::thread::sleep(hold);
    // Which slowloris connections did the server close (EOF or reset)?
    let closed = stalled
        .iter_mut()
        .filter(|tcp| {
            let _ = tcp.set_nonblocking(true);
            let mut b = [0u8; 64];
            match std::io::Read::read(&mut &**tcp, &mut b) {
                Ok(0) => true,
                Ok(_) => true,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            }
        })
        .count();
    if slow > 0 {
        println!("slowloris {} {closed}", stalled.len());
    }
    drop(held);
}
