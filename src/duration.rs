//! The one syntax of every duration, in a flag (`-d 10s`) or a spec's field (`--link
//! rtt=60ms`, `--slo p99=30ms`): a number with a unit (`250us`, `1.5ms`, `10s`, `1h`,
//! `1h30m`; humantime's units), within the bounds the flag or field states in its help.
//! A bare number is refused (seconds or milliseconds? the user says), as is anything that
//! would overflow the clock arithmetic of a run.

use std::time::Duration;

/// The longest duration any flag accepts: one year.
pub const MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration in `[0, MAX]`.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("'{s}' has no unit: write e.g. {t}s or {t}ms"));
    }
    let d = humantime::parse_duration(t)
        .map_err(|e| format!("'{s}' is not a duration ({e}); write e.g. 500ms, 10s or 1h"))?;
    if d > MAX {
        return Err(format!("'{s}' is longer than the limit of 365 days"));
    }
    Ok(d)
}

/// Parses a duration in `(0, MAX]`.
pub fn parse_positive(s: &str) -> Result<Duration, String> {
    // A bare zero gets the zero message, not a hint to write `0s` (refused as well).
    if s.trim().chars().all(|c| c == '0' || c == '.') && s.trim().contains('0') {
        return Err(format!("'{s}' must be longer than zero"));
    }
    let d = parse(s)?;
    if d.is_zero() {
        return Err(format!("'{s}' must be longer than zero"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_syntax_with_bounds() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(
            parse_positive("0"),
            Err("'0' must be longer than zero".into())
        );
        assert_eq!(
            parse_positive("0.0"),
            Err("'0.0' must be longer than zero".into())
        );
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse("10").unwrap_err().contains("no unit"));
        assert!(parse("300000000000y").unwrap_err().contains("365 days"));
        assert!(parse("ten").unwrap_err().contains("not a duration"));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert!(
            parse_positive("0s")
                .unwrap_err()
                .contains("longer than zero")
        );
    }
}
