//! How faithful the `--link` emulator is, measured through it with the kernel's own
//! sockets (run as root; `bench/link.sh` runs it and writes the report). Each figure
//! starts a fresh link.
//!
//! - `rtt MS...`: UDP ping-pong (100-byte probes, one at a time) from a socket in the
//!   client's namespace to an echo socket on 127.0.0.1; the round trip is taken from the
//!   `send` to the `recv` return, both on the probing thread. The same probes on plain
//!   loopback give the stack's own round trip, printed as `base`.
//! - `loss PCT...`: 20,000 probes, one every 100 µs, at rtt=1ms: the link's own count of
//!   packets lost each direction against its binomial 95% interval, and the echoes lost.
//! - `rate MBIT...`: one TCP bulk transfer server → client at rtt=20ms, sized for about
//!   3 s; the rate is the link's count of IP bytes delivered downstream between the
//!   client's receipt of 25% and of 100% of the body, over that time.
//! - `goodput MBIT RTT_MS [FIELDS]`: a TCP bulk transfer server → client (CUBIC on both sockets),
//!   about 3 s at the rate, twice in the same run: on plain loopback with the sender paced
//!   at MBIT (`SO_MAX_PACING_RATE`: TCP's own pacing, no qdisc needed), then through a link
//!   `rtt=RTT_MS,down=MBIT[,FIELDS]`; goodput over the last 75% of the body, their ratio, and the
//!   delay line's CPU per packet (both threads, `/proc/self/task/TID/schedstat`) and its
//!   sleeps per packet (voluntary context switches), its drops and lateness. Between the
//!   two, the floor: the same transfer, paced at the rate, through the same devices with a
//!   bare forwarder instead of the delay line ([`Link::start_bare`]: each packet written as
//!   soon as it is read); its CPU per packet is what writing into a TUN device costs the
//!   writing thread by itself (the receiving stack's work runs there). Last, the link
//!   again with the sender paced at the rate as for the floor: an unpaced sender transmits
//!   from its ACK processing, on the thread that wrote the ACK, a paced one from its pacing
//!   timer, so the line's own cost is the paced link's CPU per packet minus the floor's.
//! - `saturate`: rtt=0, no rate: 64-byte UDP datagrams client → host as fast as one thread
//!   sends them for 2 s; packets delivered by the upstream delay-line thread per second
//!   of its own CPU time (`/proc/self/task/TID/stat`), i.e. on one core.
//!
//! Output: one line of `key=value` per figure.

#![allow(clippy::unwrap_used)] // a measuring script run by bench/link.sh: a panic is its failure report

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use tlsperf::link::{Link, LinkSpec};

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    match what.as_str() {
        "rtt" => rest.iter().for_each(|ms| rtt(ms)),
        "loss" => rest.iter().for_each(|p| loss(p)),
        "rate" => rest.iter().for_each(|m| rate(m)),
        "saturate" => saturate(),
        "goodput" => goodput(&rest[0], &rest[1], rest.get(2).map(String::as_str)),
        _ => {
            eprintln!(
                "usage: link_accuracy rtt MS... | loss PCT... | rate MBIT... | goodput MBIT RTT_MS [FIELDS] | saturate"
            );
            std::process::exit(2);
        }
    }
}

fn start(spec: &str) -> Link {
    let spec: LinkSpec = spec.parse().unwrap_or_else(|e| panic!("{e}"));
    Link::start(&spec).unwrap_or_else(|e| {
        eprintln!("error: {}", tlsperf::error::sentence(&e));
        std::process::exit(2)
    })
}

/// An echo socket on 127.0.0.1 (host namespace), served by a thread.
fn echo() -> SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = s.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            let _ = s.send_to(&buf[..n], from);
        }
    });
    addr
}

