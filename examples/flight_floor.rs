//! What the kernel must cost for a TLS connection's flights, without any of its crypto:
//! replays the bytes of a real rustls connection (recorded in memory) between a minimal
//! server and a paced client over loopback. `bench/floor.sh` (its measuring side,
//! examples/floor_bench) measures this server's CPU per connection next to nginx's
//! plain-HTTP connection: the difference is what a TLS connection's extra round trip and
//! larger flights cost the kernel (issue 20's floor counts only a plain connection's).
//!
//! - The server is what nginx is at its core: one thread, one edge-triggered epoll loop
//!   (mio), non-blocking accept, each connection registered for read and write once and
//!   closed without `shutdown` after its last flight. Each client flight is read until
//!   its length has arrived; each server flight is one `write`. No TLS, no HTTP parsing,
//!   no timers, no allocation per connection beyond its slot.
//! - The client starts connections at a steady rate (so that the server sleeps and wakes
//!   as it would under the same load from another client), at most C at once, writes its
//!   flights in one `write` each and reads the server's until they have arrived (the last
//!   one until the server closes). With `busy` it never sleeps: it polls its sockets and
//!   timers without blocking, as a generator kept busy by its own crypto (h2load) does.
//!   A server then never has to wake it: a sleeping client's wake-up (an IPI to its idle
//!   CPU, sent from the server's `write`) is charged to the server, which h2load never
//!   makes the server pay.
//!
//! Usage:
//!   `flight_floor record FILE SHAPE` — SHAPE is `plain` (an HTTP/1.1 request and
//!   response, no TLS) or `tls1.3-full`, `tls1.3-resumed`, `tls1.2-full`,
//!   `tls1.2-resumed` (ECDSA P-256 chain, X25519, AES-128-GCM, the request and response
//!   inside). Prints the flights' sizes.
//!   `flight_floor server ADDR FILE SECONDS` — replays the server side of every
//!   connection for at most SECONDS.
//!   `flight_floor client ADDR FILE N C RATE [busy]` — N connections, at most C at once,
//!   started RATE per second (0: as fast as the slots allow); at most 120 s. Prints
//!   `ok FAILED SECONDS`; exits 1 if any connection failed.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tlsperf::crypto::in_memory::{self, Flight, FullOrResumed, Shape};
use tlsperf::crypto::kx::KxGroup;
use tlsperf::pki::KeyType;
use tlsperf::tls::Provider;
use tlsperf::tls::choices::TlsVersion;

/// The request of every shape: what h2load sends, less its user agent.
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
/// The response of every shape: the size of nginx's `return 200 '{"status":"ok"}'`.
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 30 Nov 2026 00:00:00 GMT\r\nContent-Type: application/octet-stream\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{\"status\":\"ok\"}";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = match args.first().map(String::as_str) {
        Some("record") if args.len() == 3 => record(&args[1], &args[2]),
        Some("server") if args.len() == 4 => server(&args[1], &args[2], &args[3]),
        Some("client") if args.len() == 6 || (args.len() == 7 && args[6] == "busy") => {
            client(&args[1..])
        }
        _ => {
            eprintln!(
                "usage: flight_floor record FILE SHAPE | server ADDR FILE SECONDS | client ADDR FILE N C RATE [busy]"
            );
            return ExitCode::from(2);
        }
    };
    match run {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flight_floor: {e}");
            ExitCode::from(1)
        }
    }
}

type Res<T> = Result<T, String>;

