//! Ranges of the durations and rank counts that users give on the command line or in the
//! environment: every one is checked here into a clear error, so that no deadline can overflow
//! a clock and no table is sized beyond what a job can be.

use std::time::Duration;

/// Longest duration accepted anywhere (timeouts, deadlines, grace periods): 7 days.
pub const MAX_SECONDS: u64 = 7 * 24 * 3600;

/// Largest number of ranks: the largest job the transport carries (rank numbers travel in
/// 24-bit fields).
pub const MAX_RANKS: usize = crate::transport::wire::MAX_FIELD as usize;

/// Parses a number of ranks in 1 ..= [`MAX_RANKS`].
pub fn parse_ranks(text: &str) -> Result<usize, String> {
    let p: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of ranks"))?;
    match usize::try_from(p) {
        Ok(p) if (1..=MAX_RANKS).contains(&p) => Ok(p),
        _ => Err(format!(
            "{text} ranks: the number of ranks must be between 1 and {MAX_RANKS} (2^24 - 1, the \
             largest job the transport carries)"
        )),
    }
}

/// Why a text is not an acceptable number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecondsError {
    #[error("not a number of seconds")]
    /// The text is not a number.
    NotANumber,
    #[error("not a finite number of seconds")]
    /// Infinite or NaN.
    NotFinite,
    #[error("a negative number of seconds")]
    /// Less than zero.
    Negative,
    #[error("more than 604800 seconds (7 days), the longest duration accepted")]
    /// Longer than 7 days.
    TooLong,
    #[error("zero seconds; a positive number is needed")]
    /// Zero where a positive duration is needed.
    Zero,
}

impl SecondsError {
    /// The message as a static string, for error types that hold one.
    pub fn reason(self) -> &'static str {
        match self {
            SecondsError::NotANumber => "not a number of seconds",
            SecondsError::NotFinite => "not a finite number of seconds",
            SecondsError::Negative => "a negative number of seconds",
            SecondsError::TooLong => {
                "more than 604800 seconds (7 days), the longest duration accepted"
            }
            SecondsError::Zero => "zero seconds; a positive number is needed",
        }
    }
}

/// Parses a number of seconds (fractions allowed, surrounding blanks ignored) in
/// 0 ..= [`MAX_SECONDS`].
pub fn parse_seconds(text: &str) -> Result<Duration, SecondsError> {
    let seconds: f64 = text.trim().parse().map_err(|_| SecondsError::NotANumber)?;
    if !seconds.is_finite() {
        return Err(SecondsError::NotFinite);
    }
    if seconds < 0.0 {
        return Err(SecondsError::Negative);
    }
    if seconds > MAX_SECONDS as f64 {
        return Err(SecondsError::TooLong);
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// As [`parse_seconds`], without zero.
pub fn parse_positive_seconds(text: &str) -> Result<Duration, SecondsError> {
    let duration = parse_seconds(text)?;
    if duration.is_zero() {
        return Err(SecondsError::Zero);
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_range() {
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds(" 1.5 "), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_seconds("604800"),
            Ok(Duration::from_secs(MAX_SECONDS))
        );
        assert_eq!(parse_positive_seconds("1e-3"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn rejects_everything_else() {
        for (text, error) in [
            ("", SecondsError::NotANumber),
            ("ten", SecondsError::NotANumber),
            ("nan", SecondsError::NotFinite),
            ("inf", SecondsError::NotFinite),
            ("-inf", SecondsError::NotFinite),
            ("-1", SecondsError::Negative),
            ("604800.5", SecondsError::TooLong),
            ("1e19", SecondsError::TooLong),
            ("1e30", SecondsError::TooLong),
        ] {
            assert_eq!(parse_seconds(text), Err(error), "{text:?}");
            assert_eq!(error.reason(), error.to_string());
        }
        assert_eq!(parse_positive_seconds("0"), Err(SecondsError::Zero));
        assert_eq!(parse_ranks("1"), Ok(1));
        assert_eq!(parse_ranks("16777215"), Ok(MAX_RANKS));
        for text in [
            "0",
            "16777216",
            "18446744073709551615",
            "1e12",
            "-1",
            "x",
            "",
        ] {
            assert!(parse_ranks(text).is_err(), "{text:?}");
        }
        assert_eq!(parse_positive_seconds("-0"), Err(SecondsError::Zero));
    }
}
