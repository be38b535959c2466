//! The rustls floor of a TLS server (issue 56's anchor): the least a tokio-rustls HTTPS
//! server does per connection, with nothing of `tlsperf serve` around it — one tokio
//! thread, `tokio_rustls::TlsAcceptor` with rustls's own session cache (TLS 1.2 session
//! ids and TLS 1.3 stateful tickets) and no ticketer, read one request head, answer a
//! fixed `200` with `Connection: close`, close. The same certificate, key, versions and
//! group (X25519) as the `serve` it is compared with, so its server CPU per full and per
//! resumed handshake is what rustls, tokio and the kernel cost, and `serve`'s excess over
//! it is `serve`'s own.
//!
//! `cargo run --release --example rustls_floor -- ADDR CHAIN.pem KEY.pem` serves until
//! killed (bench/compare-builds.sh starts and stops it).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, chain, key] = args.as_slice() else {
        eprintln!("usage: rustls_floor ADDR CHAIN.pem KEY.pem");
        std::process::exit(2);
    };
    let config = match config(chain, key) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rustls_floor: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = rt.block_on(serve(addr, config)) {
        eprintln!("rustls_floor: {e}");
        std::process::exit(1);
    }
}

/// The server's configuration: TLS 1.2 and 1.3, X25519, aws-lc-rs, a session cache.
fn config(chain: &str, key: &str) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(chain)
        .map_err(|e| format!("{chain}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{chain}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(100_000);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

async fn serve(addr: &str, config: Arc<rustls::ServerConfig>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (tcp, _) = listener.accept().await?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut buf = [0u8; 4096];
            let mut got = 0;
            loop {
                match tls.read(&mut buf[got..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got += n,
                }
                if buf[..got].windows(4).any(|w| w == b"\r\n\r\n") || got == buf.len() {
                    break;
                }
            }
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
            if tls.write_all(answer).await.is_ok() {
                let _ = tls.shutdown().await;
            }
        });
    }
}
