//! `--link`: an emulated network path between the client and the servers, on real
//! kernel TCP. The client runs in an anonymous network namespace whose only way out is a
//! TUN device; a second TUN device sits in the host's namespace, where the servers are;
//! the delay line ([`mod@line`]) carries IP packets between the two with the round trip,
//! rates, queue and loss of a [`LinkSpec`]. TCP's handshake, slow start, delayed ACKs
//! and retransmissions then happen as on such a path.
//!
//! Owns: the spec and profiles ([`spec`]), namespace and device set-up ([`netns`]), the
//! delay line and its threads, and teardown: dropping the [`Link`] stops the threads and
//! closes the descriptors, and as nothing else holds the namespace or the devices (no
//! name in `/run/netns`, no persistent device, no firewall rule) the kernel also removes
//! them when the process is killed.
//!
//! Reachable servers: IPv4 addresses of this machine, `127.0.0.1` included (the host's
//! device allows 127.0.0.0/8 through it with `route_localnet`, a per-device setting that
//! goes with the device). The client's namespace keeps its own loopback down so that
//! 127.0.0.0/8 leaves through the link.

pub mod line;
pub mod netns;
pub mod report;
pub mod spec;
pub mod trips;

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::thread::JoinHandle;

pub use line::{CounterSnapshot, Counters};
pub use report::LinkCounters;
pub use spec::{LinkSpec, PROFILES, Profile, Queue, Rate};

/// Name of the TUN device in the client's namespace.
const CLIENT_DEV: &str = "tlsperf0";
/// Name pattern of the TUN device in the host's namespace (the kernel picks the number).
const HOST_DEV: &str = "tlsperf-l%d";

/// Why a link could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The machine or the user lacks what a link needs (root, the TUN driver).
    #[error("--link needs {what}")]
    Missing {
        /// What is missing, in words.
        what: String,
        /// The error that showed it.
        #[source]
        cause: io::Error,
    },
    /// A server the link cannot carry traffic to.
    #[error("--link reaches servers on this machine only: {0}")]
    Unreachable(String),
    /// The congestion control asked for (`cc=`) cannot be the default of the link's
    /// namespace on this kernel.
    #[error("cc={name}: {why}")]
    CongestionControl {
        /// The name given.
        name: String,
        /// Why not, with what the kernel offers.
        why: String,
    },
    /// A set-up step failed.
    #[error("cannot {step} for --link")]
    Setup {
        /// The step, in words.
        step: String,
        /// The failure.
        #[source]
        cause: io::Error,
    },
}

impl LinkError {
    pub(crate) fn setup(step: &str, cause: io::Error) -> LinkError {
        LinkError::Setup {
            step: step.to_string(),
            cause,
        }
    }
}

impl crate::error::Classify for LinkError {
    fn class(&self) -> crate::error::ErrorClass {
        match self {
            LinkError::Missing { .. }
            | LinkError::Unreachable(_)
            | LinkError::CongestionControl { .. } => crate::error::ErrorClass::Input,
            LinkError::Setup { .. } => crate::error::ErrorClass::Runtime,
        }
    }
}

/// A running emulated link. Dropping it stops the delay line and removes the namespace
/// and both devices.
pub struct Link {
    spec: LinkSpec,
    client_ns: OwnedFd,
    host_ns: OwnedFd,
    client_addr: Ipv4Addr,
    host_dev: String,
    stop: Arc<OwnedFd>,
    threads: Vec<JoinHandle<()>>,
    up: Arc<Counters>,
    down: Arc<Counters>,
}

impl Link {
    /// Sets up the namespace (with `spec.cc` as its TCP congestion control), both devices
    /// and the delay line for `spec`.
    pub fn start(spec: &LinkSpec) -> Result<Link, LinkError> {
        Link::start_with(spec, false)
    }

    /// The same namespace and devices as [`Link::start`], with a bare forwarder in place
    /// of the delay line ([`line::forward`]: each packet written as soon as it is read; no
    /// delay, rate, queue or loss, whatever `spec` says but `cc=`). What carrying packets
    /// between the two devices costs by itself: the floor the delay line's CPU is
    /// measured against (`examples/link_accuracy.rs goodput`). Its threads are named
    /// `tlsperf-fwd-up` and `tlsperf-fwd-down`.
    pub fn start_bare(spec: &LinkSpec) -> Result<Link, LinkError> {
        Link::start_with(spec, true)
    }

