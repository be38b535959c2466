//! Process attribution of local endpoints during live capture: which process owns the
//! socket at an address, read from `/proc` — socket inodes and addresses from
//! `/proc/net/tcp` and `/proc/net/tcp6`, their owners from the `socket:[INODE]` links in
//! `/proc/PID/fd`, names from `/proc/PID/comm`. Read when a connection opens whose
//! client socket is not known yet (at most once a second); what was read is remembered, so
//! that a connection gone by the time its handshake is counted is attributed through its
//! own socket as seen then, else through the process last found at the client end of a
//! connection to the same server within 5 s (a client making many short connections,
//! most of which end between two reads).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The most addresses remembered.
pub const MAX_REMEMBERED: usize = 1 << 16;

/// How long a process found at the client end of a connection to a server stands for
/// that server's next connections whose own socket was not caught.
pub const RECENT: Duration = Duration::from_secs(5);

/// The shortest time between two reads of `/proc` (a read takes a few milliseconds in a
/// release build, tens in a debug one, on the capture's thread).
pub const RESCAN: Duration = Duration::from_secs(1);

/// Who owns what, as of the last read.
#[derive(Debug, Default)]
pub struct Processes {
    /// A connected socket's (local, remote) addresses → its owner (both addresses: an
    /// ephemeral port is soon reused by other connections).
    conns: HashMap<(SocketAddr, SocketAddr), String>,
    /// Server address → the process last found at the client end of a connection to it,
    /// and when.
    clients_of: HashMap<SocketAddr, (String, Instant)>,
    /// Listening port → owner.
    listening: HashMap<u16, String>,
    /// Socket inode → owner, as found.
    inodes: HashMap<u64, String>,
    /// Processes found owning sockets, looked at first.
    pids: Vec<u32>,
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

/// Socket inode → (pid, "comm (pid N)") for the inodes in `wanted`: the processes in
/// `first` are looked at before the others, and the walk stops once every inode is
/// found.
fn owners(wanted: &HashSet<u64>, first: &[u32]) -> HashMap<u64, (u32, String)> {
    let mut out = HashMap::new();
    if wanted.is_empty() {
        return out;
    }
    // Then the newest processes (a short-lived client is likely one of them).
    let mut rest: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !first.contains(pid))
        .collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    for pid in first.iter().copied().chain(rest) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
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
                .filter(|i| wanted.contains(i))
            else {
                continue;
            };
            let label = label.get_or_insert_with(|| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                format!("{} (pid {pid})", comm.trim())
            });
            out.insert(inode, (pid, label.clone()));
        }
        if out.len() == wanted.len() {
            break;
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
        // The sockets first (a short-lived one is then looked for while it still
        // exists), then their owners, starting with the processes found before.
        let mut sockets = Vec::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            sockets.extend(text.lines().skip(1).filter_map(parse_line));
        }
        let wanted: HashSet<u64> = sockets
            .iter()
            .map(|s| s.3)
            .filter(|i| *i != 0 && !self.inodes.contains_key(i))
            .collect();
        let found = owners(&wanted, &self.pids);
        tracing::debug!(
            sockets = sockets.len(),
            wanted = wanted.len(),
            found = found.len(),
            "read /proc for socket owners"
        );
        for (inode, (pid, label)) in found {
            if !self.pids.contains(&pid) {
                self.pids.push(pid);
            }
            self.inodes.insert(inode, label);
        }
        if self.inodes.len() > MAX_REMEMBERED {
            self.inodes.clear();
        }
        if self.pids.len() > 64 {
            self.pids.remove(0);
        }
        if self.conns.len() > MAX_REMEMBERED {
            self.conns.clear();
        }
        let now = Instant::now();
        for &(local, _, listen, inode) in &sockets {
            if listen && let Some(owner) = self.inodes.get(&inode) {
                self.listening.insert(local.port(), owner.clone());
            }
        }
        for (local, remote, listen, inode) in sockets {
            let Some(owner) = self.inodes.get(&inode) else {
                continue;
            };
            self.local_ips.insert(local.ip());
            if !listen {
                self.conns.insert((local, remote), owner.clone());
                // The server end of a local connection is its listener's; the client
                // end is what is remembered here.
                if !self.listening.contains_key(&local.port()) {
                    self.clients_of.insert(remote, (owner.clone(), now));
                }
            }
        }
        if self.clients_of.len() > MAX_REMEMBERED {
            self.clients_of
                .retain(|_, (_, t)| now.duration_since(*t) < RECENT);
        }
    }

    /// Notes a connection as it opens (its SYN): its client's socket is looked for in
    /// `/proc` now, while it exists.
    pub fn opening(&mut self, client: SocketAddr, server: SocketAddr) {
        if !self.conns.contains_key(&(unmap(client), unmap(server))) {
            self.refresh();
        }
    }

    /// The process at the client end of `client` → `server`, if it is on this host: the
    /// owner of its socket as read in `/proc` while it existed, else the process last
    /// found at the client end of a connection to `server`, within [`RECENT`] (a
    /// connection too short-lived to be caught in `/proc`, from a client that makes many).
    pub fn client(&mut self, client: SocketAddr, server: SocketAddr) -> Option<String> {
        let (client, server) = (unmap(client), unmap(server));
        if !self.conns.contains_key(&(client, server)) {
            self.refresh();
        }
        if let Some(owner) = self.conns.get(&(client, server)) {
            self.clients_of
                .insert(server, (owner.clone(), Instant::now()));
            return Some(owner.clone());
        }
        self.clients_of
            .get(&server)
            .filter(|(_, t)| t.elapsed() < RECENT)
            .map(|(o, _)| o.clone())
    }

    /// The process at the server end, if it is on this host.
    pub fn server(&mut self, client: SocketAddr, server: SocketAddr) -> Option<String> {
        let (client, server) = (unmap(client), unmap(server));
        if !self.conns.contains_key(&(server, client))
            && !self.listening.contains_key(&server.port())
        {
            self.refresh();
        }
        self.conns
            .get(&(server, client))
            .or_else(|| {
                self.listening
                    .get(&server.port())
                    .filter(|_| self.local_ips.contains(&server.ip()))
            })
            .cloned()
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
        let server = p.server(c.local_addr().unwrap(), addr).unwrap();
        assert!(server.ends_with(&me), "{server}");
        let client = p.client(c.local_addr().unwrap(), addr).unwrap();
        assert!(client.ends_with(&me), "{client}");
    }
}
