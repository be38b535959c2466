//! The quinn floor of `serve --quic` (issue 59's "Fast" target): the least a quinn + rustls +
//! h3 server does per QUIC connection, with nothing of `tlsperf serve` around it — one
//! tokio thread (current-thread runtime), rustls on aws-lc-rs with TLS 1.3, X25519 only,
//! the certificate and key given, ALPN `h3`, rustls's default stateful session cache and
//! two tickets per handshake, no early data; quinn's default transport, endpoint and
//! server configurations; every HTTP/3 request answered `200` with serve's 15-byte
//! `{"status":"ok"}` (`content-type: application/json`, `content-length`), each in a
//! task of its own. No metrics, no handshake watch, no timeouts of its own. Its CPU per
//! handshake against the same client as `serve --quic`'s (bench/quic-server.sh) is what
//! quinn, rustls, h3, tokio and the kernel cost a server; serve's excess over it is
//! serve's own.
//!
//! Knobs, to measure one change at a time on the bare stack (each off by default, so the
//! default is quinn's and h3's defaults):
//! - `--mtud off`: no path-MTU discovery (`TransportConfig::mtu_discovery_config(None)`);
//!   `--mtud once`: one probe, straight at quinn's upper bound (1452), no binary search
//!   (`MtuDiscoveryConfig::minimum_change(200)`: between quinn's bounds, 1200 and 1452,
//!   the first midpoint is closer than that, so quinn probes the upper bound alone).
//! - `--settings-early`: the HTTP/3 control and QPACK streams are opened at 0.5-RTT, as
//!   soon as the connection is accepted (`Connecting::into_0rtt`, always allowed to a
//!   server), so they leave with the server's first flight instead of after the
//!   handshake; requests are still read only once the handshake is complete.
//! - `--no-grease`: h3 sends no grease setting, frame or stream.
//! - `--answer-inline`: each request's task is run in the connection's task until it first
//!   waits, and spawned only then (a `GET` is answered before quinn's connection driver
//!   runs again, so its answer shares a datagram with what was written just before).
//! - `--tickets N`: TLS 1.3 tickets per handshake (0 to 16).
//!
//! `cargo build --release --example quic_server_floor`, then
//! `target/release/examples/quic_server_floor 127.0.0.1:PORT CHAIN.pem KEY.pem [KNOBS]`
//! serves until killed (exit 2 with a message on bad arguments or files, 1 if the port
//! cannot be bound).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

const BODY: &[u8] = br#"{"status":"ok"}"#;

/// What the command line asked for.
struct Knobs {
    mtud: Mtud,
    settings_early: bool,
    grease: bool,
    answer_inline: bool,
    tickets: usize,
}

/// `--mtud`.
#[derive(Clone, Copy, PartialEq)]
enum Mtud {
    Default,
    Off,
    Once,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!(
            "usage: quic_server_floor ADDR CHAIN.pem KEY.pem [--mtud default|off|once] \
             [--settings-early] [--no-grease] [--answer-inline] [--tickets N]"
        );
        std::process::exit(2);
    };
    let [addr, chain, key, rest @ ..] = args.as_slice() else {
        usage()
    };
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        usage()
    };
    let mut knobs = Knobs {
        mtud: Mtud::Default,
        settings_early: false,
        grease: true,
        answer_inline: false,
        tickets: 2,
    };
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mtud" => {
                knobs.mtud = match it.next().map(String::as_str) {
                    Some("default") => Mtud::Default,
                    Some("off") => Mtud::Off,
                    Some("once") => Mtud::Once,
                    _ => usage(),
                }
            }
            "--settings-early" => knobs.settings_early = true,
            "--no-grease" => knobs.grease = false,
            "--answer-inline" => knobs.answer_inline = true,
            "--tickets" => match it.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n <= 16 => knobs.tickets = n,
                _ => usage(),
            },
            _ => usage(),
        }
    }
    let tls = match tls(chain, key, knobs.tickets) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("quic_server_floor: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quic_server_floor: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(serve(addr, tls, knobs)) {
        eprintln!("quic_server_floor: {e}");
        std::process::exit(1);
    }
}

/// The rustls side: TLS 1.3, X25519, the one certificate, ALPN h3, `tickets` tickets.
fn tls(chain: &str, key: &str, tickets: usize) -> Result<rustls::ServerConfig, String> {
    let certs = CertificateDer::pem_file_iter(chain)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{chain}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("the certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"h3".to_vec()];
    config.send_tls13_tickets = tickets;
    Ok(config)
}

async fn serve(addr: SocketAddr, tls: rustls::ServerConfig, knobs: Knobs) -> Result<(), String> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| format!("the QUIC TLS configuration: {e}"))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    match knobs.mtud {
        Mtud::Default => {}
        Mtud::Off => {
            transport.mtu_discovery_config(None);
        }
        Mtud::Once => {
            let mut m = quinn::MtuDiscoveryConfig::default();
            m.minimum_change(200);
            transport.mtu_discovery_config(Some(m));
        }
    }
    config.transport_config(Arc::new(transport));
    let endpoint =
        quinn::Endpoint::server(config, addr).map_err(|e| format!("cannot bind {addr}: {e}"))?;
    let knobs = Arc::new(knobs);
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(connection(incoming, Arc::clone(&knobs)));
    }
    Ok(())
}

/// One connection: the handshake, then its requests, each answered in a task.
async fn connection(incoming: quinn::Incoming, knobs: Arc<Knobs>) {
    let Ok(connecting) = incoming.accept() else {
        return;
    };
    let mut builder = h3::server::builder();
    builder.send_grease(knobs.grease);
    let mut h3 = if knobs.settings_early {
        // A server's 0.5-RTT connection always exists.
        let Ok((conn, done)) = connecting.into_0rtt() else {
            return;
        };
        let Ok(h3) = builder
            .build::<_, Bytes>(h3_quinn::Connection::new(conn.clone()))
            .await
        else {
            return;
        };
        done.await;
        if conn.close_reason().is_some() {
            return;
        }
        h3
    } else {
        let Ok(conn) = connecting.await else {
            return;
        };
        let Ok(h3) = builder
            .build::<_, Bytes>(h3_quinn::Connection::new(conn))
            .await
        else {
            return;
        };
        h3
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        let mut answer = Box::pin(async move {
            let Ok((_req, mut stream)) = resolver.resolve_request().await else {
                return;
            };
            let resp = http::Response::builder()
                .status(200)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::CONTENT_LENGTH, BODY.len())
                .body(())
                .unwrap_or_default();
            if stream.send_response(resp).await.is_ok()
                && stream.send_data(Bytes::from_static(BODY)).await.is_ok()
            {
                let _ = stream.finish().await;
            }
        });
        if knobs.answer_inline
            && std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx)))
                .await
                .is_ready()
        {
            continue;
        }
        tokio::spawn(answer);
    }
}
