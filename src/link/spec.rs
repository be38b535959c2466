//! What link to emulate: the `--link SPEC` grammar
//! (`rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE]`)
//! and the named
//! profiles, each with the source of its figures.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The longest round trip accepted (a GEO satellite hop is ~0.6 s).
const MAX_RTT: Duration = Duration::from_secs(10);
/// The highest loss rate accepted, per packet and direction.
const MAX_LOSS: f64 = 0.5;
/// The default drop-tail queue: 1000 packets, a Linux `txqueuelen`'s default.
pub const DEFAULT_QUEUE: Queue = Queue::Packets(1000);

/// An emulated network path between the client and the server.
///
/// Each direction is modelled alike: a packet is lost with probability `loss`; else it
/// joins a drop-tail queue, is serialized at the direction's rate (IP bytes; no rate
/// means no serialization delay), then travels for half the round trip, plus or minus
/// half the jitter (uniform, drawn for each packet independently), so that the mean
/// one-way delay is half the round trip whatever the traffic. A packet may then overtake
/// the one before it, as on a path whose packets take different routes (netem does the
/// same). With `reorder=off` it never does: a packet drawn to arrive before the one
/// ahead of it waits for it, which raises the mean one-way delay of packets sent closer
/// together than the jitter, by up to half the jitter for packets sent back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// Round-trip propagation delay (half on the way out, half on the way back).
    pub rtt: Duration,
    /// Spread of the round trip: each packet's one-way delay is drawn uniformly from
    /// `rtt/2 ± jitter/2`, independently.
    pub jitter: Duration,
    /// Whether a packet may overtake the one before it (when jitter draws it a shorter
    /// delay). Default true; false keeps the order at the cost of a higher mean delay.
    pub reorder: bool,
    /// Server → client rate.
    pub down: Option<Rate>,
    /// Client → server rate.
    pub up: Option<Rate>,
    /// Probability that a packet is lost, each direction (0 to 0.5).
    pub loss: f64,
    /// Drop-tail queue in front of each direction's rate.
    pub queue: Queue,
    /// The profile this spec came from, if any.
    pub profile: Option<&'static str>,
}

/// A link rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u64);

/// A drop-tail queue limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// At most this many IP bytes waiting or being serialized.
    Bytes(u64),
    /// At most this many packets waiting or being serialized.
    Packets(u64),
}

/// A named link with the source of its figures.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Name given to `--link`.
    pub name: &'static str,
    /// The spec it stands for.
    pub spec: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The shipped profiles.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "cable",
        spec: "rtt=28ms,down=5mbit,up=1mbit",
        source: "WebPageTest 'Cable'",
    },
    Profile {
        name: "dsl",
        spec: "rtt=50ms,down=1500kbit,up=384kbit",
        source: "WebPageTest 'DSL'",
    },
    Profile {
        name: "3g",
        spec: "rtt=300ms,down=1600kbit,up=768kbit",
        source: "WebPageTest '3G'",
    },
    Profile {
        name: "3g-fast",
        spec: "rtt=150ms,down=1600kbit,up=768kbit",
        source: "WebPageTest '3G Fast'",
    },
    Profile {
        name: "4g",
        spec: "rtt=170ms,down=9mbit,up=9mbit",
        source: "WebPageTest '4G'",
    },
    Profile {
        name: "lte",
        spec: "rtt=70ms,down=12mbit,up=12mbit",
        source: "WebPageTest 'LTE'",
    },
    Profile {
        name: "slow-4g",
        spec: "rtt=150ms,down=1600kbit,up=750kbit",
        source: "Lighthouse 'Slow 4G' (mobile default; applied as packet-level throttling)",
    },
    Profile {
        name: "transatlantic",
        spec: "rtt=75ms",
        source: "London-New York round trip on a good path (~5,600 km of fibre, ~70-80 ms)",
    },
    Profile {
        name: "satellite",
        spec: "rtt=600ms",
        source: "geostationary hop: 4 x 35,786 km at light speed is 477 ms, plus ground segments",
    },
];

/// A `--link` value that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid link '{spec}': {reason}")]
pub struct BadSpec {
    /// The value given.
    pub spec: String,
    /// Why.
    pub reason: String,
}

impl FromStr for LinkSpec {
    type Err = BadSpec;

    fn from_str(s: &str) -> Result<LinkSpec, BadSpec> {
        let bad = |reason: String| BadSpec {
            spec: s.to_string(),
            reason,
        };
        if let Some(p) = PROFILES.iter().find(|p| p.name.eq_ignore_ascii_case(s)) {
            let mut spec = parse_fields(p.spec).map_err(bad)?;
            spec.profile = Some(p.name);
            return Ok(spec);
        }
        if !s.contains('=') {
            let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            return Err(bad(format!(
                "not a profile ({}) nor KEY=VALUE fields (rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE])",
                names.join(", ")
            )));
        }
        parse_fields(s).map_err(bad)
    }
}

