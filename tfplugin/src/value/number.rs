//! cty numbers: arbitrary precision, so a `Number` must carry whatever a client sends without rounding it.
//!
//! cty (Go, `big.Float`) writes a number to msgpack as an int when it is an exact int64, else as a float64 when
//! that is exact, else as a decimal string; JSON carries the decimal text. `Number` keeps the same three shapes,
//! normalised so that each numeric value has exactly one representation (derived equality is numeric equality):
//! integers that fit i64/u64 are `Int`/`UInt`, other values exactly representable as f64 are `Float`, and anything
//! else is a normalised decimal (`Big`). Encoding then picks the wire form cty itself would pick.

use std::fmt;
use std::str::FromStr;

/// An arbitrary-precision cty number. See the module docs for the representation.
#[derive(Debug, Clone)]
pub struct Number(Repr);

#[derive(Debug, Clone)]
enum Repr {
    Int(i64),
    /// Only values above `i64::MAX`; smaller ones are `Int`.
    UInt(u64),
    /// Only non-integers, integers outside u64/i64, infinities (cty allows them) and NaN (which cty does not allow:
    /// encoders refuse it).
    Float(f64),
    /// Only values not exactly representable by the variants above.
    Big(Box<Decimal>),
}

/// `±digits × 10^exp`, with no leading or trailing zeros in `digits` (never zero: zero is `Int(0)`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    neg: bool,
    digits: String,
    exp: i64,
}

/// cty's big.Float exponent is an int32 (binary); refusing decimal exponents beyond ±10⁹ keeps formatting bounded
/// while rejecting nothing a client can produce.
const MAX_EXP: i64 = 1_000_000_000;
/// Beyond this many padding zeros, `Display` switches to scientific notation so output stays proportional to input.
const MAX_PLAIN_ZEROS: i64 = 100;

impl Number {
    /// The value as an i64, if it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        match self.0 {
            Repr::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The value as a u64, if it is a non-negative integer in range.
    pub fn as_u64(&self) -> Option<u64> {
        match self.0 {
            Repr::Int(i) => u64::try_from(i).ok(),
            Repr::UInt(u) => Some(u),
            _ => None,
        }
    }

    /// The nearest f64, or `None` if a finite value is beyond f64's range.
    pub fn as_f64(&self) -> Option<f64> {
        match &self.0 {
            Repr::Int(i) => Some(*i as f64),
            Repr::UInt(u) => Some(*u as f64),
            Repr::Float(f) => Some(*f),
            Repr::Big(d) => d.to_string().parse::<f64>().ok().filter(|f| f.is_finite()),
        }
    }

    /// The wire shape cty would use for this value; the encoders follow it.
    pub(crate) fn wire(&self) -> Wire {
        match &self.0 {
            Repr::Int(i) => Wire::Int(*i),
            Repr::UInt(u) => Wire::UInt(*u),
            Repr::Float(f) if f.is_nan() => Wire::NaN,
            Repr::Float(f) => Wire::Float(*f),
            Repr::Big(_) => Wire::Decimal,
        }
    }

    fn from_float(f: f64) -> Number {
        // 2^63 and 2^64 are exact in f64, so these range checks are exact too.
        const I64_END: f64 = 9_223_372_036_854_775_808.0;
        const U64_END: f64 = 18_446_744_073_709_551_616.0;
        if f.is_finite() && f.fract() == 0.0 {
            if (-I64_END..I64_END).contains(&f) {
                return Number(Repr::Int(f as i64));
            }
            if (0.0..U64_END).contains(&f) {
                return Number(Repr::UInt(f as u64));
            }
        }
        Number(Repr::Float(f))
    }
}

