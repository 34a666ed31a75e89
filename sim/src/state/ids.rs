//! Identifiers the server invents: numeric ids, fingerprints, timestamps, operation names.

use base64::Engine as _;

/// A random uint64 id, as GCE gives every resource (sent as a decimal string on the wire).
pub fn new_id() -> String {
    let b = uuid::Uuid::new_v4().into_bytes();
    // Keep it below 2^63 so clients that parse ids as signed integers are also fine.
    (u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) >> 1).to_string()
}

/// 8 random bytes, URL-safe base64 *with* padding: the official SDK decodes fingerprints with exactly that
/// alphabet and fails the whole response on `+` or `/`.
pub fn new_fingerprint() -> String {
    let b = uuid::Uuid::new_v4().into_bytes();
    base64::engine::general_purpose::URL_SAFE.encode(&b[..8])
}

/// An operation name in the real shape: `operation-<millis>-<hex>-<hex>-<hex>`.
pub fn new_operation_name() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "operation-{}-{}-{}-{}",
        now_millis(),
        &u[..13],
        &u[13..21],
        &u[21..29]
    )
}

pub fn now_millis() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// RFC 3339 with milliseconds, as GCE's `creationTimestamp` / `insertTime` (`2026-11-21T23:50:01.123-00:00`).
pub fn rfc3339(millis: u64) -> String {
    let nanos = i128::from(millis) * 1_000_000;
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]-00:00"
    );
    t.format(&fmt).unwrap_or_default()
}

pub fn now_rfc3339() -> String {
    rfc3339(now_millis())
}

/// GCE's resource name rule: RFC 1035 label, 1–63 chars.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    let ok_inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(ok_inner)
        && b[b.len() - 1] != b'-'
}

pub const NAME_REGEX: &str = "(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_url_safe_padded_base64_of_8_bytes() {
        for _ in 0..200 {
            let f = new_fingerprint();
            assert_eq!(f.len(), 12, "{f}");
            assert!(f.ends_with('='), "{f}");
            assert!(!f.contains('+') && !f.contains('/'), "{f}");
        }
    }

    #[test]
    fn names_follow_rfc1035() {
        for ok in ["a", "vm-1", "master-europe-west1-b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "1vm", "Vm", "vm-", "vm_1", &"a".repeat(64)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_with_millis() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000-00:00");
        assert!(
            time::OffsetDateTime::parse(
                &rfc3339(1_700_000_000_123),
                &time::format_description::well_known::Rfc3339
            )
            .is_ok()
        );
    }
}
