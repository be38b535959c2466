//! What a link did during a run, as result documents carry it and summaries print it:
//! packets and bytes each way, drops by cause (the model's loss, the queue's overflow,
//! the devices), the queue's peak, the delay line's own lateness, and the TCP congestion
//! control of both ends. One type for every command that takes `--link` (`handshake`,
//! `load`, `capacity`, `lab`, `link`), one text block, one check of a document's values.

use serde::{Deserialize, Serialize};

use super::line::CounterSnapshot;

/// One direction's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionCounters {
    /// Packets the sending side gave the link.
    pub packets: u64,
    /// Their IP bytes.
    pub bytes: u64,
    /// Packets the link handed to the receiving side.
    pub delivered: u64,
    /// Their IP bytes.
    pub delivered_bytes: u64,
    /// Packets the model dropped at random (`loss=`).
    pub model_loss: u64,
    /// Packets dropped because the queue in front of the rate was full (`queue=`).
    pub queue_drops: u64,
    /// Packets dropped by the TUN devices, outside the model: the sending device's queue
    /// full (the delay line did not read fast enough), or the receiving device refusing
    /// a packet.
    pub device_drops: u64,
    /// The most packets the queue held at once (0 without a rate: no queue).
    pub queue_peak_packets: u64,
    /// The most IP bytes it held at once.
    pub queue_peak_bytes: u64,
    /// The delay line's own lateness: how long after its due time each delivered packet
    /// was written, median (µs; histogram buckets 12.5% wide).
    pub late_p50_us: f64,
    /// The same, 99th percentile (µs).
    pub late_p99_us: f64,
    /// The same, largest (µs).
    pub late_max_us: f64,
}

impl DirectionCounters {
    /// From the delay line's counts and the devices' drop count.
    pub fn new(c: &CounterSnapshot, device_drops: u64) -> DirectionCounters {
        DirectionCounters {
            packets: c.packets,
            bytes: c.bytes,
            delivered: c.delivered,
            delivered_bytes: c.delivered_bytes,
            model_loss: c.lost,
            queue_drops: c.overflow,
            device_drops: device_drops + c.write_failed,
            queue_peak_packets: c.queue_peak_packets,
            queue_peak_bytes: c.queue_peak_bytes,
            late_p50_us: c.late_ns_p50 as f64 / 1e3,
            late_p99_us: c.late_ns_p99 as f64 / 1e3,
            late_max_us: c.late_ns_max as f64 / 1e3,
        }
    }

    fn check(&self, dir: &str) -> Result<(), String> {
        if self.delivered > self.packets {
            return Err(format!(
                "link.{dir}.delivered {} is more than the {} packets",
                self.delivered, self.packets
            ));
        }
        if self.model_loss.saturating_add(self.queue_drops) > self.packets {
            return Err(format!(
                "link.{dir}: {} lost and {} dropped from the queue is more than the {} packets",
                self.model_loss, self.queue_drops, self.packets
            ));
        }
        for (name, v) in [
            ("late_p50_us", self.late_p50_us),
            ("late_p99_us", self.late_p99_us),
            ("late_max_us", self.late_max_us),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("link.{dir}.{name} {v} is not a duration"));
            }
        }
        if self.late_p50_us > self.late_p99_us || self.late_p99_us > self.late_max_us {
            return Err(format!(
                "link.{dir}: lateness p50 {} µs, p99 {} µs and max {} µs are out of order",
                self.late_p50_us, self.late_p99_us, self.late_max_us
            ));
        }
        Ok(())
    }

    /// Adds `o`'s counts (saturating: a document's counts are never wrapped); peaks and
    /// lateness take the larger (after a merge they are an
    /// upper bound for the percentiles).
    fn merge(&mut self, o: &DirectionCounters) {
        self.packets = self.packets.saturating_add(o.packets);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.delivered = self.delivered.saturating_add(o.delivered);
        self.delivered_bytes = self.delivered_bytes.saturating_add(o.delivered_bytes);
        self.model_loss = self.model_loss.saturating_add(o.model_loss);
        self.queue_drops = self.queue_drops.saturating_add(o.queue_drops);
        self.device_drops = self.device_drops.saturating_add(o.device_drops);
        self.queue_peak_packets = self.queue_peak_packets.max(o.queue_peak_packets);
        self.queue_peak_bytes = self.queue_peak_bytes.max(o.queue_peak_bytes);
        self.late_p50_us = self.late_p50_us.max(o.late_p50_us);
        self.late_p99_us = self.late_p99_us.max(o.late_p99_us);
        self.late_max_us = self.late_max_us.max(o.late_max_us);
    }
}

/// The TCP congestion control each end's namespace uses by default
/// (`net.ipv4.tcp_congestion_control`); a program may choose another per socket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CongestionControl {
    /// The client's namespace (behind the link).
    pub client: String,
    /// The host's namespace (the servers).
    pub server: String,
}

