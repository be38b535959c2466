//! `tickets`: a ticket key ring (ids and states only).

use super::{BOLD, render, styled, table};

/// A ticket key ring (ids and states only).
pub fn ticket_ring(verb: &str, r: &crate::tls::tickets::RingInfo) -> String {
    let mut t = table(&["key id", "state"]);
    for k in &r.keys {
        let state = match k.state {
            crate::tls::tickets::KeyState::Active => "active (encrypts and decrypts)",
            crate::tls::tickets::KeyState::Standby => {
                "standby (decrypts; active after the next rotation)"
            }
            crate::tls::tickets::KeyState::DecryptOnly => {
                "decrypt-only (destroyed at the next rotation)"
            }
        };
        t.add_row(vec![k.id.clone(), state.to_string()]);
    }
    format!(
        "{} {} (rotated {})\n{}\n",
        styled(BOLD, verb),
        r.path.display(),
        r.rotated_at,
        render(&t)
    )
}
