//! The one syntax of every unbounded count flag (`load -n`, `--requests-per-conn`,
//! `pki bundle --key-pool`): a whole number of 1 or more. clap's own
//! `value_parser!(u64).range(1..)` would refuse `0` with "0 is not in
//! 1..18446744073709551615"; this says what is wrong in words.

use std::num::IntErrorKind;

/// Parses a whole number of 1 or more, up to `u64::MAX`.
pub fn at_least_one(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("must be 1 or more".into()),
        Ok(n) => Ok(n),
        Err(_) if s.trim().starts_with('-') => Err("must be 1 or more".into()),
        Err(e) if *e.kind() == IntErrorKind::PosOverflow => {
            Err(format!("is too large (at most {})", u64::MAX))
        }
        Err(_) => Err("is not a whole number (e.g. 1000)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::at_least_one;

    #[test]
    fn counts_of_one_or_more_are_taken_and_the_rest_refused_in_words() {
        assert_eq!(at_least_one("1"), Ok(1));
        assert_eq!(at_least_one(" 5000 "), Ok(5000));
        assert_eq!(at_least_one("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(at_least_one("0"), Err("must be 1 or more".to_string()));
        assert_eq!(at_least_one("-3"), Err("must be 1 or more".to_string()));
        let big = at_least_one("18446744073709551616");
        assert!(
            matches!(&big, Err(m) if m.starts_with("is too large")),
            "{big:?}"
        );
        for bad in ["", "ten", "1.5", "1e3", "0x10"] {
            assert_eq!(
                at_least_one(bad),
                Err("is not a whole number (e.g. 1000)".to_string()),
                "{bad}"
            );
        }
    }
}