/// What a link did during a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkCounters {
    /// The link, as a canonical spec.
    pub spec: String,
    /// Client → server.
    pub up: DirectionCounters,
    /// Server → client.
    pub down: DirectionCounters,
    /// TCP congestion control of both ends.
    pub congestion_control: CongestionControl,
    /// The link's round-trip time (ms), which the delay line's lateness is judged
    /// against ([`LinkCounters::warnings`]); absent in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
}

/// The delay line's median lateness, both directions added (what it adds to a round
/// trip), is worth a warning from this share of the link's RTT up: the link is held to
/// its RTT within ±5% (bench/link.sh's target).
pub const LATE_WARN_SHARE: f64 = 0.05;

/// ... and from this much (µs) up, whatever the RTT: below it, the line's own timer
/// wake-ups on a virtual machine (bench/link-tails.sh).
pub const LATE_WARN_FLOOR_US: f64 = 500.0;

impl LinkCounters {
    /// Checks a document's values (what no run can have written).
    pub fn check(&self) -> Result<(), String> {
        self.up.check("up")?;
        self.down.check("down")
    }

    /// Combines the counters of runs merged into one document (same link).
    pub fn merge(&mut self, o: &LinkCounters) {
        self.up.merge(&o.up);
        self.down.merge(&o.down);
        self.rtt_ms = self.rtt_ms.or(o.rtt_ms);
        if self.congestion_control != o.congestion_control {
            for (mine, theirs) in [
                (
                    &mut self.congestion_control.client,
                    &o.congestion_control.client,
                ),
                (
                    &mut self.congestion_control.server,
                    &o.congestion_control.server,
                ),
            ] {
                if mine != theirs && !mine.split('/').any(|c| c == theirs) {
                    mine.push('/');
                    mine.push_str(theirs);
                }
            }
        }
    }

    /// Plain warnings: drops outside the model (the figures then include losses the
    /// link was not asked for), and a delay line late by more than [`LATE_WARN_SHARE`]
    /// of the RTT (and [`LATE_WARN_FLOOR_US`]) at the median: every round trip then took
    /// that much longer than the link asked for.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(rtt_ms) = self.rtt_ms.filter(|r| r.is_finite() && *r >= 0.0) {
            let added_us = self.up.late_p50_us + self.down.late_p50_us;
            if added_us > LATE_WARN_FLOOR_US && added_us > rtt_ms * 1e3 * LATE_WARN_SHARE {
                w.push(format!(
                    "the delay line ran late: median {:.1} ms up and {:.1} ms down, about \
                     {:.1} ms added to every round trip of {} ms ({:.0}%, above the {:.0}% \
                     the link is held to): the machine is too busy for the link's timing, \
                     and the figures include that delay",
                    self.up.late_p50_us / 1e3,
                    self.down.late_p50_us / 1e3,
                    added_us / 1e3,
                    rtt_ms,
                    if rtt_ms > 0.0 {
                        added_us / (rtt_ms * 1e3) * 100.0
                    } else {
                        100.0
                    },
                    LATE_WARN_SHARE * 100.0
                ));
            }
        }
        for (dir, d) in [("up", &self.up), ("down", &self.down)] {
            if d.device_drops > 0 {
                w.push(format!(
                    "the link's TUN devices dropped {} of {} packets {dir}, outside the model \
                     (the delay line did not keep up): the figures include losses the link was \
                     not asked for",
                    d.device_drops, d.packets
                ));
            }
        }
        w
    }

    /// The text block of a summary: a heading, one line per direction, then the
    /// congestion control.
    pub fn text(&self) -> String {
        let mut s = format!("link {}, what it carried:\n", self.spec);
        for (dir, d) in [("up", &self.up), ("down", &self.down)] {
            let pct = |n: u64| match d.packets {
                0 => 0.0,
                p => n as f64 * 100.0 / p as f64,
            };
            s += &format!(
                "  {dir:<4}  {} packets ({} bytes), {} delivered; dropped: {} by the model's loss ({:.2}%), {} by the queue, {} by the devices; queue peak {} pkt; line lateness p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs\n",
                d.packets,
                d.bytes,
                d.delivered,
                d.model_loss,
                pct(d.model_loss),
                d.queue_drops,
                d.device_drops,
                d.queue_peak_packets,
                d.late_p50_us,
                d.late_p99_us,
                d.late_max_us,
            );
        }
        s += &format!(
            "  TCP congestion control: client {}, server {}\n",
            self.congestion_control.client, self.congestion_control.server
        );
        s
    }
}

/// Drop counters of a device, from `/proc/thread-self/net/dev` (the calling thread's
/// namespace): (received and dropped, to be sent and dropped). `None` when the device
/// is not there.
pub fn device_drops(name: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
    parse_net_dev(&text, name)
}

