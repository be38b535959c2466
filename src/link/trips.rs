//! Round trips: how many a connection's critical path to its first response byte takes
//! (TCP 1; TLS 1.3 full 1, TLS 1.2 full 2, resumed 1, a HelloRetryRequest +1; the request
//! 1, or 0 when it went as accepted 0-RTT data), and whether the server's first flight
//! fits in the initial congestion window (Linux: 10 segments), past which it waits one
//! more round trip for an ACK, whatever the RTT.
//!
//! Over QUIC ([`quic_critical_path`]): no TCP handshake, the TLS 1.3 handshake in QUIC's
//! own first round trip (a HelloRetryRequest +1), the request 1 or 0 with accepted 0-RTT;
//! and the server's first flight against QUIC's anti-amplification limit (RFC 9000 §8:
//! three times the bytes the client sent, until its address is validated), past which it
//! waits one more round trip for the client's next packets ([`Flight::quic`]).

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

/// The smallest UDP payload of a datagram carrying a client's Initial packet (RFC 9000
/// §14.1): clients pad their first flight to it, and quinn starts every path at this
/// size.
pub const QUIC_DATAGRAM: usize = 1200;
/// TLS bytes one [`QUIC_DATAGRAM`] carries in CRYPTO frames: 1,200 less the long header
/// (connection IDs of 8 to 20 bytes, token, length, packet number: about 40), the AEAD tag
/// (16) and the frame's header (about 4). A model, as [`MSS`] is for TCP.
pub const QUIC_CRYPTO_PER_DATAGRAM: usize = 1140;
/// QUIC's anti-amplification factor (RFC 9000 §8): before the client's address is
/// validated, a server sends at most this many times the bytes it received from it.
pub const AMPLIFICATION: usize = 3;
/// quinn's initial congestion window (its `TransportConfig` default: 14,720 bytes), in
/// datagrams of [`QUIC_DATAGRAM`] bytes.
pub const QUIC_INITIAL_WINDOW_DATAGRAMS: usize = 14_720 / QUIC_DATAGRAM;