/// Round trips of `n` sequential probes (seconds); lost probes are left out.
fn ping(to: SocketAddr, n: usize, timeout: Duration) -> Vec<f64> {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    for i in 0..n as u64 {
        let mut probe = [0u8; 100];
        probe[..8].copy_from_slice(&i.to_be_bytes());
        let t = Instant::now();
        s.send_to(&probe, to).unwrap();
        loop {
            match s.recv(&mut buf) {
                Ok(8..) if buf[..8] == i.to_be_bytes() => {
                    out.push(t.elapsed().as_secs_f64());
                    break;
                }
                Ok(_) => continue,
                Err(_) => break,
            }
        }
    }
    out
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn summary(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
    format!(
        "n={} min_ms={:.3} p50_ms={:.3} mean_ms={:.3} p99_ms={:.3} max_ms={:.3} sd_ms={:.3}",
        v.len(),
        v[0] * 1e3,
        quantile(v, 0.5) * 1e3,
        mean * 1e3,
        quantile(v, 0.99) * 1e3,
        v[v.len() - 1] * 1e3,
        sd * 1e3
    )
}

fn rtt(ms: &str) {
    let to = echo();
    let want: f64 = ms.parse().unwrap();
    let n = if want >= 100.0 { 50 } else { 200 };
    if want == 0.0 {
        let mut base = ping(to, 2000, Duration::from_secs(1));
        println!("rtt=base {}", summary(&mut base));
    }
    let link = start(&format!("rtt={ms}ms"));
    let inside = link.enter().unwrap();
    let _ = ping(to, 5, Duration::from_secs(2));
    let mut v = ping(
        to,
        if want == 0.0 { 2000 } else { n },
        Duration::from_secs(2),
    );
    drop(inside);
    // The delay line's own lateness: from a packet's due time to its `write`.
    let (up, down) = (link.up(), link.down());
    let delivered = (up.delivered + down.delivered).max(1);
    println!(
        "rtt={ms}ms {} line_late_mean_us={:.1} line_late_max_us={:.1}",
        summary(&mut v),
        (up.late_ns_sum + down.late_ns_sum) as f64 / delivered as f64 / 1e3,
        up.late_ns_max.max(down.late_ns_max) as f64 / 1e3
    );
}

fn loss(pct: &str) {
    let to = echo();
    let link = start(&format!("rtt=1ms,loss={pct}%"));
    let inside = link.enter().unwrap();
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    drop(inside);
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let n = 20_000u64;
    let r = s.try_clone().unwrap();
    let counter = std::thread::spawn(move || {
        let mut got = 0u64;
        let mut buf = [0u8; 2048];
        while r.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let t0 = Instant::now();
    for i in 0..n {
        let due = t0 + Duration::from_micros(100 * i);
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        s.send_to(&i.to_be_bytes(), to).unwrap();
    }
    let echoed = counter.join().unwrap();
    let p: f64 = pct.parse::<f64>().unwrap() / 100.0;
    for (dir, c) in [("up", link.up()), ("down", link.down())] {
        let rate = c.lost as f64 / c.packets as f64;
        let half = 1.96 * (p * (1.0 - p) / c.packets as f64).sqrt();
        println!(
            "loss={pct}% dir={dir} packets={} lost={} rate_pct={:.3} ci95_pct={:.3}..{:.3} inside={}",
            c.packets,
            c.lost,
            rate * 100.0,
            (p - half) * 100.0,
            (p + half) * 100.0,
            (rate - p).abs() <= half
        );
    }
    let round = 1.0 - (1.0 - p) * (1.0 - p);
    println!(
        "loss={pct}% echoes_lost_pct={:.3} expected_pct={:.3}",
        (n - echoed) as f64 * 100.0 / n as f64,
        round * 100.0
    );
}

fn rate(mbit: &str) {
    let bps: f64 = mbit.parse::<f64>().unwrap() * 1e6;
    let total = ((bps / 8.0 * 3.0) as usize).max(1 << 20);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let chunk = vec![7u8; 1 << 16];
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk.len());
            c.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
    });
    let link = start(&format!("rtt=20ms,down={mbit}mbit"));
    let inside = link.enter().unwrap();
    let mut c = TcpStream::connect(addr).unwrap();
    drop(inside);
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0usize;
    let mut mark: Option<(Instant, u64)> = None;
    loop {
        let n = c.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n;
        if mark.is_none() && got >= total / 4 {
            mark = Some((Instant::now(), link.down().delivered_bytes));
        }
    }
    let end = Instant::now();
    server.join().unwrap();
    let down = link.down();
    let (t25, b25) = mark.unwrap();
    let ip_rate = (down.delivered_bytes - b25) as f64 * 8.0 / (end - t25).as_secs_f64();
    let goodput = (got - total / 4) as f64 * 8.0 / (end - t25).as_secs_f64();
    println!(
        "rate={mbit}mbit bytes={total} ip_mbit={:.3} error_pct={:+.2} goodput_mbit={:.3} overflow={} lost={}",
        ip_rate / 1e6,
        (ip_rate / bps - 1.0) * 100.0,
        goodput / 1e6,
        down.overflow,
        down.lost
    );
}

