//! Round trips: how many a connection's critical path to its first response byte takes
//! (TCP 1; TLS 1.3 full 1, TLS 1.2 full 2, resumed 1, a HelloRetryRequest +1; the request
//! 1, or 0 when it went as accepted 0-RTT data), and whether the server's first flight
//! fits in the initial congestion window (Linux: 10 segments), past which it waits one
//! more round trip for an ACK, whatever the RTT.

use serde::Serialize;

/// Linux's initial congestion window, in segments (RFC 6928).
pub const INITCWND_SEGMENTS: usize = 10;
/// TCP payload per segment at an MTU of 1,500 with timestamps (1500 − 20 − 32), as on
/// the link's devices.
pub const MSS: usize = 1448;

/// One step of a critical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// What it is ("TCP handshake", "TLS 1.3 full handshake", "request"…).
    pub what: String,
    /// Round trips it takes.
    pub round_trips: u32,
}

/// The round trips of one kind of connection, up to its first response byte.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalPath {
    /// Connection kind (full, full-hrr, resumed-ticket, resumed-session-id), with
    /// `+0rtt` when its request went as accepted early data.
    pub kind: String,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Their sum.
    pub round_trips: u32,
    /// `round_trips` × the link's RTT, in milliseconds.
    pub expected_ms: f64,
}

/// The server's flight answering the ClientHello, against the initial window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flight {
    /// TLS bytes.
    pub bytes: usize,
    /// TCP segments of [`MSS`] bytes.
    pub segments: usize,
    /// [`INITCWND_SEGMENTS`].
    pub initcwnd_segments: usize,
    /// Whether it fits in the initial window.
    pub fits: bool,
}

impl Flight {
    /// A flight of `bytes`.
    pub fn new(bytes: usize) -> Flight {
        let segments = bytes.div_ceil(MSS);
        Flight {
            bytes,
            segments,
            initcwnd_segments: INITCWND_SEGMENTS,
            fits: segments <= INITCWND_SEGMENTS,
        }
    }
}

/// The critical path of a connection of `kind` (as [`crate::client::conn::HandshakeClass::name`])
/// at `version` ("TLSv1.3"…), whose request went as accepted 0-RTT data or not, whose
/// server's first flight was `flight`, on a link of `rtt_ms`.
pub fn critical_path(
    version: &str,
    kind: &str,
    early_accepted: bool,
    flight: &Flight,
    rtt_ms: f64,
) -> CriticalPath {
    let v = version.trim_start_matches("TLSv");
    let mut steps = vec![Step {
        what: "TCP handshake".into(),
        round_trips: 1,
    }];
    let resumed = kind.starts_with("resumed");
    let (tls_trips, label) = match (v, kind) {
        ("1.2", k) if k.starts_with("resumed") => (1, "TLS 1.2 resumed handshake"),
        ("1.2", _) => (2, "TLS 1.2 full handshake"),
        (_, "full-hrr") => (2, "TLS 1.3 full handshake after a HelloRetryRequest"),
        (_, k) if k.starts_with("resumed") => (1, "TLS 1.3 resumed handshake"),
        _ => (1, "TLS 1.3 full handshake"),
    };
    steps.push(Step {
        what: label.into(),
        round_trips: tls_trips,
    });
    if !flight.fits && !resumed {
        steps.push(Step {
            what: format!(
                "server's first flight past the initial window ({} segments > {})",
                flight.segments, flight.initcwnd_segments
            ),
            round_trips: 1,
        });
    }
    steps.push(if early_accepted {
        Step {
            what: "request (0-RTT early data, answered with the handshake)".into(),
            round_trips: 0,
        }
    } else {
        Step {
            what: "request".into(),
            round_trips: 1,
        }
    });
    let round_trips = steps.iter().map(|s| s.round_trips).sum();
    CriticalPath {
        kind: if early_accepted {
            format!("{kind}+0rtt")
        } else {
            kind.to_string()
        },
        steps,
        round_trips,
        expected_ms: f64::from(round_trips) * rtt_ms,
    }
}

/// The plain warning for a first flight that does not fit, naming what is in it.
pub fn flight_warning(
    flight: &Flight,
    chain_certs: usize,
    chain_bytes: usize,
    ocsp: usize,
) -> Option<String> {
    if flight.fits {
        return None;
    }
    let staple = if ocsp > 0 {
        format!(" and a {ocsp}-byte OCSP staple")
    } else {
        String::new()
    };
    Some(format!(
        "the server's first flight is {} bytes ({} segments of {MSS}), more than the initial congestion window of {INITCWND_SEGMENTS} segments ({} bytes): one extra round trip at any RTT. It carries {chain_certs} certificates of {chain_bytes} bytes{staple}; a shorter chain or smaller keys (ECDSA) would fit.",
        flight.bytes,
        flight.segments,
        INITCWND_SEGMENTS * MSS
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trips(v: &str, kind: &str, early: bool, bytes: usize) -> u32 {
        critical_path(v, kind, early, &Flight::new(bytes), 60.0).round_trips
    }

    #[test]
    fn counts_the_issue_s_round_trips() {
        assert_eq!(trips("TLSv1.3", "full", false, 3000), 3);
        assert_eq!(trips("TLSv1.2", "full", false, 3000), 4);
        assert_eq!(trips("TLSv1.3", "full-hrr", false, 3000), 4);
        assert_eq!(trips("TLSv1.3", "resumed-ticket", false, 300), 3);
        assert_eq!(trips("TLSv1.2", "resumed-session-id", false, 300), 3);
        // 0-RTT: nothing after TCP but the resumed handshake that carries the answer.
        assert_eq!(trips("TLSv1.3", "resumed-ticket", true, 300), 2);
        // 11 segments: one more.
        assert_eq!(trips("TLSv1.3", "full", false, 10 * MSS + 1), 4);
        assert_eq!(trips("TLSv1.3", "full", false, 10 * MSS), 3);
        let p = critical_path("TLSv1.3", "resumed-ticket", true, &Flight::new(300), 60.0);
        assert_eq!(p.kind, "resumed-ticket+0rtt");
        assert_eq!(p.expected_ms, 120.0);
    }

    #[test]
    fn warns_only_past_the_window() {
        assert_eq!(flight_warning(&Flight::new(14_480), 2, 3000, 0), None);
        let w = flight_warning(&Flight::new(16_213), 3, 14_000, 1500).unwrap();
        assert!(w.contains("16213 bytes (12 segments of 1448)"), "{w}");
        assert!(w.contains("one extra round trip at any RTT"), "{w}");
        assert!(w.contains("1500-byte OCSP staple"), "{w}");
    }
}
