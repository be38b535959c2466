//! The two ends of the link: an anonymous network namespace for the client with a TUN
//! device in it, and a TUN device in the host's namespace (where the servers are).
//! Everything is held by file descriptors only — the namespace has no name in
//! `/run/netns`, the devices are not persistent — so the kernel removes it all when the
//! process ends, however it ends (SIGKILL included).

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use super::LinkError;

/// The client's and the host's addresses of link number `index`: a /30 in
/// 198.18.0.0/15, the range set aside for network benchmarks (RFC 2544).
pub fn addresses(index: u32) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0)) + index * 4;
    (Ipv4Addr::from(base + 2), Ipv4Addr::from(base + 1))
}

/// How many /30s 198.18.0.0/15 holds.
const LINKS: u32 = (1 << 17) / 4;

/// Serializes link set-up between tlsperf processes (picking a free address and
/// configuring it): an abstract Unix socket, released by the kernel when the process
/// ends, so it leaves nothing behind.
pub struct SetupLock(#[allow(dead_code)] std::os::unix::net::UnixListener);

impl SetupLock {
    /// Waits (at most 10 s) for the lock.
    pub fn take() -> Result<SetupLock, LinkError> {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(b"tlsperf-link-setup")
            .map_err(|e| LinkError::setup("name the set-up lock", e))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match std::os::unix::net::UnixListener::bind_addr(&addr) {
                Ok(l) => return Ok(SetupLock(l)),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(LinkError::setup("take the set-up lock", e)),
            }
        }
    }
}

/// The first link index whose host address no device of this machine holds (call with
/// the [`SetupLock`] held).
pub fn free_index() -> Result<u32, LinkError> {
    for i in 0..LINKS {
        let (_, host) = addresses(i);
        if !is_local(host) {
            return Ok(i);
        }
    }
    Err(LinkError::setup(
        "find a free address in 198.18.0.0/15",
        io::Error::other("all are in use"),
    ))
}

/// Whether `ip` is an address of this machine (in the calling thread's namespace): a
/// socket can be bound to it.
pub fn is_local(ip: Ipv4Addr) -> bool {
    UdpSocket::bind(SocketAddrV4::new(ip, 0)).is_ok()
}

/// Opens a TUN device (IP packets, no extra header) named `name` in the calling thread's
/// namespace, non-blocking; it lives as long as the descriptor.
pub fn open_tun(name: &str) -> Result<OwnedFd, LinkError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => LinkError::Missing {
                what: "/dev/net/tun (the TUN driver; load it with `modprobe tun`, or give a container the device)".into(),
                cause: e,
            },
            io::ErrorKind::PermissionDenied => LinkError::Missing {
                what: "permission to open /dev/net/tun (run as root)".into(),
                cause: e,
            },
            _ => LinkError::setup("open /dev/net/tun", e),
        })?;
    let fd = OwnedFd::from(file);
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes a live ifreq.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EPERM) {
            LinkError::Missing {
                what: "CAP_NET_ADMIN to create a TUN device (run as root)".into(),
                cause: e,
            }
        } else {
            LinkError::setup("create a TUN device", e)
        });
    }
    Ok(fd)
}

/// Packets a TUN device of the link may hold for the delay line to read (the kernel's
/// default is 500): a sender's burst (a window's worth of segments after one ACK, at
/// 1 Gbit/s and more) then waits there the few microseconds the line takes to read it,
/// instead of being dropped outside the model.
pub const TXQUEUELEN: i32 = 10_000;

/// Sets device `name`'s transmit queue to [`TXQUEUELEN`] packets (calling thread's
/// namespace).
pub fn txqueuelen(name: &str) -> Result<(), LinkError> {
    let sock = inet_socket()?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_metric = TXQUEUELEN;
    ioctl(
        &sock,
        libc::SIOCSIFTXQLEN,
        &mut req,
        "size the TUN device's queue",
    )
}

