//! Process attribution of local endpoints during live capture: which process owns the
//! socket at an address, read from `/proc` — socket inodes and addresses from
//! `/proc/net/tcp` and `/proc/net/tcp6`, their owners from the `socket:[INODE]` links in
//! `/proc/PID/fd`, names from `/proc/PID/comm`. Read at most once a second while
//! connections open; what was read is remembered, so that a connection already gone
//! when its handshake is counted is attributed through its own socket as seen then, or
//! through the process that talked to the same server (a client's other connections) or
//! listens on its port.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The most addresses remembered.
pub const MAX_REMEMBERED: usize = 1 << 16;

/// The shortest time between two reads of `/proc`.
pub const RESCAN: Duration = Duration::from_secs(1);

/// Who owns what, as of the last read.
#[derive(Debug, Default)]
pub struct Processes {
    /// Local address of a connected socket → its owner.
    local: HashMap<SocketAddr, String>,
    /// Remote address of a connected socket → the owner of the local end.
    peers: HashMap<SocketAddr, String>,
    /// Listening port → owner.
    listening: HashMap<u16, String>,
    /// Local addresses of this host (of every socket seen).
    local_ips: std::collections::HashSet<IpAddr>,
    scanned: Option<Instant>,
}

fn unmap(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// Parses `0100007F:1F90` (IPv4) or the 32-hex-digit IPv6 form of `/proc/net/tcp*`.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => {
            let v = u32::from_str_radix(ip, 16).ok()?;
            IpAddr::V4(Ipv4Addr::from(v.swap_bytes()))
        }
        32 => {
            let mut b = [0u8; 16];
            for (i, word) in b.chunks_mut(4).enumerate() {
                let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
                word.copy_from_slice(&w.swap_bytes().to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(unmap(SocketAddr::new(ip, port)))
}

/// One socket line of `/proc/net/tcp*`: local, remote, listening?, inode.
fn parse_line(line: &str) -> Option<(SocketAddr, SocketAddr, bool, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let local = parse_addr(f.get(1)?)?;
    let remote = parse_addr(f.get(2)?)?;
    let listen = *f.get(3)? == "0A";
    let inode = f.get(9)?.parse().ok()?;
    Some((local, remote, listen, inode))
}

/// Socket inode → "comm (pid N)" for every process readable.
fn owners() -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut label = None;
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
            else {
                continue;
            };
            let label = label.get_or_insert_with(|| {
                let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
                format!("{} (pid {pid})", comm.trim())
            });
            out.insert(inode, label.clone());
        }
    }
    out
}

impl Processes {
    /// Nothing known yet.
    pub fn new() -> Processes {
        Processes::default()
    }

    /// Reads `/proc` again, unless it was read less than [`RESCAN`] ago.
    pub fn refresh(&mut self) {
        if self.scanned.is_some_and(|t| t.elapsed() < RESCAN) {
            return;
        }
        self.scanned = Some(Instant::now());
        let owners = owners();
        // What was seen stays (a connection gone by the time it is looked up is still
        // attributed), newer readings overwrite it; bounded.
        if self.local.len() + self.peers.len() > MAX_REMEMBERED {
            self.local.clear();
            self.peers.clear();
        }
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let Some((local, remote, listen, inode)) = parse_line(line) else {
                    continue;
                };
                let Some(owner) = owners.get(&inode) else {
                    continue;
                };
                self.local_ips.insert(local.ip());
                if listen {
                    self.listening.insert(local.port(), owner.clone());
                } else {
                    self.local.insert(local, owner.clone());
                    self.peers.insert(remote, owner.clone());
                }
            }
        }
    }

    fn lookup(&mut self, f: impl Fn(&Processes) -> Option<String>) -> Option<String> {
        // At most once a second, so that readings stay current.
        self.refresh();
        f(self)
    }

    /// Notes a connection as it opens (its SYN): reading `/proc` then finds the client's
    /// socket, which may be gone by the time the handshake is counted.
    pub fn opening(&mut self, client: SocketAddr, server: SocketAddr) {
        let _ = self.client(client, server);
    }

    /// The process at the client end of `client` → `server`, if it is on this host.
    pub fn client(&mut self, client: SocketAddr, server: SocketAddr) -> Option<String> {
        let (client, server) = (unmap(client), unmap(server));
        self.lookup(|p| {
            p.local
                .get(&client)
                .or_else(|| p.peers.get(&server))
                .cloned()
        })
    }

    /// The process at the server end, if it is on this host.
    pub fn server(&mut self, server: SocketAddr) -> Option<String> {
        let server = unmap(server);
        self.lookup(|p| {
            p.local
                .get(&server)
                .or_else(|| {
                    p.listening
                        .get(&server.port())
                        .filter(|_| p.local_ips.contains(&server.ip()))
                })
                .cloned()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_tcp_lines() {
        let l = "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 20 4 30 10 -1";
        let (local, remote, listen, inode) = parse_line(l).unwrap();
        assert_eq!(local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(remote, "127.0.0.1:50000".parse().unwrap());
        assert!(!listen);
        assert_eq!(inode, 12345);
        // ::ffff:127.0.0.1 port 443, listening.
        let l6 = "   1: 0000000000000000FFFF00000100007F:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1";
        let (local, _, listen, inode) = parse_line(l6).unwrap();
        assert_eq!(local, "127.0.0.1:443".parse().unwrap());
        assert!(listen);
        assert_eq!(inode, 777);
        let any6 = parse_addr("00000000000000000000000001000000:0050").unwrap();
        assert_eq!(any6, "[::1]:80".parse().unwrap());
        assert!(parse_line("garbage").is_none());
    }

    #[test]
    fn finds_this_process_listening() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(addr).unwrap();
        let (_s, _) = l.accept().unwrap();
        let mut p = Processes::new();
        let me = format!("(pid {})", std::process::id());
        let server = p.server(addr).unwrap();
        assert!(server.ends_with(&me), "{server}");
        let client = p.client(c.local_addr().unwrap(), addr).unwrap();
        assert!(client.ends_with(&me), "{client}");
    }
}