fn record(file: &str, shape: &str) -> Res<ExitCode> {
    let flights = if shape == "plain" {
        vec![
            Flight {
                from_client: true,
                bytes: REQUEST.to_vec(),
            },
            Flight {
                from_client: false,
                bytes: RESPONSE.to_vec(),
            },
        ]
    } else {
        let (tls, kind) = match shape {
            "tls1.3-full" => (TlsVersion::V1_3, FullOrResumed::Full),
            "tls1.3-resumed" => (TlsVersion::V1_3, FullOrResumed::Resumed),
            "tls1.2-full" => (TlsVersion::V1_2, FullOrResumed::Full),
            "tls1.2-resumed" => (TlsVersion::V1_2, FullOrResumed::Resumed),
            other => return Err(format!("unknown shape {other:?}")),
        };
        let shape = Shape {
            provider: Provider::AwsLcRs,
            tls,
            cert: KeyType::EcdsaP256,
            kind,
            group: KxGroup::X25519,
        };
        let pki = in_memory::pki(shape.cert).map_err(|e| e.to_string())?;
        let pair = in_memory::configs(&shape, &pki).map_err(|e| e.to_string())?;
        let mut flights =
            in_memory::flights(&pair, REQUEST, RESPONSE).map_err(|e| e.to_string())?;
        split_request(&mut flights);
        flights
    };
    let mut out = Vec::new();
    for f in &flights {
        out.push(if f.from_client { b'C' } else { b'S' });
        out.extend_from_slice(&(f.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&f.bytes);
    }
    let tmp = format!("{file}.tmp");
    std::fs::write(&tmp, &out).map_err(|e| format!("{tmp}: {e}"))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("{file}: {e}"))?;
    let sizes: Vec<String> = flights
        .iter()
        .map(|f| format!("{}{}", if f.from_client { "C" } else { "S" }, f.bytes.len()))
        .collect();
    println!("{shape}: {}", sizes.join(" "));
    Ok(ExitCode::SUCCESS)
}

/// The request goes in a write of its own, right after the client's last handshake
/// flight, as OpenSSL's clients (h2load, curl) write them: rustls in memory sends the
/// client's Finished and the request together. The request is the last record of the
/// last client flight; when that flight holds more records, it becomes a flight of its
/// own.
fn split_request(flights: &mut Vec<Flight>) {
    let Some(i) = flights.iter().rposition(|f| f.from_client) else {
        return;
    };
    let bytes = &flights[i].bytes;
    let mut at = 0;
    let mut last = 0;
    while let Some(h) = bytes.get(at..at + 5) {
        last = at;
        at += 5 + usize::from(u16::from_be_bytes([h[3], h[4]]));
    }
    if last > 0 && at == bytes.len() {
        let request = flights[i].bytes.split_off(last);
        flights.insert(
            i + 1,
            Flight {
                from_client: true,
                bytes: request,
            },
        );
    }
}

fn load(file: &str) -> Res<Vec<Flight>> {
    let data = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    let mut flights = Vec::new();
    let mut rest = &data[..];
    while !rest.is_empty() {
        if rest.len() < 5 || !matches!(rest[0], b'C' | b'S') {
            return Err(format!("{file}: not a flights file"));
        }
        let len = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let bytes = rest
            .get(5..5 + len)
            .ok_or_else(|| format!("{file}: truncated"))?
            .to_vec();
        flights.push(Flight {
            from_client: rest[0] == b'C',
            bytes,
        });
        rest = &rest[5 + len..];
    }
    match flights.last() {
        Some(f) if !f.from_client => Ok(flights),
        _ => Err(format!("{file}: the last flight must be the server's")),
    }
}

fn parse_addr(s: &str) -> Res<SocketAddr> {
    s.parse().map_err(|e| format!("{s}: {e}"))
}

/// A connection's place in its flights.
struct Conn {
    stream: mio::net::TcpStream,
    step: usize,
    done: usize,
}