/// Gives device `name` the point-to-point address `local` ↔ `peer` and brings it up
/// (ioctls on a socket of the calling thread's namespace).
pub fn address(name: &str, local: Ipv4Addr, peer: Ipv4Addr) -> Result<(), LinkError> {
    let sock = inet_socket()?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_addr = sockaddr(local);
    ioctl(&sock, libc::SIOCSIFADDR, &mut req, "address the TUN device")?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_dstaddr = sockaddr(peer);
    ioctl(
        &sock,
        libc::SIOCSIFDSTADDR,
        &mut req,
        "set the TUN device's peer",
    )?;
    let mut req = ifreq(name);
    ioctl(
        &sock,
        libc::SIOCGIFFLAGS,
        &mut req,
        "read the TUN device's flags",
    )?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    ioctl(
        &sock,
        libc::SIOCSIFFLAGS,
        &mut req,
        "bring the TUN device up",
    )?;
    Ok(())
}

/// The kernel's `struct rtentry` (`<net/route.h>`), which the libc crate does not
/// define for glibc.
#[repr(C)]
struct RtEntry {
    rt_pad1: libc::c_ulong,
    rt_dst: libc::sockaddr,
    rt_gateway: libc::sockaddr,
    rt_genmask: libc::sockaddr,
    rt_flags: libc::c_ushort,
    rt_pad2: libc::c_short,
    rt_pad3: libc::c_ulong,
    rt_pad4: *mut libc::c_void,
    rt_metric: libc::c_short,
    rt_dev: *mut libc::c_char,
    rt_mtu: libc::c_ulong,
    rt_window: libc::c_ulong,
    rt_irtt: libc::c_ushort,
}

/// Adds a default route through device `name` (calling thread's namespace).
pub fn default_route(name: &str) -> Result<(), LinkError> {
    let sock = inet_socket()?;
    let dev =
        CString::new(name).map_err(|e| LinkError::setup("name the route's device", e.into()))?;
    let any = sockaddr(Ipv4Addr::UNSPECIFIED);
    let mut rt = RtEntry {
        rt_pad1: 0,
        rt_dst: any,
        rt_gateway: any,
        rt_genmask: any,
        rt_flags: libc::RTF_UP,
        rt_pad2: 0,
        rt_pad3: 0,
        rt_pad4: std::ptr::null_mut(),
        rt_metric: 0,
        rt_dev: dev.as_ptr().cast_mut(),
        rt_mtu: 0,
        rt_window: 0,
        rt_irtt: 0,
    };
    // SAFETY: SIOCADDRT reads a live rtentry whose device name outlives the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCADDRT, &mut rt) } < 0 {
        return Err(LinkError::setup(
            "add the default route",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Sets `net.ipv4.conf.<dev>.route_localnet` to 1 in the calling thread's namespace, so
/// that packets to and from 127.0.0.0/8 may cross that device (the setting goes with
/// the device).
pub fn route_localnet(dev: &str) -> Result<(), LinkError> {
    let path = format!("/proc/sys/net/ipv4/conf/{dev}/route_localnet");
    std::fs::write(&path, b"1").map_err(|e| LinkError::setup("allow 127.0.0.0/8 over the link", e))
}

/// Creates the client's namespace on a thread of its own, which also makes the TUN
/// device `name` there (addressed `local` ↔ `peer`, default route through it, loopback
/// left down so that 127.0.0.0/8 goes over the link) and, given `cc`, makes it the
/// namespace's TCP congestion control. Returns the namespace and the device; the thread
/// ends, nothing else holds them.
pub fn client_side(
    name: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    cc: Option<&str>,
) -> Result<(OwnedFd, OwnedFd), LinkError> {
    let name = name.to_string();
    let cc = cc.map(str::to_string);
    let t = std::thread::Builder::new()
        .name("tlsperf-link-netns".into())
        .spawn(move || -> Result<(OwnedFd, OwnedFd), LinkError> {
            // SAFETY: unshare only changes this thread's network namespace.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } < 0 {
                let e = io::Error::last_os_error();
                return Err(if e.raw_os_error() == Some(libc::EPERM) {
                    LinkError::Missing {
                        what: "root (CAP_SYS_ADMIN) to create a network namespace".into(),
                        cause: e,
                    }
                } else {
                    LinkError::setup("create a network namespace", e)
                });
            }
            let ns = open_ns()?;
            if let Some(cc) = &cc {
                congestion_control(cc)?;
            }
            let tun = open_tun(&name)?;
            txqueuelen(&name)?;
            address(&name, local, peer)?;
            route_localnet(&name)?;
            std::fs::write("/proc/sys/net/ipv4/conf/all/route_localnet", b"1")
                .map_err(|e| LinkError::setup("allow 127.0.0.0/8 over the link", e))?;
            default_route(&name)?;
            Ok((ns, tun))
        })
        .map_err(|e| LinkError::setup("start the namespace thread", e))?;
    t.join().map_err(|_| {
        LinkError::setup(
            "create the client's namespace",
            io::Error::other("the thread panicked"),
        )
    })?
}

/// The calling thread's namespace's default TCP congestion control.
const CC: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

/// Makes `name` the default TCP congestion control of the calling thread's namespace (a
/// new namespace's default is the first namespace's). The kernel loads the algorithm's
/// module itself when it can; a namespace other than the first may only default to one
/// listed in `net.ipv4.tcp_allowed_congestion_control`.
pub fn congestion_control(name: &str) -> Result<(), LinkError> {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    match std::fs::write(CC, name) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(LinkError::CongestionControl {
            name: name.to_string(),
            why: format!(
                "this kernel has no TCP congestion control '{name}', nor a module tcp_{name} \
                 it could load (available: {})",
                read("/proc/sys/net/ipv4/tcp_available_congestion_control")
            ),
        }),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(LinkError::CongestionControl {
            name: name.to_string(),
            why: format!(
                "the kernel lets a network namespace default only to a congestion control in \
                 net.ipv4.tcp_allowed_congestion_control, which is '{}' here; to allow it, \
                 add it to that machine-wide list (sysctl -w \
                 net.ipv4.tcp_allowed_congestion_control='{} {name}')",
                read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
                read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
            ),
        }),
        Err(e) => Err(LinkError::setup(
            "set the TCP congestion control of the link's namespace",
            e,
        )),
    }
}

/// The calling thread's network namespace.
pub fn open_ns() -> Result<OwnedFd, LinkError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/proc/thread-self/ns/net")
        .map_err(|e| LinkError::setup("open /proc/thread-self/ns/net", e))?;
    Ok(OwnedFd::from(f))
}