/// The server's flight answering the ClientHello, against the initial window (TCP) or
/// the anti-amplification limit (QUIC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flight {
    /// TLS bytes.
    pub bytes: usize,
    /// TCP segments of [`MSS`] bytes; over QUIC, datagrams of [`QUIC_DATAGRAM`] bytes.
    pub segments: usize,
    /// [`INITCWND_SEGMENTS`]; over QUIC, [`QUIC_INITIAL_WINDOW_DATAGRAMS`].
    pub initcwnd_segments: usize,
    /// Whether it fits in the initial window (and, over QUIC, within the
    /// anti-amplification limit).
    pub fits: bool,
    /// QUIC: the flight's bytes on the wire, its packets' headers and tags included (about
    /// 60 per datagram, at least one full datagram: the one carrying the server's Initial
    /// is padded to 1,200).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire_bytes: Option<usize>,
    /// QUIC: what the server may send before the client's address is validated,
    /// [`AMPLIFICATION`] × the client's first flight (its ClientHello in datagrams of
    /// 1,200 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amplification_limit_bytes: Option<usize>,
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
            wire_bytes: None,
            amplification_limit_bytes: None,
        }
    }

    /// A QUIC server's flight of `bytes` TLS bytes answering a ClientHello of
    /// `client_hello_bytes`, against the anti-amplification limit and quinn's initial
    /// window.
    pub fn quic(bytes: usize, client_hello_bytes: usize) -> Flight {
        let segments = bytes.div_ceil(QUIC_CRYPTO_PER_DATAGRAM).max(1);
        let wire =
            (bytes + segments * (QUIC_DATAGRAM - QUIC_CRYPTO_PER_DATAGRAM)).max(QUIC_DATAGRAM);
        let client = client_hello_bytes.div_ceil(QUIC_CRYPTO_PER_DATAGRAM).max(1) * QUIC_DATAGRAM;
        let limit = AMPLIFICATION * client;
        Flight {
            bytes,
            segments,
            initcwnd_segments: QUIC_INITIAL_WINDOW_DATAGRAMS,
            fits: wire <= limit && segments <= QUIC_INITIAL_WINDOW_DATAGRAMS,
            wire_bytes: Some(wire),
            amplification_limit_bytes: Some(limit),
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
    with_request(
        kind,
        steps,
        early_accepted.then_some("request (0-RTT early data, answered with the handshake)"),
        rtt_ms,
    )
}

/// The critical path of a QUIC connection of `kind` (full, full-hrr, resumed-ticket)
/// whose request went as accepted 0-RTT data or not, whose server's first flight was
/// `flight` ([`Flight::quic`]), on a link of `rtt_ms`: no TCP handshake before it; TLS
/// 1.3 in QUIC's first round trip.
pub fn quic_critical_path(
    kind: &str,
    early_accepted: bool,
    flight: &Flight,
    rtt_ms: f64,
) -> CriticalPath {
    let resumed = kind.starts_with("resumed");
    let (trips, label) = match kind {
        "full-hrr" => (
            2,
            "QUIC handshake (TLS 1.3 full, after a HelloRetryRequest)",
        ),
        k if k.starts_with("resumed") => (1, "QUIC handshake (TLS 1.3 resumed)"),
        _ => (1, "QUIC handshake (TLS 1.3 full)"),
    };
    let mut steps = vec![Step {
        what: label.into(),
        round_trips: trips,
    }];
    if !flight.fits && !resumed {
        steps.push(Step {
            what: format!(
                "server's first flight past the anti-amplification limit ({} bytes > {})",
                flight.wire_bytes.unwrap_or(flight.bytes),
                flight.amplification_limit_bytes.unwrap_or(0)
            ),
            round_trips: 1,
        });
    }
    with_request(
        kind,
        steps,
        early_accepted.then_some("request (0-RTT, answered with the handshake)"),
        rtt_ms,
    )
}

/// A connection's critical path: its handshake `steps`, then the request: a round trip,
/// or none when it went as accepted 0-RTT data (`early`: that step's words).
fn with_request(
    kind: &str,
    mut steps: Vec<Step>,
    early: Option<&str>,
    rtt_ms: f64,
) -> CriticalPath {
    steps.push(match early {
        Some(what) => Step {
            what: what.into(),
            round_trips: 0,
        },
        None => Step {
            what: "request".into(),
            round_trips: 1,
        },
    });
    let round_trips = steps.iter().map(|s| s.round_trips).sum();
    CriticalPath {
        kind: if early.is_some() {
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
    if let (Some(wire), Some(limit)) = (flight.wire_bytes, flight.amplification_limit_bytes) {
        return Some(format!(
            "the server's first flight is about {wire} bytes on the wire ({} TLS bytes in {} datagrams), more than QUIC's anti-amplification limit of {limit} bytes (3 × what the client sent) or quinn's initial window of {} datagrams: one extra round trip at any RTT. It carries {chain_certs} certificates of {chain_bytes} bytes; a shorter chain or smaller keys (ECDSA) would fit.",
            flight.bytes, flight.segments, flight.initcwnd_segments
        ));
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
    fn quic_saves_the_tcp_handshake_and_0rtt_the_request() {
        let f = Flight::quic(1300, 260);
        assert!(f.fits, "{f:?}");
        assert_eq!(f.amplification_limit_bytes, Some(3600));
        let full = quic_critical_path("full", false, &f, 86.0);
        assert_eq!(full.round_trips, 2);
        assert_eq!(full.expected_ms, 172.0);
        assert_eq!(
            quic_critical_path("resumed-ticket", false, &f, 86.0).round_trips,
            2
        );
        let early = quic_critical_path("resumed-ticket", true, &f, 86.0);
        assert_eq!(
            (early.round_trips, early.kind.as_str()),
            (1, "resumed-ticket+0rtt")
        );
        assert_eq!(
            quic_critical_path("full-hrr", false, &f, 86.0).round_trips,
            3
        );
        // A 4 KB RSA chain: past 3 × 1,200 bytes, one more round trip.
        let big = Flight::quic(4000, 260);
        assert!(!big.fits);
        assert_eq!(quic_critical_path("full", false, &big, 86.0).round_trips, 3);
        assert!(
            flight_warning(&big, 2, 3800, 0)
                .unwrap()
                .contains("anti-amplification")
        );
        // A ClientHello in two datagrams (a post-quantum key share) doubles the limit.
        assert_eq!(
            Flight::quic(4000, 1500).amplification_limit_bytes,
            Some(7200)
        );
        assert!(Flight::quic(4000, 1500).fits);
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
