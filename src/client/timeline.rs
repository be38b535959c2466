//! The phases of one connection and its request, as consecutive segments that add up to
//! the total exactly, plus certificate verification (CPU inside the handshake).

use std::time::Duration;

use super::conn::Stamps;

/// A phase of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Name resolution.
    Dns,
    /// TCP connect.
    Connect,
    /// Building and writing the ClientHello (key-share generation included).
    ClientHello,
    /// ClientHello written → ServerHello processed: the first round trip.
    ServerHello,
    /// ServerHello → the server's certificate at the verifier (0 when resumed).
    Certificate,
    /// Certificate (or ServerHello) → handshake complete: verification, the server's
    /// Finished, our last flight.
    HandshakeFinish,
    /// Certificate verification and handshake-signature check (CPU; inside the
    /// handshake phases, not a segment of its own).
    Verify,
    /// The whole TLS handshake: ClientHello + ServerHello + Certificate + HandshakeFinish.
    Tls,
    /// Handshake complete → request written.
    Request,
    /// Request written → first byte of the response.
    FirstByte,
    /// First byte → response complete.
    Body,
    /// Start → response complete.
    Total,
}

impl Phase {
    /// Every phase, in timeline order (the overlays `Verify`, `Tls` and `Total` last).
    pub const ALL: [Phase; 12] = [
        Phase::Dns,
        Phase::Connect,
        Phase::ClientHello,
        Phase::ServerHello,
        Phase::Certificate,
        Phase::HandshakeFinish,
        Phase::Request,
        Phase::FirstByte,
        Phase::Body,
        Phase::Verify,
        Phase::Tls,
        Phase::Total,
    ];

    /// The segments that add up to `Total`.
    pub const SEGMENTS: [Phase; 9] = [
        Phase::Dns,
        Phase::Connect,
        Phase::ClientHello,
        Phase::ServerHello,
        Phase::Certificate,
        Phase::HandshakeFinish,
        Phase::Request,
        Phase::FirstByte,
        Phase::Body,
    ];

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Dns => "dns",
            Phase::Connect => "connect",
            Phase::ClientHello => "client_hello",
            Phase::ServerHello => "server_hello",
            Phase::Certificate => "certificate",
            Phase::HandshakeFinish => "handshake_finish",
            Phase::Verify => "verify",
            Phase::Tls => "tls",
            Phase::Request => "request",
            Phase::FirstByte => "first_byte",
            Phase::Body => "body",
            Phase::Total => "total",
        }
    }
}

/// The moments of one connection and one request on it, as offsets from the start.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timeline {
    /// Connection and handshake moments.
    pub conn: Stamps,
    /// Certificate verification time.
    pub verify: Duration,
    /// Request written.
    pub request_sent: Duration,
    /// First byte of the response.
    pub first_byte: Duration,
    /// Response complete.
    pub done: Duration,
}

impl Timeline {
    /// The boundaries in timeline order, each at least the one before it: a moment that
    /// did not happen takes the previous one's time, and a response that was already
    /// received when the request counted as sent (0-RTT data answered in the read that
    /// completed the handshake) starts where the request ended.
    fn boundaries(&self) -> [Duration; 9] {
        let c = &self.conn;
        let mut b = [
            c.resolved,
            c.connected,
            c.hello_sent,
            c.server_hello,
            c.certificate.unwrap_or(c.server_hello),
            c.handshake_done,
            self.request_sent,
            self.first_byte,
            self.done,
        ];
        for i in 1..b.len() {
            b[i] = b[i].max(b[i - 1]);
        }
        b
    }

    /// The duration of `phase`. Segments never go negative and add up to `Total`.
    pub fn get(&self, phase: Phase) -> Duration {
        let [
            resolved,
            connected,
            hello,
            server_hello,
            cert,
            done_hs,
            request,
            first,
            done,
        ] = self.boundaries();
        match phase {
            Phase::Dns => resolved,
            Phase::Connect => connected - resolved,
            Phase::ClientHello => hello - connected,
            Phase::ServerHello => server_hello - hello,
            Phase::Certificate => cert - server_hello,
            Phase::HandshakeFinish => done_hs - cert,
            Phase::Verify => self.verify,
            Phase::Tls => done_hs - connected,
            Phase::Request => request - done_hs,
            Phase::FirstByte => first - request,
            Phase::Body => done - first,
            Phase::Total => done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_add_up_to_the_total() {
        let ms = Duration::from_millis;
        let t = Timeline {
            conn: Stamps {
                resolved: ms(1),
                connected: ms(3),
                hello_sent: ms(4),
                server_hello: ms(7),
                certificate: Some(ms(8)),
                handshake_done: ms(10),
                wakeup: None,
            },
            verify: ms(1),
            request_sent: ms(11),
            first_byte: ms(15),
            done: ms(16),
        };
        let sum: Duration = Phase::SEGMENTS.iter().map(|&p| t.get(p)).sum();
        assert_eq!(sum, t.get(Phase::Total));
        assert_eq!(t.get(Phase::Tls), ms(7));
        assert_eq!(t.get(Phase::Certificate), ms(1));
        // Resumed: no certificate step.
        let resumed = Timeline {
            conn: Stamps {
                certificate: None,
                ..t.conn
            },
            ..t
        };
        assert_eq!(resumed.get(Phase::Certificate), Duration::ZERO);
        assert_eq!(resumed.get(Phase::HandshakeFinish), ms(3));
        // 0-RTT answered in the handshake's last read: the response's first byte came
        // before the request counted as sent; the segments still add up.
        let early = Timeline {
            request_sent: ms(10),
            first_byte: ms(9),
            ..t
        };
        assert_eq!(early.get(Phase::FirstByte), Duration::ZERO);
        assert_eq!(early.get(Phase::Body), ms(6));
        let sum: Duration = Phase::SEGMENTS.iter().map(|&p| early.get(p)).sum();
        assert_eq!(sum, early.get(Phase::Total));
    }
}
