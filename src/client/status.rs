//! Which HTTP statuses a request counts as a success (`--ok-status`): by default 100–399,
//! so a server answering 4xx or 5xx — a wrong path, a refused client, a server shedding
//! load with fast 503s — fails the request instead of passing for a fast answer. Every
//! client command judges statuses with one [`OkStatus`].

use std::fmt;
use std::str::FromStr;

/// Status ranges that count as a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkStatus(Vec<(u16, u16)>);

impl Default for OkStatus {
    fn default() -> Self {
        OkStatus(vec![(100, 399)])
    }
}

impl OkStatus {
    /// True when `status` counts as a success.
    pub fn ok(&self, status: u16) -> bool {
        self.0.iter().any(|&(lo, hi)| (lo..=hi).contains(&status))
    }
}

impl FromStr for OkStatus {
    type Err = String;

    /// Comma-separated statuses (`404`), ranges (`200-299`) or classes (`2xx`), each
    /// within 100–599.
    fn from_str(s: &str) -> Result<Self, String> {
        let code = |t: &str| -> Result<u16, String> {
            t.trim()
                .parse::<u16>()
                .ok()
                .filter(|n| (100..=599).contains(n))
                .ok_or_else(|| format!("'{}' is not an HTTP status (100-599)", t.trim()))
        };
        let mut ranges = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let range = if let Some(class) = part.strip_suffix("xx").or(part.strip_suffix("XX")) {
                let c = code(&format!("{class}00"))
                    .map_err(|_| format!("'{part}' is not a status class (1xx to 5xx)"))?;
                (c, c + 99)
            } else if let Some((a, b)) = part.split_once('-') {
                let (a, b) = (code(a)?, code(b)?);
                if a > b {
                    return Err(format!("'{part}': the range runs backwards"));
                }
                (a, b)
            } else {
                let c = code(part)?;
                (c, c)
            };
            ranges.push(range);
        }
        Ok(OkStatus(ranges))
    }
}

impl fmt::Display for OkStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_ranges_and_classes() {
        let d = OkStatus::default();
        assert!(d.ok(200) && d.ok(304) && d.ok(101));
        assert!(!d.ok(403) && !d.ok(503));
        let s: OkStatus = "2xx, 404,300-302".parse().unwrap();
        assert!(s.ok(204) && s.ok(404) && s.ok(301));
        assert!(!s.ok(303) && !s.ok(500));
        assert_eq!(s.to_string(), "200-299,404,300-302");
        assert_eq!(s.to_string().parse::<OkStatus>().unwrap(), s);
        for bad in ["", "abc", "99", "600", "500-400", "7xx", "2xx-3xx"] {
            assert!(bad.parse::<OkStatus>().is_err(), "{bad}");
        }
    }
}
