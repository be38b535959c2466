//! The rustls floor of a load generator (issue 56's client anchor): the least a tokio-rustls
//! HTTPS client does per new connection, with nothing of `tlsperf load` around it — one
//! tokio thread, C tasks each opening connections one after the other: TCP connect,
//! `tokio_rustls::TlsConnector` (aws-lc-rs, X25519, TLS 1.3, no resumption, every chain
//! verified by rustls's own WebPKI verifier against the given root, no verdict cache), one
//! `GET /` with `Connection: close`, the answer read to its end, close. Its CPU per
//! handshake against the same server as `load --new-conn --resume off --no-verify-cache`
//! is what rustls, tokio and the kernel cost a client; the generator's excess over it is
//! the generator's own (timelines, histograms, pacing, its verifier).
//!
//! `cargo run --release --example rustls_client_floor -- HOST:PORT ROOT.pem N C` makes N
//! connections, C at a time, and exits (1 at the first failure, saying which and why);
//! bench/compare-builds.sh runs it and reads its CPU from its rusage.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: rustls_client_floor HOST:PORT ROOT.pem N C");
        std::process::exit(2);
    };
    let [addr, root, n, c] = args.as_slice() else {
        usage()
    };
    let (Ok(n), Ok(c)) = (n.parse::<u64>(), c.parse::<u64>()) else {
        usage()
    };
    if c == 0 || n == 0 {
        usage()
    }
    let Some((host, _)) = addr.rsplit_once(':') else {
        usage()
    };
    let name = match ServerName::try_from(host.to_string()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("rustls_client_floor: {host}: {e}");
            std::process::exit(2);
        }
    };
    let config = match config(root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rustls_client_floor: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = rt.block_on(run(addr.clone(), name, config, n, c)) {
        eprintln!("rustls_client_floor: {e}");
        std::process::exit(1);
    }
}

/// The client's configuration: TLS 1.3, X25519, aws-lc-rs, the root alone trusted, no
/// resumption.
fn config(root: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(root).map_err(|e| format!("{root}: {e}"))? {
        roots
            .add(cert.map_err(|e| format!("{root}: {e}"))?)
            .map_err(|e| format!("{root}: {e}"))?;
    }
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// N connections, C at a time; the first failure ends the run.
async fn run(
    addr: String,
    name: ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
    n: u64,
    c: u64,
) -> Result<(), String> {
    let connector = tokio_rustls::TlsConnector::from(config);
    let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
    let request: Arc<str> =
        format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into();
    let left = Arc::new(AtomicU64::new(n));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..c.min(n) {
        let (addr, name, connector, left, request) = (
            addr.clone(),
            name.clone(),
            connector.clone(),
            Arc::clone(&left),
            Arc::clone(&request),
        );
        tasks.spawn(async move {
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                .is_ok()
            {
                one(&addr, &name, &connector, &request).await?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// One connection: connect, handshake, `GET /`, the answer to its end, close.
async fn one(
    addr: &str,
    name: &ServerName<'static>,
    connector: &tokio_rustls::TlsConnector,
    request: &str,
) -> Result<(), String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let mut tls = connector
        .connect(name.clone(), tcp)
        .await
        .map_err(|e| format!("the TLS handshake with {addr}: {e}"))?;
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("sending the request to {addr}: {e}"))?;
    let mut buf = [0u8; 4096];
    let (mut got, mut ok) = (0usize, false);
    loop {
        match tls.read(&mut buf).await {
            Ok(0) => break,
            Ok(k) => {
                if got == 0 {
                    ok = buf[..k].starts_with(b"HTTP/1.1 200");
                }
                got += k;
            }
            // A server that closes without close_notify: the answer has come.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && got > 0 => break,
            Err(e) => return Err(format!("reading the answer from {addr}: {e}")),
        }
    }
    if !ok {
        return Err(format!("{addr} did not answer 200"));
    }
    Ok(())
}