/// Moves `c` along its flights as far as the socket allows; true when it has finished.
fn drive(c: &mut Conn, flights: &[Flight], buf: &mut [u8]) -> std::io::Result<bool> {
    while let Some(f) = flights.get(c.step) {
        let r = if f.from_client {
            // What has arrived, as a real server reads: up to the end of the client's
            // consecutive flights (its Finished and its request, written one after the
            // other), never into what it sends after the server's answer.
            let more: usize = flights[c.step + 1..]
                .iter()
                .take_while(|g| g.from_client)
                .map(|g| g.bytes.len())
                .sum();
            let want = (f.bytes.len() - c.done + more).min(buf.len());
            c.stream.read(&mut buf[..want])
        } else {
            c.stream.write(&f.bytes[c.done..])
        };
        match r {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(k) => c.done += k,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        // A read may have finished this flight and part of the next.
        while let Some(g) = flights.get(c.step)
            && c.done >= g.bytes.len()
        {
            c.done -= g.bytes.len();
            c.step += 1;
        }
    }
    Ok(true)
}

fn server(addr: &str, file: &str, seconds: &str) -> Res<ExitCode> {
    use mio::{Events, Interest, Poll, Token};
    let flights = load(file)?;
    let addr = parse_addr(addr)?;
    let seconds: u64 = seconds.parse().map_err(|e| format!("{seconds}: {e}"))?;
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut listener = mio::net::TcpListener::bind(addr).map_err(|e| format!("{addr}: {e}"))?;
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    const LISTENER: Token = Token(usize::MAX);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(|e| e.to_string())?;
    let mut events = Events::with_capacity(256);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    while Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        if let Err(e) = poll.poll(&mut events, Some(left)) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e.to_string());
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.set_nodelay(true);
                            let slot = free.pop().unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            if poll
                                .registry()
                                .register(
                                    &mut stream,
                                    Token(slot),
                                    Interest::READABLE | Interest::WRITABLE,
                                )
                                .is_err()
                            {
                                free.push(slot);
                                continue;
                            }
                            conns[slot] = Some(Conn {
                                stream,
                                step: 0,
                                done: 0,
                            });
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        // Out of descriptors or an aborted connection: try on the next event.
                        Err(_) => break,
                    }
                }
                continue;
            }
            let slot = ev.token().0;
            let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            // Finished or failed: dropping the stream closes it (and leaves epoll with it).
            if !matches!(drive(c, &flights, &mut buf), Ok(false)) {
                conns[slot] = None;
                free.push(slot);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn client(args: &[String]) -> Res<ExitCode> {
    let addr = parse_addr(&args[0])?;
    let flights = Arc::new(load(&args[1])?);
    let num = |s: &String| s.parse::<f64>().map_err(|e| format!("{s}: {e}"));
    let (n, c, rate) = (
        num(&args[2])? as u64,
        num(&args[3])?.max(1.0) as usize,
        num(&args[4])?,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let busy = args.get(5).is_some_and(|a| a == "busy");
    let t0 = Instant::now();
    let (ok, failed) = rt.block_on(async move {
        if busy {
            // Always a task to run: the runtime polls epoll and its timers with a zero
            // timeout between turns and never parks. Dropped with the runtime.
            tokio::spawn(async {
                loop {
                    tokio::task::yield_now().await;
                }
            });
        }
        let slots = Arc::new(tokio::sync::Semaphore::new(c));
        let mut set = tokio::task::JoinSet::new();
        let (mut ok, mut failed) = (0u64, 0u64);
        let mut tally = |r: Result<Result<(), std::io::Error>, tokio::task::JoinError>| match r {
            Ok(Ok(())) => ok += 1,
            _ => failed += 1,
        };
        let start = tokio::time::Instant::now();
        let deadline = start + Duration::from_secs(120);
        for i in 0..n {
            if rate > 0.0 {
                tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            let flights = flights.clone();
            set.spawn(async move {
                let r = tokio::time::timeout(Duration::from_secs(10), one(addr, &flights)).await;
                drop(permit);
                r.unwrap_or_else(|_| Err(ErrorKind::TimedOut.into()))
            });
            while let Some(r) = set.try_join_next() {
                tally(r);
            }
        }
        while let Some(r) = set.join_next().await {
            tally(r);
        }
        (ok, failed)
    });
    println!("{ok} {failed} {:.3}", t0.elapsed().as_secs_f64());
    Ok(if failed == 0 && ok == n {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One connection's client side.
async fn one(addr: SocketAddr, flights: &[Flight]) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let mut buf = vec![0u8; 16 * 1024];
    for (i, f) in flights.iter().enumerate() {
        if f.from_client {
            s.write_all(&f.bytes).await?;
        } else if i + 1 == flights.len() {
            // The last flight: read until the server closes (a real server's response may
            // differ in length from the recorded one).
            let mut got = 0;
            loop {
                let k = s.read(&mut buf).await?;
                if k == 0 {
                    break;
                }
                got += k;
            }
            if got == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
        } else {
            let mut left = f.bytes.len();
            while left > 0 {
                let k = s.read(&mut buf[..left.min(16 * 1024)]).await?;
                if k == 0 {
                    return Err(ErrorKind::UnexpectedEof.into());
                }
                left -= k;
            }
        }
    }
    Ok(())
}