fn parse_fields(s: &str) -> Result<LinkSpec, String> {
    let mut rtt = None;
    let mut spec = LinkSpec {
        rtt: Duration::ZERO,
        jitter: Duration::ZERO,
        reorder: true,
        down: None,
        up: None,
        loss: 0.0,
        queue: DEFAULT_QUEUE,
        profile: None,
    };
    let mut seen: Vec<&str> = Vec::new();
    for field in s.split(',') {
        let (key, value) = field
            .split_once('=')
            .ok_or_else(|| format!("'{field}' is not KEY=VALUE"))?;
        let key = key.trim();
        let value = value.trim();
        if seen.contains(&key) {
            return Err(format!("'{key}' is given twice"));
        }
        seen.push(key);
        match key {
            "rtt" => rtt = Some(duration(value)?),
            "jitter" => spec.jitter = duration(value)?,
            "reorder" => {
                spec.reorder = match value.to_ascii_lowercase().as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("reorder '{value}' is not on or off")),
                }
            }
            "down" => spec.down = rate_or_none(value)?,
            "up" => spec.up = rate_or_none(value)?,
            "loss" => spec.loss = loss(value)?,
            "queue" => spec.queue = queue(value)?,
            other => {
                return Err(format!(
                    "unknown field '{other}' (expected rtt, jitter, reorder, down, up, loss, queue)"
                ));
            }
        }
    }
    spec.rtt = rtt.ok_or("rtt=DUR is required (e.g. rtt=60ms; rtt=0 for no delay)")?;
    if spec.rtt > MAX_RTT {
        return Err(format!(
            "rtt {} is above the limit of 10s",
            fmt_dur(spec.rtt)
        ));
    }
    if spec.jitter > spec.rtt {
        return Err(format!(
            "jitter {} is larger than the rtt {}",
            fmt_dur(spec.jitter),
            fmt_dur(spec.rtt)
        ));
    }
    Ok(spec)
}

/// `60ms`, `1.5ms`, `250us`, `0.3s`, or `0`.
fn duration(v: &str) -> Result<Duration, String> {
    if v == "0" {
        return Ok(Duration::ZERO);
    }
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("'{v}' has no unit (us, ms or s)"))?;
    let (num, unit) = v.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{v}' is not a duration (e.g. 60ms)"))?;
    let scale = match unit {
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(format!("'{v}': unknown unit '{unit}' (us, ms or s)")),
    };
    let secs = n * scale;
    if !secs.is_finite() || secs > MAX_RTT.as_secs_f64() {
        return Err(format!("'{v}' is above the limit of 10s"));
    }
    Ok(Duration::from_nanos((secs * 1e9).round() as u64))
}

/// A rate, or `none` for no limit (as the help says).
fn rate_or_none(v: &str) -> Result<Option<Rate>, String> {
    match v.eq_ignore_ascii_case("none") {
        true => Ok(None),
        false => rate(v).map(Some),
    }
}

/// `8mbit`, `1500kbit`, `1gbit`, `64000bit` (bits per second, as `tc` writes them).
fn rate(v: &str) -> Result<Rate, String> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("'{v}' has no unit (kbit, mbit or gbit)"))?;
    let (num, unit) = lower.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{v}' is not a rate (e.g. 8mbit)"))?;
    let scale = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return Err(format!("'{v}': unknown unit '{unit}' (kbit, mbit or gbit)")),
    };
    let bps = n * scale;
    if !(8_000.0..=100e9).contains(&bps) {
        return Err(format!("rate '{v}' is outside 8kbit..100gbit"));
    }
    Ok(Rate(bps.round() as u64))
}

/// `2%` or `0.5%`.
fn loss(v: &str) -> Result<f64, String> {
    let num = v
        .strip_suffix('%')
        .ok_or_else(|| format!("loss '{v}' needs a % sign (e.g. loss=1%)"))?;
    let p: f64 = num
        .parse()
        .map_err(|_| format!("loss '{v}' is not a percentage"))?;
    let p = p / 100.0;
    if !(0.0..=MAX_LOSS).contains(&p) {
        return Err(format!("loss '{v}' is outside 0%..50%"));
    }
    Ok(p)
}

/// `100pkt` (packets) or `64kb`, `64kib`, `1mb`, `1mib`, `90000b` (bytes).
fn queue(v: &str) -> Result<Queue, String> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("queue '{v}' has no unit (pkt, b, kb, kib, mb, mib)"))?;
    let (num, unit) = lower.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("queue '{v}' is not a whole number with a unit"))?;
    let q = match unit {
        "pkt" | "packets" => Queue::Packets(n),
        "b" => Queue::Bytes(n),
        "kb" => Queue::Bytes(n.saturating_mul(1000)),
        "kib" => Queue::Bytes(n.saturating_mul(1024)),
        "mb" => Queue::Bytes(n.saturating_mul(1_000_000)),
        "mib" => Queue::Bytes(n.saturating_mul(1 << 20)),
        _ => {
            return Err(format!(
                "queue '{v}': unknown unit '{unit}' (pkt, b, kb, kib, mb, mib)"
            ));
        }
    };
    let ok = match q {
        Queue::Packets(p) => (1..=1_000_000).contains(&p),
        Queue::Bytes(b) => (1500..=1 << 30).contains(&b),
    };
    if !ok {
        return Err(format!(
            "queue '{v}' is outside 1..1000000 packets or 1500 bytes..1 GiB"
        ));
    }
    Ok(q)
}