fn saturate() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while sink.recv(&mut buf).is_ok() {}
    });
    let link = start("rtt=0");
    let inside = link.enter().unwrap();
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    drop(inside);
    // The thread names itself when it starts running: look for it for up to 2 s.
    let find = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .find(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "tlsperf-link-up")
            })
            .map(|t| t.path())
    };
    let t0 = Instant::now();
    let tid = loop {
        if let Some(t) = find() {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "no delay-line thread"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let cpu = || {
        let stat = std::fs::read_to_string(tid.join("stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        // utime and stime, fields 14 and 15 (11 and 12 after the name).
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    };
    let (c0, p0) = (cpu(), link.up().delivered);
    let t0 = Instant::now();
    let payload = [0u8; 36]; // 64-byte IP packets
    let mut sent = 0u64;
    while t0.elapsed() < Duration::from_secs(2) {
        for _ in 0..64 {
            if s.send_to(&payload, to).is_ok() {
                sent += 1;
            }
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    let wall = t0.elapsed().as_secs_f64() - 0.1;
    let (c1, up) = (cpu(), link.up());
    let delivered = up.delivered - p0;
    println!(
        "saturate sent={sent} delivered={delivered} wall_pps={:.0} line_cpu_s={:.2} pps_per_core={:.0}",
        delivered as f64 / wall,
        c1 - c0,
        delivered as f64 / (c1 - c0)
    );
}

/// Sets a socket's congestion control (`cubic`).
fn congestion(fd: &impl std::os::fd::AsRawFd, name: &str) {
    // SAFETY: a live socket and a buffer of the given length.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    assert_eq!(
        r,
        0,
        "TCP_CONGESTION {name}: {}",
        std::io::Error::last_os_error()
    );
}

/// CPU seconds (user + system, the kernel's nanosecond clock of each thread:
/// `/proc/self/task/TID/schedstat`) and voluntary context switches (the thread's
/// sleeps: `voluntary_ctxt_switches` in its `status`) so far of the threads named
/// `names` of this process.
fn threads_usage(names: &[&str]) -> (f64, u64) {
    let (mut cpu, mut sleeps) = (0.0, 0);
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !names.contains(&comm.trim()) {
            continue;
        }
        let sched = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        cpu += sched
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1e9;
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        sleeps += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    (cpu, sleeps)
}

/// One bulk transfer of `total` bytes to a client made by `connect`; the sender paced at
/// `pace` bytes/s when given. Returns the goodput (bit/s) over the last 75% of the body.
fn bulk(total: usize, pace: Option<u64>, connect: impl FnOnce(SocketAddr) -> TcpStream) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        congestion(&c, "cubic");
        if let Some(p) = pace {
            // SAFETY: a live socket and a u64 option value.
            let r = unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&c),
                    libc::SOL_SOCKET,
                    libc::SO_MAX_PACING_RATE,
                    (&p as *const u64).cast(),
                    8,
                )
            };
            assert_eq!(
                r,
                0,
                "SO_MAX_PACING_RATE: {}",
                std::io::Error::last_os_error()
            );
        }
        let chunk = vec![7u8; 1 << 16];
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk.len());
            c.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
    });
    let mut c = connect(addr);
    congestion(&c, "cubic");
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0usize;
    let mut mark: Option<Instant> = None;
    loop {
        let n = c.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n;
        if mark.is_none() && got >= total / 4 {
            mark = Some(Instant::now());
        }
    }
    let end = Instant::now();
    server.join().unwrap();
    (got - total / 4) as f64 * 8.0 / (end - mark.unwrap()).as_secs_f64()
}

