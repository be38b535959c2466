//! A flood of QUIC client Initials at a server on loopback, as from spoofed addresses
//! that never answer: each a genuine Initial (a new connection's ClientHello, made by
//! quinn-proto) sent from one of ADDRESSES loopback source addresses (127.1.x.y) in turn,
//! at RATE per second for SECONDS, never followed up. Used by `bench/quic-flood.sh`;
//! the code is tests/common/quic_flood.rs, which tests/quic.rs's hostile tests use too.
//!
//! Usage: `quic_flood 127.0.0.1:PORT RATE SECONDS [ADDRESSES]` (ADDRESSES 500 by
//! default, at most 60,000, each a socket: raise `ulimit -n` past 1,000; RATE at most 100,000/s; SECONDS at most 600). The Initials
//! are made before the clock starts (one per datagram sent); a first line `sending …`
//! says they are. Then one line: `sent N
//! in S s; replies: initial I handshake H retry R other O` (the replies read on the
//! sources' sockets: a Retry per validated-off Initial, an Initial and Handshake packets
//! per accepted one).

#![allow(clippy::unwrap_used)] // a benchmark helper: a panic is its error report

#[path = "../tests/common/quic_flood.rs"]
mod quic_flood;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use quic_flood::{Initials, Reply, reply_kind, source};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: quic_flood 127.0.0.1:PORT RATE SECONDS [ADDRESSES]");
        std::process::exit(2);
    }
    let server: SocketAddr = args[1].parse().unwrap();
    let rate: f64 = args[2].parse::<f64>().unwrap().clamp(1.0, 100_000.0);
    let seconds: f64 = args[3].parse::<f64>().unwrap().clamp(0.1, 600.0);
    let addresses: usize = args
        .get(4)
        .map(|a| a.parse().unwrap())
        .unwrap_or(500)
        .clamp(1, 60_000);
    let total = (rate * seconds) as usize;
    let mut initials = Initials::new(server);
    let datagrams: Vec<Vec<u8>> = (0..total).map(|_| initials.initial()).collect();
    // One socket per source address, non-blocking, read between sends.
    let sockets: Vec<UdpSocket> = (0..addresses.min(total.max(1)))
        .map(|i| {
            let s = UdpSocket::bind((source(1, i), 0)).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let mut replies = std::collections::BTreeMap::<Reply, u64>::new();
    let mut buf = vec![0u8; 65_536];
    let mut read = |sockets: &[UdpSocket], replies: &mut std::collections::BTreeMap<Reply, u64>| {
        for s in sockets {
            while let Ok(n) = s.recv(&mut buf) {
                *replies.entry(reply_kind(&buf[..n])).or_default() += 1;
            }
        }
    };
    println!("sending {total} Initials from {} addresses", sockets.len());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / rate);
    let mut sent = 0usize;
    for (i, d) in datagrams.iter().enumerate() {
        let due = start + gap * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if sockets[i % sockets.len()].send_to(d, server).is_ok() {
            sent += 1;
        }
        if i % 256 == 255 {
            read(&sockets, &mut replies);
        }
    }
    let took = start.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    read(&sockets, &mut replies);
    let n = |k: Reply| replies.get(&k).copied().unwrap_or(0);
    println!(
        "sent {sent} in {:.2} s; replies: initial {} handshake {} retry {} other {}",
        took.as_secs_f64(),
        n(Reply::Initial),
        n(Reply::Handshake),
        n(Reply::Retry),
        n(Reply::Other) + n(Reply::VersionNegotiation)
    );
}