fn fmt_dur(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b.is_multiple_of(1_000_000_000) {
            write!(f, "{}gbit", b / 1_000_000_000)
        } else if b.is_multiple_of(1_000_000) {
            write!(f, "{}mbit", b / 1_000_000)
        } else if b.is_multiple_of(1000) {
            write!(f, "{}kbit", b / 1000)
        } else {
            write!(f, "{b}bit")
        }
    }
}

impl fmt::Display for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Queue::Packets(p) => write!(f, "{p}pkt"),
            Queue::Bytes(b) => write!(f, "{b}b"),
        }
    }
}

/// The canonical spec, which parses back to the same link
/// (`rtt=60ms,down=8mbit,loss=2%`); defaults are left out.
impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rtt={}", fmt_dur(self.rtt))?;
        if !self.jitter.is_zero() {
            write!(f, ",jitter={}", fmt_dur(self.jitter))?;
        }
        if !self.reorder {
            write!(f, ",reorder=off")?;
        }
        if let Some(r) = self.down {
            write!(f, ",down={r}")?;
        }
        if let Some(r) = self.up {
            write!(f, ",up={r}")?;
        }
        if self.loss > 0.0 {
            write!(f, ",loss={}%", self.loss * 100.0)?;
        }
        if self.queue != DEFAULT_QUEUE {
            write!(f, ",queue={}", self.queue)?;
        }
        Ok(())
    }
}

/// The profiles as help text: one line each, with the source.
pub fn profiles_help() -> String {
    PROFILES
        .iter()
        .map(|p| format!("{}: {} ({})", p.name, p.spec, p.source))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_and_round_trips() {
        let s: LinkSpec = "rtt=20ms,down=8mbit,up=2mbit,loss=0.5%".parse().unwrap();
        assert_eq!(s.rtt, Duration::from_millis(20));
        assert_eq!(s.down, Some(Rate(8_000_000)));
        assert_eq!(s.up, Some(Rate(2_000_000)));
        assert!((s.loss - 0.005).abs() < 1e-12);
        assert_eq!(s.queue, DEFAULT_QUEUE);
        assert_eq!(s.to_string(), "rtt=20ms,down=8mbit,up=2mbit,loss=0.5%");
        let again: LinkSpec = s.to_string().parse().unwrap();
        assert_eq!(again, s);
        let s: LinkSpec = "rtt=1.5ms,jitter=500us,queue=64kib".parse().unwrap();
        assert_eq!(s.rtt, Duration::from_micros(1500));
        assert_eq!(s.jitter, Duration::from_micros(500));
        assert_eq!(s.queue, Queue::Bytes(65536));
        assert_eq!(s.to_string(), "rtt=1500us,jitter=500us,queue=65536b");
        assert_eq!("rtt=0".parse::<LinkSpec>().unwrap().rtt, Duration::ZERO);
        // `none`: no limit, as the help says.
        let s: LinkSpec = "rtt=60ms,down=none,up=2mbit".parse().unwrap();
        assert_eq!((s.down, s.up), (None, Some(Rate(2_000_000))));
        let s: LinkSpec = "rtt=60ms,jitter=20ms,reorder=off".parse().unwrap();
        assert!(!s.reorder);
        assert_eq!(s.to_string(), "rtt=60ms,jitter=20ms,reorder=off");
        assert!("rtt=60ms,reorder=ON".parse::<LinkSpec>().unwrap().reorder);
    }

    #[test]
    fn every_profile_parses() {
        for p in PROFILES {
            let s: LinkSpec = p.name.parse().unwrap();
            assert_eq!(s.profile, Some(p.name));
            assert!(!s.rtt.is_zero(), "{}", p.name);
        }
        let lte: LinkSpec = "LTE".parse().unwrap();
        assert_eq!(lte.rtt, Duration::from_millis(70));
    }

    #[test]
    fn rejects_with_reasons() {
        for (bad, why) in [
            ("", "not a profile"),
            ("wifi", "not a profile"),
            ("down=8mbit", "rtt=DUR is required"),
            ("rtt=60", "no unit"),
            ("rtt=60min", "unknown unit"),
            ("rtt=11s", "above the limit"),
            ("rtt=60ms,rtt=70ms", "twice"),
            ("rtt=10ms,jitter=20ms", "larger than the rtt"),
            ("rtt=10ms,down=8mbps", "unknown unit"),
            ("rtt=10ms,down=1kbit", "outside"),
            ("rtt=10ms,loss=2", "% sign"),
            ("rtt=10ms,loss=60%", "outside"),
            ("rtt=10ms,queue=0pkt", "outside"),
            ("rtt=10ms,queue=10", "no unit"),
            ("rtt=10ms,speed=1", "unknown field"),
            ("rtt=10ms,reorder=maybe", "not on or off"),
            ("rtt=10ms,,", "not KEY=VALUE"),
        ] {
            let e = bad.parse::<LinkSpec>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
