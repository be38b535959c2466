//! What servers gave the client to resume with, and what it offered back: a session store
//! that keeps rustls's own in-memory cache and counts, so that a run that asked for
//! resumption or 0-RTT and got none can say why (`handshake`'s resumption note).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::NamedGroup;
use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue,
};
use rustls::pki_types::ServerName;

/// Counts of what went through the session store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionCounts {
    /// TLS 1.2 sessions the server made resumable (a session id, a ticket or both: rustls
    /// stores a TLS 1.2 session only when the server gave one of them).
    pub tls12_given: u64,
    /// TLS 1.3 tickets received (NewSessionTicket messages).
    pub tls13_tickets: u64,
    /// Of those, the tickets that allow early data (`max_early_data_size` > 0).
    pub tls13_early_data_tickets: u64,
    /// Connections that offered a stored session (TLS 1.2 session or TLS 1.3 ticket).
    pub offered: u64,
}

/// rustls's in-memory session cache, counting what servers give and what is offered.
#[derive(Debug)]
pub struct WatchedSessions {
    inner: ClientSessionMemoryCache,
    tls12_given: AtomicU64,
    tls13_tickets: AtomicU64,
    tls13_early: AtomicU64,
    offered: AtomicU64,
}

impl WatchedSessions {
    /// A cache of `entries` (rustls's [`ClientSessionMemoryCache`] semantics).
    pub fn new(entries: usize) -> Arc<WatchedSessions> {
        Arc::new(WatchedSessions {
            inner: ClientSessionMemoryCache::new(entries.max(1)),
            tls12_given: AtomicU64::new(0),
            tls13_tickets: AtomicU64::new(0),
            tls13_early: AtomicU64::new(0),
            offered: AtomicU64::new(0),
        })
    }

    /// The counts so far.
    pub fn counts(&self) -> SessionCounts {
        SessionCounts {
            tls12_given: self.tls12_given.load(Ordering::Relaxed),
            tls13_tickets: self.tls13_tickets.load(Ordering::Relaxed),
            tls13_early_data_tickets: self.tls13_early.load(Ordering::Relaxed),
            offered: self.offered.load(Ordering::Relaxed),
        }
    }
}

impl ClientSessionStore for WatchedSessions {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.tls12_given.fetch_add(1, Ordering::Relaxed);
        self.inner.set_tls12_session(server_name, value);
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        let s = self.inner.tls12_session(server_name);
        if s.is_some() {
            self.offered.fetch_add(1, Ordering::Relaxed);
        }
        s
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        self.tls13_tickets.fetch_add(1, Ordering::Relaxed);
        if value.max_early_data_size() > 0 {
            self.tls13_early.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.insert_tls13_ticket(server_name, value);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        let t = self.inner.take_tls13_ticket(server_name);
        if t.is_some() {
            self.offered.fetch_add(1, Ordering::Relaxed);
        }
        t
    }
}

/// Why a run that asked for resumption (`ids`: TLS 1.2 session ids only) resumed none of
/// its `connections` after the first, in plain words, from what the store saw; `tls12`:
/// the version negotiated.
pub fn why_not_resumed(c: SessionCounts, tls12: bool, ids: bool, connections: usize) -> String {
    let n = connections;
    if tls12 {
        if c.tls12_given == 0 {
            if ids {
                return "the server gave no TLS 1.2 session id (it keeps no session cache); \
                        --resume ids offers no ticket: try --resume tickets"
                    .into();
            }
            return "the server gave neither a TLS 1.2 session id nor a session ticket: \
                    it has resumption off"
                .into();
        }
        let what = if ids { "session ids" } else { "sessions" };
        return format!(
            "the server gave {what} and {} of {n} connections offered one, but it resumed none: \
             its session cache or ticket key is off, too small, or not shared between the \
             servers behind this address",
            c.offered
        );
    }
    if c.tls13_tickets == 0 {
        return "the server sent no TLS 1.3 session ticket, so there was nothing to resume \
                with: it has resumption off (nginx: ssl_session_tickets off and no \
                ssl_session_cache)"
            .into();
    }
    format!(
        "the server sent {} session tickets and {} of {n} connections offered one, but it \
         resumed none: it does not accept its own tickets (several servers without a shared \
         ticket key, keys rotated, or tickets that expire at once)",
        c.tls13_tickets, c.offered
    )
}

/// Why a run that asked for 0-RTT (`--early-data`) and resumed sent no early data, from
/// what the store saw.
pub fn why_no_early_data(c: SessionCounts) -> String {
    if c.tls13_tickets == 0 {
        return "no early data was sent: the server sent no TLS 1.3 ticket".into();
    }
    if c.tls13_early_data_tickets > 0 {
        return format!(
            "no early data was sent although {} of the server's {} tickets allow it: the \
             connections resumed with tickets that do not",
            c.tls13_early_data_tickets, c.tls13_tickets
        );
    }
    format!(
        "no early data was sent: none of the server's {} tickets allows it \
         (max_early_data_size 0: the server does not accept 0-RTT)",
        c.tls13_tickets
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notes_name_what_the_server_did_not_give() {
        let none = SessionCounts::default();
        assert!(why_not_resumed(none, true, true, 5).contains("no TLS 1.2 session id"));
        assert!(why_not_resumed(none, true, false, 5).contains("neither"));
        assert!(why_not_resumed(none, false, false, 5).contains("no TLS 1.3 session ticket"));
        let given = SessionCounts {
            tls12_given: 6,
            tls13_tickets: 12,
            tls13_early_data_tickets: 0,
            offered: 5,
        };
        assert!(why_not_resumed(given, true, true, 5).contains("5 of 5 connections offered"));
        assert!(why_not_resumed(given, false, false, 5).contains("sent 12 session tickets"));
        assert!(why_no_early_data(given).contains("none of the server's 12 tickets"));
        assert!(why_no_early_data(none).contains("no TLS 1.3 ticket"));
        let some = SessionCounts {
            tls13_early_data_tickets: 2,
            ..given
        };
        assert!(why_no_early_data(some).contains("2 of the server's 12 tickets allow it"));
    }
}
