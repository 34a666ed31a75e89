//! Go-style durations (`30m`, `1h30m`, `90s`), the syntax Terraform users know from every provider's `timeouts`.

use std::time::Duration;

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use super::Validator;

pub struct DurationValidator;

pub fn duration() -> DurationValidator {
    DurationValidator
}

/// Parses a sequence of `<number><unit>` with units h, m, s, ms. Returns a sentence saying what is wrong.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Err("a duration cannot be empty".into());
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
        total += Duration::from_secs_f64(n * secs);
    }
    Ok(total)
}

impl Validator for DurationValidator {
    fn description(&self) -> String {
        "A duration such as `30m`, `1h30m` or `90s`.".into()
    }

    fn validate(&self, path: &AttributePath, value: &Value, diags: &mut Diagnostics) {
        if let Value::String(s) = value
            && let Err(e) = parse_duration(s)
        {
            diags.attr_error(
                path.clone(),
                "Invalid duration",
                format!("{e}. Write it like `30m`, `1h30m` or `90s`."),
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

    #[test]
    fn rejects_with_a_reason() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("10").unwrap_err().contains("unit"));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("m").is_err());
    }
}
