//! Points in time given by users (`--at`): RFC 3339 text to the types rustls and x509-parser
//! use.

use rustls_pki_types::UnixTime;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A time that could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid time '{text}': expected RFC 3339, e.g. 2025-06-01T12:00:00Z ({reason})")]
pub struct TimeError {
    /// What the user gave.
    pub text: String,
    /// The parser's words.
    pub reason: String,
}

impl crate::error::Classify for TimeError {
    fn class(&self) -> crate::ErrorClass {
        crate::ErrorClass::Input
    }
}

/// Parses an RFC 3339 time; a bare date (`2025-06-01`) means midnight UTC.
pub fn parse_rfc3339(text: &str) -> Result<OffsetDateTime, TimeError> {
    let t = text.trim();
    let full = if t.len() == 10 && t.as_bytes().get(4) == Some(&b'-') {
        format!("{t}T00:00:00Z")
    } else {
        t.to_string()
    };
    let parsed = OffsetDateTime::parse(&full, &Rfc3339).map_err(|e| TimeError {
        text: text.to_string(),
        reason: e.to_string(),
    })?;
    if parsed.unix_timestamp() < 0 {
        return Err(TimeError {
            text: text.to_string(),
            reason: "before 1970".into(),
        });
    }
    Ok(parsed)
}

/// The same instant for rustls.
pub fn to_unix_time(t: OffsetDateTime) -> UnixTime {
    UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        t.unix_timestamp().max(0) as u64
    ))
}

/// RFC 3339 text of a time (seconds precision).
pub fn format_rfc3339(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0)
        .unwrap_or(t)
        .format(&Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let t = parse_rfc3339("2025-06-01T12:00:00Z").unwrap();
        assert_eq!(t.unix_timestamp(), 1_748_779_200);
        assert_eq!(
            parse_rfc3339("2025-06-01").unwrap().unix_timestamp(),
            1_748_736_000
        );
        assert_eq!(format_rfc3339(t), "2025-06-01T12:00:00Z");
        let err = parse_rfc3339("yesterday").unwrap_err();
        assert!(err.to_string().contains("'yesterday'"));
        assert!(parse_rfc3339("1960-01-01").is_err());
    }
}
