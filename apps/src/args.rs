//! Value parsers for the commands' numeric arguments, so every duration, rate and size is
//! checked where clap reads it: a NaN, an infinity, a negative or a value past what the command
//! can use is refused with the option's name before anything is opened (no wait that never
//! ends, no panic converting it to a `Duration`, no billion-entry list).
//!
//! Owns: the ranges. Never: opens or changes anything.

/// The longest wait any command takes: a day.
pub const MAX_SECS: f64 = 86_400.0;
/// The fastest message rate a command paces at (one message per 10 ns).
pub const MAX_RATE: f64 = 100_000_000.0;
/// The slowest: one message a second (slower would sit out its wait deaf to everything else).
pub const MIN_RATE: f64 = 1.0;

fn number(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{s} is not a finite number"))
    }
}

/// Seconds from 0 to a day.
pub fn secs(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if (0.0..=MAX_SECS).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s}: give seconds from 0 to {MAX_SECS} (a day)"))
    }
}

/// Seconds above 0, at most a day (a refresh interval).
pub fn positive_secs(s: &str) -> Result<f64, String> {
    let v = secs(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{s}: give seconds above 0, at most {MAX_SECS} (a day)"))
    }
}

/// Messages per second to pace at: 1 to 100 million.
pub fn rate(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if (MIN_RATE..=MAX_RATE).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s}: give messages per second from {MIN_RATE} to {MAX_RATE}"))
    }
}

/// Messages per second, or 0 for as fast as possible.
pub fn rate_or_0(s: &str) -> Result<f64, String> {
    match number(s)? {
        0.0 => Ok(0.0),
        _ => rate(s).map_err(|e| format!("{e}, or 0 for as fast as possible")),
    }
}

/// A replay speed: a multiple of the recording's pace from 1/1000 to a million.
pub fn speed(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if (0.001..=1_000_000.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s}: give a multiple of the recorded pace from 0.001 to 1000000 (or --max)"))
    }
}

/// Milliseconds from 0 to a day.
pub fn millis(s: &str) -> Result<u64, String> {
    let v: u64 = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number of milliseconds"))?;
    if v <= 86_400_000 {
        Ok(v)
    } else {
        Err(format!("{s}: give milliseconds from 0 to 86400000 (a day)"))
    }
}

/// A ring's slot count: a power of two from 2 to 2^30 (what a ring layout takes).
pub fn slots(s: &str) -> Result<usize, String> {
    let v: usize = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number"))?;
    if v.is_power_of_two() && (2..=1 << 30).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s}: give a power of two from 2 to 1073741824 (2^30) slots"))
    }
}

/// A whole number from `lo` to `hi` (for clap's `value_parser`).
pub fn within(lo: u64, hi: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let v: u64 = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number"))?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{s}: give {lo} to {hi}"))
        }
    }
}

/// As [`within`], for a `usize`.
pub fn within_usize(lo: usize, hi: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s: &str| within(lo as u64, hi as u64)(s).map(|v| v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_number_infinite_negative_and_huge_are_refused_and_the_bounds_taken() {
        for bad in ["NaN", "inf", "-inf", "-1", "1e300", "x", ""] {
            assert!(secs(bad).is_err() && rate(bad).is_err() && speed(bad).is_err(), "{bad}");
        }
        assert_eq!((secs("0"), secs("86400")), (Ok(0.0), Ok(86_400.0)));
        assert!(positive_secs("0").is_err());
        assert!(rate("1e-9").unwrap_err().contains("from 1 to"));
        assert_eq!((rate_or_0("0"), rate_or_0("1e8")), (Ok(0.0), Ok(1e8)));
        assert!(rate_or_0("1e-20").unwrap_err().contains("or 0 for as fast as possible"));
        assert!(millis("86400001").is_err() && millis("-5").is_err());
        assert_eq!((slots("4096"), slots("3").is_err(), slots("0").is_err()), (Ok(4096), true, true));
        assert_eq!((within(1, 10)("10"), within(1, 10)("0").is_err()), (Ok(10), true));
    }
}