fn parse_net_dev(text: &str, name: &str) -> Option<(u64, u64)> {
    for line in text.lines() {
        let Some((dev, rest)) = line.split_once(':') else {
            continue;
        };
        if dev.trim() != name {
            continue;
        }
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // Receive: bytes packets errs drop …(8 fields); transmit: bytes packets errs drop.
        return Some((*f.get(3)?, *f.get(11)?));
    }
    None
}

/// The calling thread's namespace's default TCP congestion control ("unknown" when it
/// cannot be read).
pub fn congestion_control() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_drops_are_read_by_name() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:  100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n\
tlsperf-l0: 5000 40 0 3 0 0 0 0 9000 60 0 940 0 0 0 0\n";
        assert_eq!(parse_net_dev(text, "tlsperf-l0"), Some((3, 940)));
        assert_eq!(parse_net_dev(text, "lo"), Some((0, 0)));
        assert_eq!(parse_net_dev(text, "eth0"), None);
    }

    #[test]
    fn merged_counters_add_up_and_keep_the_largest_peaks() {
        let one = |packets, late, cc: &str| LinkCounters {
            spec: "rtt=10ms".into(),
            up: DirectionCounters {
                packets,
                delivered: packets,
                device_drops: 1,
                queue_peak_packets: packets / 10,
                late_p50_us: late,
                late_p99_us: late,
                late_max_us: late,
                ..DirectionCounters::default()
            },
            down: DirectionCounters::default(),
            congestion_control: CongestionControl {
                client: cc.into(),
                server: "cubic".into(),
            },
            rtt_ms: Some(10.0),
        };
        let mut a = one(100, 5.0, "bbr");
        a.merge(&one(300, 2.0, "cubic"));
        assert_eq!(a.up.packets, 400);
        assert_eq!(a.up.device_drops, 2);
        assert_eq!(a.up.queue_peak_packets, 30);
        assert_eq!(a.up.late_max_us, 5.0);
        assert_eq!(a.congestion_control.client, "bbr/cubic");
        assert_eq!(a.congestion_control.server, "cubic");
        assert!(a.check().is_ok());
        assert_eq!(a.warnings().len(), 1, "{:?}", a.warnings());
        // Counts of hostile documents saturate, never wrap (nor panic).
        let mut big = one(u64::MAX, 1.0, "cubic");
        big.merge(&one(u64::MAX, 1.0, "cubic"));
        assert_eq!(big.up.packets, u64::MAX);
        assert_eq!(big.up.delivered, u64::MAX);
    }

    #[test]
    fn a_document_cannot_deliver_more_than_it_was_given() {
        let mut c = LinkCounters::default();
        assert!(c.check().is_ok());
        c.down.delivered = 5;
        let err = c.check().unwrap_err();
        assert!(err.contains("link.down.delivered 5"), "{err}");
        c.down.packets = 5;
        c.up.late_p50_us = 9.0;
        c.up.late_max_us = 9.0;
        let err = c.check().unwrap_err();
        assert!(err.contains("out of order"), "{err}");
    }

    /// `handshake --link lte` on a busy machine: the line 7.3 ms late at the median up
    /// and 7 ms down, 14 ms added to every round trip of 70 ms, said nowhere. Warned
    /// from 5% of the RTT (and 0.5 ms) up; not below, nor without the RTT (an older
    /// document).
    #[test]
    fn a_late_delay_line_is_warned_about_against_the_rtt() {
        let late = |up_us: f64, down_us: f64, rtt_ms: Option<f64>| LinkCounters {
            spec: "lte".into(),
            up: DirectionCounters {
                late_p50_us: up_us,
                late_p99_us: up_us,
                late_max_us: up_us,
                ..DirectionCounters::default()
            },
            down: DirectionCounters {
                late_p50_us: down_us,
                late_p99_us: down_us,
                late_max_us: down_us,
                ..DirectionCounters::default()
            },
            congestion_control: CongestionControl::default(),
            rtt_ms,
        };
        let w = late(7300.0, 7000.0, Some(70.0)).warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("the delay line ran late: median 7.3 ms up and 7.0 ms down, about 14.3 ms added to every round trip of 70 ms (20%, above the 5%"),
            "{}",
            w[0]
        );
        // 3% of the RTT: within what the link is held to.
        assert!(late(1000.0, 1100.0, Some(70.0)).warnings().is_empty());
        // Under the floor, even at a short RTT.
        assert!(late(200.0, 200.0, Some(1.0)).warnings().is_empty());
        assert_eq!(late(400.0, 400.0, Some(1.0)).warnings().len(), 1);
        assert!(late(7300.0, 7000.0, None).warnings().is_empty());
    }
}