/// Moves the calling thread into namespace `ns`.
pub fn set_ns(ns: &OwnedFd) -> Result<(), LinkError> {
    // SAFETY: setns with a namespace descriptor only changes this thread's namespace.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        return Err(LinkError::setup(
            "enter the client's network namespace",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// An eventfd, to wake and stop the delay line's threads.
pub fn eventfd() -> Result<OwnedFd, LinkError> {
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(LinkError::setup(
            "make an eventfd",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn inet_socket() -> Result<OwnedFd, LinkError> {
    // SAFETY: socket returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(LinkError::setup(
            "open a configuration socket",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl(
    sock: &OwnedFd,
    req: libc::Ioctl,
    ifr: &mut libc::ifreq,
    what: &str,
) -> Result<(), LinkError> {
    // SAFETY: the request takes a live ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), req, ifr as *mut libc::ifreq) } < 0 {
        return Err(LinkError::setup(what, io::Error::last_os_error()));
    }
    Ok(())
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    req
}

fn sockaddr(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; the kernel reads the family.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_in_the_benchmark_range() {
        assert_eq!(
            addresses(0),
            (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 1))
        );
        assert_eq!(
            addresses(LINKS - 1),
            (
                Ipv4Addr::new(198, 19, 255, 254),
                Ipv4Addr::new(198, 19, 255, 253)
            )
        );
    }

    #[test]
    fn rtentry_has_the_kernel_layout() {
        // x86_64 and aarch64: struct rtentry is 120 bytes, rt_dev at 88.
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(std::mem::size_of::<RtEntry>(), 120);
            assert_eq!(std::mem::offset_of!(RtEntry, rt_dev), 88);
        }
    }
}