    fn start_with(spec: &LinkSpec, bare: bool) -> Result<Link, LinkError> {
        let host_ns = netns::open_ns()?;
        let lock = netns::SetupLock::take()?;
        let index = netns::free_index()?;
        let (client_addr, host_addr) = netns::addresses(index);
        let (client_ns, client_tun) =
            netns::client_side(CLIENT_DEV, client_addr, host_addr, spec.cc.as_deref())?;
        let host_tun = netns::open_tun(HOST_DEV)?;
        let host_dev = tun_name(&host_tun)?;
        netns::txqueuelen(&host_dev)?;
        netns::address(&host_dev, host_addr, client_addr)?;
        netns::route_localnet(&host_dev)?;
        drop(lock);

        let stop = Arc::new(netns::eventfd()?);
        let up = Arc::new(Counters::default());
        let down = Arc::new(Counters::default());
        let client_tun = Arc::new(client_tun);
        let host_tun = Arc::new(host_tun);
        // Made before the threads, so that a failure to start one stops the other (drop).
        let mut link = Link {
            spec: spec.clone(),
            client_ns,
            host_ns,
            client_addr,
            host_dev,
            stop,
            threads: Vec::new(),
            up,
            down,
        };
        let seed: u64 = rand::random();
        for (up, from, to, rate, seed) in [
            (true, &client_tun, &host_tun, spec.up, seed),
            (
                false,
                &host_tun,
                &client_tun,
                spec.down,
                seed ^ 0x9e37_79b9_7f4a_7c15,
            ),
        ] {
            let shaper = line::Shaper::new(spec, rate, seed);
            let counters = Arc::clone(if up { &link.up } else { &link.down });
            let name = match (bare, up) {
                (false, true) => "tlsperf-link-up",
                (false, false) => "tlsperf-link-down",
                (true, true) => "tlsperf-fwd-up",
                (true, false) => "tlsperf-fwd-down",
            };
            let (from, to, stop) = (Arc::clone(from), Arc::clone(to), Arc::clone(&link.stop));
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    if bare {
                        line::forward(&from, &to, &stop, &counters)
                    } else {
                        line::run(&from, &to, &stop, shaper, &counters)
                    }
                })
                .map_err(|e| LinkError::setup("start the delay line", e))?;
            link.threads.push(t);
        }
        Ok(link)
    }

    /// Checks that every address in `addrs` can be reached over the link (IPv4, an
    /// address of this machine); `what` names them in the message.
    pub fn check_reachable(addrs: &[SocketAddr], what: &str) -> Result<(), LinkError> {
        if addrs.is_empty() {
            return Err(LinkError::Unreachable(format!("{what} has no address")));
        }
        for a in addrs {
            // A name is told its address; an address is not told itself.
            let who = match what == a.ip().to_string() {
                true => format!("{} is", a.ip()),
                false => format!("{what} is {},", a.ip()),
            };
            match a.ip() {
                IpAddr::V4(ip) if ip.is_loopback() || netns::is_local(ip) => {}
                IpAddr::V4(_) => {
                    return Err(LinkError::Unreachable(format!(
                        "{who} not an address of this machine (the link's far end is this machine's network stack)"
                    )));
                }
                IpAddr::V6(_) => {
                    return Err(LinkError::Unreachable(format!(
                        "{who} an IPv6 address (the link carries IPv4 only; use 127.0.0.1 or an IPv4 address of this machine)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Moves the calling thread into the client's namespace until the guard drops: the
    /// sockets it opens, and the threads it starts meanwhile (a tokio runtime's workers),
    /// are on the client's side of the link.
    pub fn enter(&self) -> Result<Inside<'_>, LinkError> {
        let home = netns::open_ns()?;
        netns::set_ns(&self.client_ns)?;
        Ok(Inside { home, _link: self })
    }

    /// The emulated link.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// The client's address on the link.
    pub fn client_addr(&self) -> Ipv4Addr {
        self.client_addr
    }

    /// Packets client → server so far.
    pub fn up(&self) -> CounterSnapshot {
        self.up.snapshot()
    }

    /// Packets server → client so far.
    pub fn down(&self) -> CounterSnapshot {
        self.down.snapshot()
    }

    /// What the link did so far, for a result document: the delay line's counts, the
    /// devices' drops and the congestion control of both ends (read in each namespace).
    /// Called at the end of a run: first waits (at most one one-way delay and 20 ms) for
    /// the packets still in flight to be delivered.
    pub fn counters(&self) -> LinkCounters {
        let settled =
            |c: &CounterSnapshot| c.delivered + c.lost + c.overflow + c.write_failed >= c.packets;
        let deadline = std::time::Instant::now()
            + (self.spec.rtt / 2 + self.spec.jitter / 2 + std::time::Duration::from_millis(20))
                .min(std::time::Duration::from_secs(1));
        while !(settled(&self.up.snapshot()) && settled(&self.down.snapshot()))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Each side is read from a thread inside its namespace (the caller may be in
        // either).
        let read = |ns: &OwnedFd, dev: &str| {
            in_ns(ns, || {
                (
                    report::device_drops(dev).unwrap_or((0, 0)),
                    report::congestion_control(),
                )
            })
            .unwrap_or(((0, 0), "unknown".to_string()))
        };
        let ((host_rx, host_tx), server) = read(&self.host_ns, &self.host_dev);
        let ((client_rx, client_tx), client_cc) = read(&self.client_ns, CLIENT_DEV);
        LinkCounters {
            spec: self.spec.to_string(),
            // Up: the client's device could not queue it for the line, or the host's
            // refused it from the line; down the other way round.
            up: report::DirectionCounters::new(&self.up.snapshot(), client_tx + host_rx),
            down: report::DirectionCounters::new(&self.down.snapshot(), host_tx + client_rx),
            congestion_control: report::CongestionControl {
                client: client_cc,
                server,
            },
            rtt_ms: Some(self.spec.rtt.as_secs_f64() * 1e3),
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd.
        unsafe {
            libc::write(
                std::os::fd::AsRawFd::as_raw_fd(&*self.stop),
                (&one as *const u64).cast(),
                8,
            );
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The descriptors close as the fields drop: the devices and the namespace go.
    }
}

/// The calling thread is in the client's namespace; dropping this takes it back.
pub struct Inside<'a> {
    home: OwnedFd,
    _link: &'a Link,
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        // Going back to the namespace the thread came from cannot fail for a root
        // process that could leave it; if it did, the thread stays where it is and the
        // namespace lives on only as long as the process.
        let _ = netns::set_ns(&self.home);
    }
}

/// Runs `f` on a thread of its own inside namespace `ns` (`None` when the thread could
/// not start or enter it).
fn in_ns<T: Send>(ns: &OwnedFd, f: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("tlsperf-link-read".into())
            .spawn_scoped(s, || {
                netns::set_ns(ns).ok()?;
                Some(f())
            })
            .ok()?
            .join()
            .ok()
            .flatten()
    })
}

fn tun_name(fd: &OwnedFd) -> Result<String, LinkError> {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // SAFETY: TUNGETIFF fills a live ifreq.
    if unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(fd),
            libc::TUNGETIFF,
            &mut req,
        )
    } < 0
    {
        return Err(LinkError::setup(
            "name the TUN device",
            io::Error::last_os_error(),
        ));
    }
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_not_told_itself_and_a_name_is_told_its_address() {
        let v6: SocketAddr = "[::1]:443".parse().unwrap();
        let err = Link::check_reachable(&[v6], "::1").unwrap_err().to_string();
        assert!(err.contains("::1 is an IPv6 address"), "{err}");
        let err = Link::check_reachable(&[v6], "v6only.example")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("v6only.example is ::1, an IPv6 address"),
            "{err}"
        );
        let far: SocketAddr = "203.0.113.9:443".parse().unwrap();
        let err = Link::check_reachable(&[far], "203.0.113.9")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("203.0.113.9 is not an address of this machine"),
            "{err}"
        );
        assert!(Link::check_reachable(&[], "nothing").is_err());
    }
}