/// The msgpack shape cty would use for a number.
pub(crate) enum Wire {
    Int(i64),
    UInt(u64),
    Float(f64),
    /// Write `Display` text as a string.
    Decimal,
    NaN,
}

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Int(a), Repr::Int(b)) => a == b,
            (Repr::UInt(a), Repr::UInt(b)) => a == b,
            // Bitwise, so that equality is reflexive even for NaN; -0.0 never reaches here (it is Int(0)).
            (Repr::Float(a), Repr::Float(b)) => a.to_bits() == b.to_bits(),
            (Repr::Big(a), Repr::Big(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for Number {}

impl From<i64> for Number {
    fn from(i: i64) -> Self {
        Number(Repr::Int(i))
    }
}
impl From<i32> for Number {
    fn from(i: i32) -> Self {
        Number(Repr::Int(i.into()))
    }
}
impl From<u64> for Number {
    fn from(u: u64) -> Self {
        match i64::try_from(u) {
            Ok(i) => Number(Repr::Int(i)),
            Err(_) => Number(Repr::UInt(u)),
        }
    }
}
impl From<f64> for Number {
    /// Any f64 converts; NaN is kept so the mistake surfaces as an encode error naming its path.
    fn from(f: f64) -> Self {
        Number::from_float(f)
    }
}
impl From<f32> for Number {
    fn from(f: f32) -> Self {
        Number::from_float(f.into())
    }
}

impl FromStr for Number {
    type Err = String;

    /// Parses decimal text as cty's `ParseNumberVal` accepts it: `[+-]digits[.digits][e[+-]digits]`, or `±Inf`.
    fn from_str(s: &str) -> Result<Number, String> {
        let d = match parse_decimal(s)? {
            Parsed::Zero => return Ok(Number(Repr::Int(0))),
            Parsed::Inf(neg) => {
                return Ok(Number(Repr::Float(if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                })));
            }
            Parsed::Decimal(d) => d,
        };
        // Integers that fit 64 bits: at most 20 digits once padded.
        if d.exp >= 0 && d.digits.len() as i64 + d.exp <= 20 {
            let padded = format!(
                "{}{}{}",
                if d.neg { "-" } else { "" },
                d.digits,
                "0".repeat(d.exp as usize)
            );
            if let Ok(i) = padded.parse::<i64>() {
                return Ok(Number(Repr::Int(i)));
            }
            if let Ok(u) = padded.parse::<u64>() {
                return Ok(Number(Repr::UInt(u)));
            }
        }
        // Exactly an f64? Rust's parser rounds correctly; compare the float's exact expansion with the input.
        // (An f64 has at most 767 significant decimal digits, so 800 always suffices.)
        if d.digits.len() <= 800
            && let Ok(f) = d.to_string().parse::<f64>()
            && f.is_finite()
            && let Ok(Parsed::Decimal(exact)) = parse_decimal(&format!("{f:.800e}"))
            && exact == d
        {
            return Ok(Number::from_float(f));
        }
        Ok(Number(Repr::Big(Box::new(d))))
    }
}

enum Parsed {
    Zero,
    Inf(bool),
    Decimal(Decimal),
}

fn parse_decimal(s: &str) -> Result<Parsed, String> {
    let bad = || format!("{s:?} is not a number");
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest.eq_ignore_ascii_case("inf") || rest.eq_ignore_ascii_case("infinity") {
        return Ok(Parsed::Inf(neg));
    }
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int_part.len() + frac_part.len() == 0 || !all_digits(int_part) || !all_digits(frac_part) {
        return Err(bad());
    }
    let mut exp: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !all_digits(digits) {
                return Err(bad());
            }
            // Anything past 12 digits is out of range anyway; this also keeps the parse below from overflowing.
            let magnitude: i64 = if digits.len() > 12 {
                i64::MAX / 4
            } else {
                digits.parse().map_err(|_| bad())?
            };
            if e.starts_with('-') {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    let mut digits: String = int_part
        .chars()
        .chain(frac_part.chars())
        .skip_while(|&c| c == '0')
        .collect();
    exp -= frac_part.len() as i64;
    let trailing = digits.len() - digits.trim_end_matches('0').len();
    digits.truncate(digits.len() - trailing);
    if digits.is_empty() {
        return Ok(Parsed::Zero);
    }
    exp += trailing as i64;
    let magnitude = exp.saturating_add(digits.len() as i64);
    if !(-MAX_EXP..=MAX_EXP).contains(&magnitude) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Parsed::Decimal(Decimal { neg, digits, exp }))
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.neg { "-" } else { "" };
        let n = self.digits.len() as i64;
        let point = n + self.exp; // digits before the decimal point
        if self.exp >= 0 && self.exp <= MAX_PLAIN_ZEROS {
            write!(f, "{sign}{}{}", self.digits, "0".repeat(self.exp as usize))
        } else if point > 0 && self.exp < 0 {
            let (a, b) = self.digits.split_at(point as usize);
            write!(f, "{sign}{a}.{b}")
        } else if point <= 0 && -point <= MAX_PLAIN_ZEROS {
            write!(
                f,
                "{sign}0.{}{}",
                "0".repeat((-point) as usize),
                self.digits
            )
        } else {
            // Scientific, which every cty parser also accepts.
            let (first, rest) = self.digits.split_at(1);
            let dot = if rest.is_empty() { "" } else { "." };
            write!(f, "{sign}{first}{dot}{rest}e{}", point - 1)
        }
    }
}

impl fmt::Display for Number {
    /// Plain decimal text (as cty's `Text('f', -1)`), scientific only for extreme exponents; `+Inf`/`-Inf`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Int(i) => write!(f, "{i}"),
            Repr::UInt(u) => write!(f, "{u}"),
            Repr::Float(x) if x.is_infinite() => {
                f.write_str(if *x > 0.0 { "+Inf" } else { "-Inf" })
            }
            Repr::Float(x) => write!(f, "{x}"),
            Repr::Big(d) => write!(f, "{d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Number {
        s.parse().unwrap()
    }

    #[test]
    fn normalises_to_one_representation() {
        assert_eq!(n("42"), Number::from(42i64));
        assert_eq!(n("4.2e1"), Number::from(42.0));
        assert_eq!(n("-0"), Number::from(0i64));
        assert_eq!(n("18446744073709551615"), Number::from(u64::MAX));
        assert_eq!(n("0.5"), Number::from(0.5));
        assert_eq!(n("1e22"), Number::from(1e22));
        assert_eq!(n("-inf"), Number::from(f64::NEG_INFINITY));
        assert_eq!(Number::from(3.0f64).as_i64(), Some(3));
    }

    #[test]
    fn keeps_what_f64_cannot_hold() {
        for s in [
            "0.1",
            "1e30",
            "-123456789012345678901234567890",
            "0.30000000000000000000001",
            "1.5e-400",
        ] {
            let x = n(s);
            assert!(matches!(x.0, Repr::Big(_)), "{s}");
            assert_eq!(n(&x.to_string()), x, "{s} → {x}");
        }
        assert_eq!(n("0.1").to_string(), "0.1");
        assert_eq!(n("1e30").to_string(), "1000000000000000000000000000000");
        assert_eq!(n("1.5e-400").to_string(), "1.5e-400");
        assert_eq!(n("0.1").as_f64(), Some(0.1));
        assert_eq!(n("1e400").as_f64(), None);
    }

    #[test]
    fn rejects_non_numbers() {
        for s in [
            "",
            "-",
            ".",
            "1e",
            "e5",
            "0x10",
            "1.2.3",
            "NaN",
            " 1",
            "1e99999999999999",
        ] {
            assert!(s.parse::<Number>().is_err(), "{s:?}");
        }
    }
}