/// Through one link (`bare`: [`Link::start_bare`]'s forwarder, the sender then paced at
/// the rate), one bulk transfer: its goodput (bit/s), the line threads' CPU seconds and
/// sleeps, the packets both ways, and the link's counters.
fn through(
    spec: &str,
    total: usize,
    pace: Option<u64>,
    bare: bool,
) -> (f64, f64, u64, u64, tlsperf::link::LinkCounters) {
    let parsed: LinkSpec = spec.parse().unwrap_or_else(|e| panic!("{e}"));
    let link = if bare {
        Link::start_bare(&parsed).unwrap()
    } else {
        start(spec)
    };
    let names = if bare {
        ["tlsperf-fwd-up", "tlsperf-fwd-down"]
    } else {
        ["tlsperf-link-up", "tlsperf-link-down"]
    };
    let (c0, s0) = threads_usage(&names);
    let (u0, d0) = (link.up().packets, link.down().packets);
    let got = bulk(total, pace, |a| {
        let _inside = link.enter().unwrap();
        TcpStream::connect(a).unwrap()
    });
    let (c1, s1) = threads_usage(&names);
    let counters = link.counters();
    let packets = (counters.up.packets - u0) + (counters.down.packets - d0);
    (got, c1 - c0, s1 - s0, packets, counters)
}

fn goodput(mbit: &str, rtt_ms: &str, extra: Option<&str>) {
    let bps: f64 = mbit.parse::<f64>().unwrap() * 1e6;
    let total = ((bps / 8.0 * 3.0) as usize).max(1 << 20);
    // TCP's pacing rate counts the bytes of the packets it sends (headers included).
    let pace = Some((bps / 8.0) as u64);
    let plain = bulk(total, pace, |a| TcpStream::connect(a).unwrap());
    let spec = match extra {
        Some(x) => format!("rtt={rtt_ms}ms,down={mbit}mbit,{x}"),
        None => format!("rtt={rtt_ms}ms,down={mbit}mbit"),
    };
    // The floor: the same transfer through the same devices with a bare forwarder, the
    // sender paced at the rate as on loopback (no model to limit it).
    let (floor, floor_cpu, floor_sleeps, floor_packets, _) = through("rtt=0", total, pace, true);
    let (linked, cpu, sleeps, packets, counters) = through(&spec, total, None, false);
    // The link again with the sender paced at the rate as for the floor: a paced sender
    // transmits from its pacing timer, an unpaced one from its ACK processing, which runs
    // on the thread that wrote the ACK (the line's, the floor's): only paced against
    // paced is the difference the line's own.
    let (paced, paced_cpu, paced_sleeps, paced_packets, _) = through(&spec, total, pace, false);
    let per = |cpu: f64, n: u64| cpu * 1e6 / n.max(1) as f64;
    let (line_us, floor_us) = (per(cpu, packets), per(floor_cpu, floor_packets));
    let paced_us = per(paced_cpu, paced_packets);
    println!(
        "goodput={mbit}mbit rtt_ms={rtt_ms} spec={spec} plain_mbit={:.1} link_mbit={:.1} ratio={:.3} of_rate={:.3} \
         line_cpu_s={:.2} packets={packets} cpu_us_per_packet={line_us:.2} sleeps_per_packet={:.2} \
         floor_mbit={:.1} floor_packets={floor_packets} floor_cpu_us_per_packet={floor_us:.2} \
         floor_sleeps_per_packet={:.2} line_minus_floor_us={:.2} line_over_floor={:.2} \
         paced_link_mbit={:.1} paced_packets={paced_packets} paced_cpu_us_per_packet={paced_us:.2} \
         paced_sleeps_per_packet={:.2} paced_minus_floor_us={:.2} paced_over_floor={:.2} \
         queue_drops={} device_drops={} late_p50_us={:.0} late_p99_us={:.0} late_max_us={:.0}",
        plain / 1e6,
        linked / 1e6,
        linked / plain,
        linked / bps,
        cpu,
        sleeps as f64 / packets.max(1) as f64,
        floor / 1e6,
        floor_sleeps as f64 / floor_packets.max(1) as f64,
        line_us - floor_us,
        line_us / floor_us,
        paced / 1e6,
        paced_sleeps as f64 / paced_packets.max(1) as f64,
        paced_us - floor_us,
        paced_us / floor_us,
        counters.down.queue_drops,
        counters.up.device_drops + counters.down.device_drops,
        counters.down.late_p50_us,
        counters.down.late_p99_us,
        counters.down.late_max_us,
    );
}
