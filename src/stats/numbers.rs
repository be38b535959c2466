//! How the capacity's messages and checks write a number: [`group`] (`12,345`, for rates
//! in sentences and tables) and `figure` (a value as written, in scientific notation
//! when very large or very small). Below every part of [`crate::capacity`]: the
//! objective ([`super::slo`]) and the document's checks both use it.

/// `12,345` (rounded to a whole number; digits grouped however large, a value that is
/// not a finite number as itself).
pub fn group(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let s = format!("{:.0}", x.abs().round());
    let sign = if x.round() < 0.0 { "-" } else { "" };
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

/// A figure for a message: as written (`12.5`) unless very large or very small, then
/// in scientific notation (`1e308`, not 309 digits).
pub(crate) fn figure(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-6..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_grouped_by_thousands() {
        assert_eq!(group(3100.4), "3,100");
        assert_eq!(group(1_234_567.0), "1,234,567");
    }
}
