//! `--link SPEC`, shared by the client commands: parsed into a [`LinkSpec`], checked
//! against the target, and started as a [`Link`] whose namespace the run's threads enter.

use std::net::ToSocketAddrs;

use clap::Args;

use super::CliError;
use crate::client::target::Target;
use crate::link::{Link, LinkSpec, spec};

/// The `--link` flag.
#[derive(Debug, Args)]
pub struct LinkArgs {
    /// Run over an emulated network path (real kernel TCP; needs root and /dev/net/tun):
    /// rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE][,cc=NAME],
    /// a profile, or a profile with fields overriding it (lte,loss=1%) (see --help).
    #[arg(long, value_name = "SPEC", value_parser = parse, long_help = long_help())]
    pub link: Option<LinkSpec>,
}

fn parse(s: &str) -> Result<LinkSpec, String> {
    s.parse::<LinkSpec>().map_err(|e| e.to_string())
}

fn long_help() -> String {
    let profiles: Vec<String> = spec::PROFILES
        .iter()
        .map(|p| format!("  {:<14}{} ({})", p.name, p.spec, p.source))
        .collect();
    format!(
        "Run over an emulated network path, on real kernel TCP: the client runs in a network \
namespace of its own, joined to this machine's servers through a userspace delay line over \
TUN devices (root and /dev/net/tun needed; all of it goes when the process ends). The server \
must be at an IPv4 address of this machine (127.0.0.1 included).\n\n\
SPEC: rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE][,cc=NAME], e.g. \
rtt=60ms or \
rtt=20ms,down=8mbit,up=2mbit,loss=0.5%. DUR: 250us, 60ms, 0.3s (every duration's syntax; at most 10s). RATE: kbit, mbit, gbit (IP \
bytes; none: no limit). loss: per packet, each direction, a percent (0.5%, or 0.005; at most 50%). jitter: each packet's one-way \
delay is drawn on its own, uniform over rtt/2 ± jitter/2, so the mean stays rtt/2; a packet \
may then overtake the one before it. reorder=off keeps the order: a packet waits for any \
slower one ahead of it, which raises the mean delay of packets sent closer together than the \
jitter (by up to jitter/2 when back to back). queue: drop-tail before each rate, in \
pkt, b/kb/kib/mb/mib, or a time (50ms: the bytes the direction's rate sends in that time; \
a time needs a rate, and a direction without a rate has no queue) (default 1000pkt). \
cc: the TCP congestion control of the client's namespace (cubic, bbr, reno, or another \
this kernel has; a namespace may only default to one in \
net.ipv4.tcp_allowed_congestion_control); it governs what the client sends (uploads); \
downloads are sent with the server's, the host's default; both are in the link's counters.\n\n\
A profile may be followed by fields that override it: lte,loss=1% or \
cable,rtt=40ms,queue=100ms.\n\nProfiles:\n{}",
        profiles.join("\n")
    )
}

impl LinkArgs {
    /// Starts the link for a run against `target` (none without `--link`), after checking
    /// that the link can reach it.
    pub fn start(&self, target: &Target) -> Result<Option<Link>, CliError> {
        let Some(spec) = &self.link else {
            return Ok(None);
        };
        let mut addrs: Vec<_> = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|e| CliError::runtime(anyhow::anyhow!("cannot resolve {}: {e}", target.host)))?
            .collect();
        // A name with IPv4 addresses (localhost) runs over IPv4; one with IPv6 ones only
        // is refused as such.
        if addrs.iter().any(|a| a.is_ipv4()) {
            addrs.retain(|a| a.is_ipv4());
        }
        Link::check_reachable(&addrs, &target.host)?;
        Ok(Some(Link::start(spec)?))
    }
}
