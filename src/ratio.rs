//! The one syntax of every ratio, in a flag (`capacity --resolution`, `compare --alpha`)
//! or a spec's field (`--slo errors=`, `--link loss=`): a percent (`5%`, `0.1%`) or the
//! same as a fraction (`0.05`, `0.001`). Help texts show percents. A bare number of 1 or
//! more is refused: `5` could mean 5% or 500%, and the user says which.

/// Parses `5%` or `0.05` into the fraction 0.05, refusing anything outside `[0, 1]`
/// (each flag or field then states its own, narrower bounds: [`parse_at_most`]).
pub fn parse(s: &str) -> Result<f64, String> {
    parse_at_most(s, 1.0)
}

/// [`parse`], refusing a ratio above `most` (at most 1) with one sentence however it is
/// written (`150%` and `50.0000001%` above 50% alike).
pub fn parse_at_most(s: &str, most: f64) -> Result<f64, String> {
    let t = s.trim();
    let (number, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("'{s}' is not a percentage (write e.g. 5% or 0.05)"))?;
    if value < 0.0 {
        return Err(format!("'{s}' is negative"));
    }
    let above = || Err(format!("'{s}' is above {}", format(most)));
    if percent {
        if value / 100.0 > most {
            return above();
        }
        return Ok(value / 100.0);
    }
    if value >= 1.0 {
        return Err(format!(
            "'{s}' is ambiguous: write {value}% for a percent, or the fraction {}",
            value / 100.0
        ));
    }
    if value > most {
        return above();
    }
    Ok(value)
}

/// A ratio as the help and messages show it: `5%`, `0.1%`, `20%`.
pub fn format(r: f64) -> String {
    let pct = r * 100.0;
    // Up to 4 decimals, no trailing zeros: 0.1%, 12.5%, 20%.
    let text = format!("{pct:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percents_and_fractions_are_one_ratio() {
        assert_eq!(parse("5%"), Ok(0.05));
        assert_eq!(parse("0.05"), Ok(0.05));
        assert_eq!(parse(" 0.1% "), Ok(0.001));
        assert_eq!(parse("0.001"), Ok(0.001));
        assert_eq!(parse("0"), Ok(0.0));
        assert_eq!(parse("0%"), Ok(0.0));
        assert_eq!(parse("100%"), Ok(1.0));
        assert!(parse("5").unwrap_err().contains("write 5% for a percent"));
        assert!(parse("1").unwrap_err().contains("ambiguous"));
        assert!(parse("101%").unwrap_err().contains("above 100%"));
        assert!(parse("-1%").unwrap_err().contains("negative"));
        assert!(parse("five").unwrap_err().contains("not a percentage"));
        assert!(parse("NaN").unwrap_err().contains("not a percentage"));
        assert!(parse("%").unwrap_err().contains("not a percentage"));
        // A narrower bound says one thing however the value is written (`--link loss=`
        // said "above 100%" for 150% but "outside 0%..50%" for 50.0000001%).
        assert_eq!(
            parse_at_most("150%", 0.5),
            Err("'150%' is above 50%".into())
        );
        assert_eq!(
            parse_at_most("50.0000001%", 0.5),
            Err("'50.0000001%' is above 50%".into())
        );
        assert_eq!(parse_at_most("0.6", 0.5), Err("'0.6' is above 50%".into()));
        assert_eq!(parse_at_most("50%", 0.5), Ok(0.5));
    }

    #[test]
    fn formatted_as_percents() {
        assert_eq!(format(0.05), "5%");
        assert_eq!(format(0.2), "20%");
        assert_eq!(format(0.001), "0.1%");
        assert_eq!(format(0.125), "12.5%");
    }
}
