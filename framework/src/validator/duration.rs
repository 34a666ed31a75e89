//! Go-style durations (`30m`, `1h30m`, `90s`), the syntax Terraform users know from every provider's `timeouts`.

use std::time::Duration;

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use super::Validator;

/// The longest duration any attribute of this framework accepts: 24 hours. Every duration here is a time limit
/// on one operation (a resource's `timeouts`, a dial timeout). Google's own provider defaults are minutes and its
/// users rarely set more than a few hours; a day already outlives every Compute operation and every token a
/// credential hands out, so anything longer is a typo (`4000000000000000h`), and bounding it keeps every
/// `Instant + Duration` and every conversion well inside range.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

pub struct DurationValidator {
    max: Duration,
}

/// A time limit on one operation: at most [`MAX_DURATION`].
pub fn duration() -> DurationValidator {
    DurationValidator { max: MAX_DURATION }
}

/// A duration that is not a time limit on one operation (a certificate's lifetime, say), bounded by `max` instead.
pub fn duration_within(max: Duration) -> DurationValidator {
    DurationValidator { max }
}

/// Parses a sequence of `<number><unit>` with units h, m, s, ms, up to [`MAX_DURATION`]. Returns a sentence saying
/// what is wrong. Never panics: every step is checked, so any string (huge, negative, garbage) is an `Err`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, MAX_DURATION)
}

/// [`parse_duration`] with another bound.
pub fn parse_duration_within(s: &str, max: Duration) -> Result<Duration, String> {
    if s.is_empty() {
        return Err("a duration cannot be empty".into());
    }
    if s.starts_with('-') {
        return Err(format!(
            "{s:?} is negative: a time limit must be more than zero"
        ));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "{s:?} is not a duration: expected a number before {rest:?}"
            ));
        }
        let n: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{s:?} is not a duration: bad number"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "" => {
                return Err(format!(
                    "{s:?} is not a duration: every number needs a unit (h, m, s or ms)"
                ));
            }
            u => {
                return Err(format!(
                    "{s:?} is not a duration: unknown unit {u:?} (use h, m, s or ms)"
                ));
            }
        };
        rest = &rest[unit_len..];
        // `n` is finite and non-negative (digits and dots only), but may be huge ("99999999999999999999999").
        let too_long = || {
            format!(
                "{s:?} is longer than the limit of {}h",
                max.as_secs() / 3600
            )
        };
        let part = Duration::try_from_secs_f64(n * secs).map_err(|_| too_long())?;
        total = total.checked_add(part).ok_or_else(too_long)?;
        if total > max {
            return Err(too_long());
        }
    }
    if total.is_zero() {
        return Err(format!(
            "{s:?} is zero: a time limit must be more than zero"
        ));
    }
    Ok(total)
}

impl Validator for DurationValidator {
    fn description(&self) -> String {
        "A duration such as `30m`, `1h30m` or `90s`.".into()
    }

    fn validate(&self, path: &AttributePath, value: &Value, diags: &mut Diagnostics) {
        if let Value::String(s) = value
            && let Err(e) = parse_duration_within(s, self.max)
        {
            diags.attr_error(
                path.clone(),
                "Invalid duration",
                format!(
                    "{e}. Write a duration between 1ms and {}h like `30m`, `1h30m` or `90s` (units h, m, s, ms), \
                     or leave the attribute out to use the default.",
                    self.max.as_secs() / 3600
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    }

    /// A lifetime is not a time limit: it may pass a day, up to its own bound, and no further.
    #[test]
    fn a_wider_bound_takes_longer_durations_and_still_stops() {
        let ten_years = Duration::from_secs(87600 * 3600);
        assert_eq!(
            parse_duration_within("8760h", ten_years).unwrap(),
            Duration::from_secs(8760 * 3600)
        );
        assert!(
            parse_duration("8760h")
                .unwrap_err()
                .contains("limit of 24h")
        );
        assert!(
            parse_duration_within("87601h", ten_years)
                .unwrap_err()
                .contains("limit of 87600h")
        );
    }

    #[test]
    fn rejects_with_a_reason() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("10").unwrap_err().contains("unit"));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("m").is_err());
    }

    /// Whatever a user writes, the answer is a value within the bound or a sentence; never a panic.
    #[test]
    fn extreme_values_are_errors_not_panics() {
        let long = "9".repeat(400) + "h";
        for (input, says) in [
            ("99999999999999999999999h", "longer than the limit of 24h"),
            ("4000000000000000h", "longer than the limit of 24h"),
            (long.as_str(), "longer than the limit of 24h"),
            ("25h", "longer than the limit of 24h"),
            ("23h60m1s", "longer than the limit of 24h"),
            ("9223372036854775807s", "longer than the limit of 24h"),
            ("-1h", "negative"),
            ("0s", "zero"),
            ("0h0m", "zero"),
            ("", "empty"),
            ("1e308h", "unknown unit"),
            ("1.5.5h", "bad number"),
            (".h", "bad number"),
            ("10x", "unknown unit"),
            ("1h 30m", "unknown unit"),
            ("NaNh", "expected a number"),
            ("infh", "expected a number"),
        ] {
            let err = parse_duration(input).expect_err(input);
            assert!(err.contains(says), "{input:?}: {err}");
        }
        assert_eq!(parse_duration("24h").unwrap(), MAX_DURATION);
        assert_eq!(parse_duration("1ms").unwrap(), Duration::from_millis(1));
    }

    #[test]
    fn the_validator_names_the_attribute_and_the_fix() {
        let mut diags = Diagnostics::default();
        let path = AttributePath::attr("timeouts").then_attr("create");
        duration().validate(
            &path,
            &Value::String("99999999999999999999999h".into()),
            &mut diags,
        );
        assert!(diags.has_error());
        let text = format!("{diags:?}");
        assert!(text.contains("create"), "{text}");
        assert!(text.contains("between 1ms and 24h"), "{text}");
    }
}
