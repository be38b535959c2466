//! What link to emulate: the `--link SPEC` grammar
//! (`rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE][,cc=NAME]`),
//! the named profiles, each with the source of its figures, and a profile with fields
//! overriding it (`lte,loss=1%`).

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
    /// The TCP congestion control the client's namespace defaults to
    /// (`net.ipv4.tcp_congestion_control` there: `cubic`, `bbr`, `reno`, or another the
    /// kernel has); `None` leaves the one a new namespace gets.
    pub cc: Option<String>,
    /// The profile this spec came from, if any (the fields may override it).
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
    /// At most this long to drain at the direction's rate: as many bytes as the rate
    /// serializes in that time ([`Queue::at_rate`]).
    Time(Duration),
}

impl Queue {
    /// The limit for a direction of rate `rate`: a [`Queue::Time`] becomes the bytes the
    /// rate serializes in that time; the others stay as they are. Without a rate nothing
    /// queues, whatever the limit.
    pub fn at_rate(self, rate: Option<Rate>) -> Queue {
        match (self, rate) {
            (Queue::Time(d), Some(r)) => Queue::Bytes(time_bytes(d, r)),
            (q, _) => q,
        }
    }
}

/// The bytes `rate` serializes in `d`.
fn time_bytes(d: Duration, rate: Rate) -> u64 {
    (d.as_nanos().saturating_mul(u128::from(rate.0)) / 8 / 1_000_000_000)
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The smallest queue in bytes: one packet of the devices' 1500-byte MTU.
const MIN_QUEUE_BYTES: u64 = 1500;
/// The largest queue in bytes.
const MAX_QUEUE_BYTES: u64 = 1 << 30;
/// The longest name of a TCP congestion control (the kernel's `TCP_CA_NAME_MAX` less
/// the terminating NUL).
const MAX_CC_NAME: usize = 15;

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

/// The fields' grammar, for messages.
const GRAMMAR: &str =
    "rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE][,cc=NAME]";

impl FromStr for LinkSpec {
    type Err = BadSpec;

    /// A profile (`lte`), KEY=VALUE fields (`rtt=60ms,loss=1%`), or a profile followed by
    /// fields that override it (`lte,loss=1%`).
    fn from_str(s: &str) -> Result<LinkSpec, BadSpec> {
        let bad = |reason: String| BadSpec {
            spec: s.to_string(),
            reason,
        };
        let (first, rest) = match s.split_once(',') {
            Some((first, rest)) => (first.trim(), Some(rest)),
            None => (s.trim(), None),
        };
        if first.contains('=') {
            return parse_fields(s, None).map_err(bad);
        }
        let Some(p) = profile(first) else {
            let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            return Err(bad(format!(
                "'{first}' is not a profile ({}); a link is a profile, KEY=VALUE fields ({GRAMMAR}), or a profile followed by fields overriding it (lte,loss=1%)",
                names.join(", ")
            )));
        };
        let base = profile_spec(p).map_err(bad)?;
        match rest {
            None => Ok(base),
            Some(rest) => parse_fields(rest, Some(base)).map_err(bad),
        }
    }
}

/// The profile named `name` (any case).
fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

/// The link a profile stands for.
fn profile_spec(p: &'static Profile) -> Result<LinkSpec, String> {
    let mut spec = parse_fields(p.spec, None)?;
    spec.profile = Some(p.name);
    Ok(spec)
}

/// The link with nothing set but `rtt`: no jitter, no rate, no loss, the default queue,
/// the namespace's own congestion control.
fn plain(rtt: Duration) -> LinkSpec {
    LinkSpec {
        rtt,
        jitter: Duration::ZERO,
        reorder: true,
        down: None,
        up: None,
        loss: 0.0,
        queue: DEFAULT_QUEUE,
        cc: None,
        profile: None,
    }
}

/// KEY=VALUE fields, over `base` (a profile's link: the fields override it) or over
/// the defaults (then `rtt` is required).
fn parse_fields(s: &str, base: Option<LinkSpec>) -> Result<LinkSpec, String> {
    let over_profile = base.is_some();
    let mut rtt = base.as_ref().map(|b| b.rtt);
    let mut spec = base.unwrap_or_else(|| plain(Duration::ZERO));
    let mut seen: Vec<&str> = Vec::new();
    for field in s.split(',') {
        let Some((key, value)) = field.split_once('=') else {
            let field = field.trim();
            return Err(match profile(field) {
                Some(p) if !over_profile => format!(
                    "'{field}' is not KEY=VALUE (a profile goes first: {},{})",
                    p.name,
                    s.split(',')
                        .filter(|f| f.trim() != field)
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Some(_) => format!("'{field}' is not KEY=VALUE (one profile at most)"),
                None => format!("'{field}' is not KEY=VALUE"),
            });
        };
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
            "cc" => spec.cc = Some(cc(value)?),
            other => {
                return Err(format!(
                    "unknown field '{other}' (expected rtt, jitter, reorder, down, up, loss, queue, cc)"
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
    if let Queue::Time(d) = spec.queue {
        check_queue_time(d, spec.down, spec.up)?;
    }
    Ok(spec)
}

/// A queue given in time holds, in each direction with a rate, at least one packet and
/// at most 1 GiB; it needs a rate to be turned into bytes.
fn check_queue_time(d: Duration, down: Option<Rate>, up: Option<Rate>) -> Result<(), String> {
    if down.is_none() && up.is_none() {
        return Err(format!(
            "queue={} needs a rate to be turned into bytes, and this link has none: give \
             down=RATE or up=RATE, or the queue in pkt or bytes (without a rate nothing \
             queues)",
            fmt_dur(d)
        ));
    }
    for (dir, rate) in [("down", down), ("up", up)] {
        let Some(r) = rate else { continue };
        let bytes = time_bytes(d, r);
        if bytes < MIN_QUEUE_BYTES {
            return Err(format!(
                "queue={} at {dir}={r} holds {bytes} bytes, less than one {MIN_QUEUE_BYTES}-byte packet (nothing could pass)",
                fmt_dur(d)
            ));
        }
        if bytes > MAX_QUEUE_BYTES {
            return Err(format!(
                "queue={} at {dir}={r} holds {bytes} bytes, above the limit of 1 GiB",
                fmt_dur(d)
            ));
        }
    }
    Ok(())
}

/// A congestion control's name as the kernel spells them (`cubic`, `bbr`, `reno`):
/// lowercase letters, digits and `_`, at most 15. Whether this kernel has it is known
/// only when the link starts.
fn cc(v: &str) -> Result<String, String> {
    let name = v.to_ascii_lowercase();
    if name.is_empty()
        || name.len() > MAX_CC_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "cc '{v}' is not a TCP congestion control's name (cubic, bbr, reno, …)"
        ));
    }
    Ok(name)
}

/// `60ms`, `1.5ms`, `250us`, `0.3s` (every duration's syntax, [`crate::duration`]), or
/// `0`; at most 10 s.
fn duration(v: &str) -> Result<Duration, String> {
    if v == "0" {
        return Ok(Duration::ZERO);
    }
    let d = crate::duration::parse(v)?;
    if d > MAX_RTT {
        return Err(format!("'{v}' is above the limit of 10s"));
    }
    Ok(d)
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

/// `2%`, `0.5%` or `0.005` (every ratio's syntax, [`crate::ratio`]); at most 50%.
fn loss(v: &str) -> Result<f64, String> {
    crate::ratio::parse_at_most(v, MAX_LOSS).map_err(|e| format!("loss {e}"))
}

/// `100pkt` (packets), `64kb`, `64kib`, `1mb`, `1mib`, `90000b` (bytes), or `50ms`,
/// `0.5s`, `800us` (time at the direction's rate).
fn queue(v: &str) -> Result<Queue, String> {
    let lower = v.to_ascii_lowercase();
    const UNITS: &str = "pkt, b, kb, kib, mb, mib, or a time such as 50ms";
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("queue '{v}' has no unit ({UNITS})"))?;
    let (num, unit) = lower.split_at(split);
    const SIZES: [&str; 7] = ["pkt", "packets", "b", "kb", "kib", "mb", "mib"];
    if !SIZES.contains(&unit) && crate::duration::parse(v).is_ok() {
        let d = duration(v).map_err(|e| format!("queue {e}"))?;
        if d.is_zero() {
            return Err(format!("queue '{v}' is no time at all"));
        }
        return Ok(Queue::Time(d));
    }
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
            return Err(format!("queue '{v}': unknown unit '{unit}' ({UNITS})"));
        }
    };
    let ok = match q {
        Queue::Packets(p) => (1..=1_000_000).contains(&p),
        Queue::Bytes(b) => (MIN_QUEUE_BYTES..=MAX_QUEUE_BYTES).contains(&b),
        Queue::Time(_) => true,
    };
    if !ok {
        return Err(format!(
            "queue '{v}' is outside 1..1000000 packets or 1500 bytes..1 GiB"
        ));
    }
    Ok(q)
}

/// A probability as a percentage without float noise (0.07 is `7`, not
/// `7.000000000000001`): six decimals at most, trailing zeros dropped.
fn fmt_pct(p: f64) -> String {
    let s = format!("{:.6}", p * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
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
            Queue::Time(d) => f.write_str(&fmt_dur(*d)),
        }
    }
}

/// The canonical spec, which parses back to the same link: every field that differs
/// from the defaults (`rtt=60ms,down=8mbit,loss=2%`); for a link made from a profile, the
/// profile's name first, then every field that differs from the defaults or from the
/// profile (`lte,rtt=70ms,down=12mbit,up=12mbit,loss=1%`), so that a document shows the
/// figures as well as the name.
impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let defaults = plain(Duration::ZERO);
        let base = self
            .profile
            .and_then(profile)
            .and_then(|p| profile_spec(p).ok());
        let base = base.as_ref().unwrap_or(&defaults);
        // A field is written when it differs from the defaults, or from the profile (a
        // default overriding a profile's value must be said: `down=none`).
        let show = |differs: fn(&LinkSpec, &LinkSpec) -> bool| {
            differs(self, &defaults) || differs(self, base)
        };
        if let Some(p) = self.profile {
            write!(f, "{p},")?;
        }
        write!(f, "rtt={}", fmt_dur(self.rtt))?;
        if show(|a, b| a.jitter != b.jitter) {
            write!(f, ",jitter={}", fmt_dur(self.jitter))?;
        }
        if show(|a, b| a.reorder != b.reorder) {
            write!(f, ",reorder={}", if self.reorder { "on" } else { "off" })?;
        }
        for (name, rate, differs) in [
            ("down", self.down, show(|a, b| a.down != b.down)),
            ("up", self.up, show(|a, b| a.up != b.up)),
        ] {
            match (differs, rate) {
                (false, _) => {}
                (true, Some(r)) => write!(f, ",{name}={r}")?,
                (true, None) => write!(f, ",{name}=none")?,
            }
        }
        if show(|a, b| a.loss != b.loss) {
            write!(f, ",loss={}%", fmt_pct(self.loss))?;
        }
        if show(|a, b| a.queue != b.queue) {
            write!(f, ",queue={}", self.queue)?;
        }
        if let Some(cc) = &self.cc {
            write!(f, ",cc={cc}")?;
        }
        Ok(())
    }
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
    fn every_profile_parses_and_round_trips() {
        for p in PROFILES {
            let s: LinkSpec = p.name.parse().unwrap();
            assert_eq!(s.profile, Some(p.name));
            assert!(!s.rtt.is_zero(), "{}", p.name);
            let text = s.to_string();
            assert_eq!(text, format!("{},{}", p.name, p.spec));
            assert_eq!(text.parse::<LinkSpec>().unwrap(), s, "{text}");
        }
        let lte: LinkSpec = "LTE".parse().unwrap();
        assert_eq!(lte.rtt, Duration::from_millis(70));
    }

    #[test]
    fn a_profile_takes_fields_that_override_it() {
        let s: LinkSpec = "lte,loss=1%".parse().unwrap();
        assert_eq!(s.profile, Some("lte"));
        assert_eq!(s.rtt, Duration::from_millis(70));
        assert_eq!(
            (s.down, s.up),
            (Some(Rate(12_000_000)), Some(Rate(12_000_000)))
        );
        assert!((s.loss - 0.01).abs() < 1e-12);
        assert_eq!(s.to_string(), "lte,rtt=70ms,down=12mbit,up=12mbit,loss=1%");
        assert_eq!(s.to_string().parse::<LinkSpec>().unwrap(), s);
        // A profile's own field overridden, any case, spaces around the fields.
        let s: LinkSpec = "LTE, rtt=20ms ,queue=100ms,cc=reno".parse().unwrap();
        assert_eq!((s.profile, s.rtt), (Some("lte"), Duration::from_millis(20)));
        assert_eq!(s.queue, Queue::Time(Duration::from_millis(100)));
        assert_eq!(s.cc.as_deref(), Some("reno"));
        assert_eq!(
            s.to_string(),
            "lte,rtt=20ms,down=12mbit,up=12mbit,queue=100ms,cc=reno"
        );
        assert_eq!(s.to_string().parse::<LinkSpec>().unwrap(), s);
        // A default overriding a profile's value is written out, or it would not
        // round-trip.
        let s: LinkSpec = "cable,down=none".parse().unwrap();
        assert_eq!(s.down, None);
        assert_eq!(s.to_string(), "cable,rtt=28ms,down=none,up=1mbit");
        assert_eq!(s.to_string().parse::<LinkSpec>().unwrap(), s);
        // Fields alone are not a profile.
        let s: LinkSpec = "rtt=70ms,down=12mbit,up=12mbit".parse().unwrap();
        assert_eq!(s.profile, None);
        assert_ne!(s, "lte".parse::<LinkSpec>().unwrap());
    }

    #[test]
    fn a_queue_in_time_is_the_bytes_its_rate_drains_in_that_time() {
        let s: LinkSpec = "rtt=20ms,down=8mbit,up=1mbit,queue=50ms".parse().unwrap();
        assert_eq!(s.queue, Queue::Time(Duration::from_millis(50)));
        assert_eq!(s.queue.at_rate(s.down), Queue::Bytes(50_000));
        assert_eq!(s.queue.at_rate(s.up), Queue::Bytes(6_250));
        // No rate: nothing queues; the limit stays a time.
        assert_eq!(s.queue.at_rate(None), s.queue);
        assert_eq!(s.to_string(), "rtt=20ms,down=8mbit,up=1mbit,queue=50ms");
        assert_eq!(s.to_string().parse::<LinkSpec>().unwrap(), s);
        // One direction without a rate is no reason to refuse: it has no queue.
        let s: LinkSpec = "rtt=20ms,down=1gbit,queue=0.5ms".parse().unwrap();
        assert_eq!(s.queue.at_rate(s.down), Queue::Bytes(62_500));
        assert_eq!(s.to_string(), "rtt=20ms,down=1gbit,queue=500us");
        let s: LinkSpec = "rtt=20ms,down=8mbit,queue=1.5s".parse().unwrap();
        assert_eq!(s.queue.at_rate(s.down), Queue::Bytes(1_500_000));
    }

    #[test]
    fn congestion_control_and_loss_round_trip() {
        let s: LinkSpec = "rtt=10ms,cc=Reno".parse().unwrap();
        assert_eq!(s.cc.as_deref(), Some("reno"));
        assert_eq!(s.to_string(), "rtt=10ms,cc=reno");
        assert_eq!("rtt=10ms".parse::<LinkSpec>().unwrap().cc, None);
        for text in ["rtt=1ms,loss=7%", "rtt=1ms,loss=0.3%", "rtt=1ms,loss=33.3%"] {
            let s: LinkSpec = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(s.to_string().parse::<LinkSpec>().unwrap(), s);
        }
    }

    #[test]
    fn rejects_with_reasons() {
        for (bad, why) in [
            ("", "not a profile"),
            ("wifi", "not a profile"),
            ("down=8mbit", "rtt=DUR is required"),
            ("rtt=60", "no unit"),
            ("rtt=60min", "above the limit of 10s"),
            ("rtt=1h", "above the limit of 10s"),
            ("rtt=60parsecs", "not a duration"),
            ("rtt=11s", "above the limit"),
            ("rtt=60ms,rtt=70ms", "twice"),
            ("rtt=10ms,jitter=20ms", "larger than the rtt"),
            ("rtt=10ms,down=8mbps", "unknown unit"),
            ("rtt=10ms,down=1kbit", "outside"),
            ("rtt=10ms,loss=2", "write 2% for a percent"),
            ("rtt=10ms,loss=60%", "loss '60%' is above 50%"),
            // One sentence whatever the excess (was "above 100%" for 150% but "outside
            // 0%..50%" for 50.0000001%).
            ("rtt=10ms,loss=150%", "loss '150%' is above 50%"),
            (
                "rtt=10ms,loss=50.0000001%",
                "loss '50.0000001%' is above 50%",
            ),
            ("rtt=10ms,queue=0pkt", "outside"),
            ("rtt=10ms,queue=10", "no unit"),
            ("rtt=10ms,speed=1", "unknown field"),
            ("rtt=10ms,reorder=maybe", "not on or off"),
            ("rtt=10ms,,", "not KEY=VALUE"),
            ("rtt=10ms,queue=0ms,down=8mbit", "no time at all"),
            ("rtt=10ms,queue=50ms", "needs a rate"),
            (
                "rtt=10ms,up=1mbit,queue=1ms",
                "125 bytes, less than one 1500-byte packet",
            ),
            ("rtt=10ms,down=100gbit,queue=1s", "above the limit of 1 GiB"),
            ("rtt=10ms,queue=5furlongs,down=1mbit", "unknown unit"),
            ("rtt=10ms,queue=1h,down=1gbit", "above the limit of 10s"),
            ("rtt=10ms,cc=", "not a TCP congestion control"),
            ("rtt=10ms,cc=new reno", "not a TCP congestion control"),
            (
                "rtt=10ms,cc=averyveryverylongname",
                "not a TCP congestion control",
            ),
            ("lte,loss=1%,loss=2%", "twice"),
            ("lte,3g", "one profile at most"),
            ("loss=1%,lte", "a profile goes first: lte,loss=1%"),
            ("wifi,loss=1%", "'wifi' is not a profile"),
            ("lte,jitter=100ms", "larger than the rtt 70ms"),
            ("transatlantic,queue=20ms", "needs a rate"),
        ] {
            let e = bad.parse::<LinkSpec>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("  ") && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
