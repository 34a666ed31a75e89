//! When a replica's certificates are renewed. Every certificate a master runs with (API server, etcd peer and
//! server, the components' client certificates) is issued together, from the cluster's CAs, when its VM is built,
//! and lives `certificate_validity` (one year by default, as kubeadm's). Once a replica's certificates are within
//! `certificate_renew_before` of expiring, plan says so and the apply renews them by rolling the replica: the VM is
//! rebuilt on its etcd data disk with new leaf certificates from the same CAs, naming the same IPs, so etcd comes
//! back as the same member and clients keep trusting it. Time comes in as an argument, so tests use short
//! lifetimes and any clock.

use std::time::Duration;

use super::Problem;

/// Leaf validity unless the cluster says otherwise: one year, as kubeadm issues them.
pub const DEFAULT_VALIDITY: &str = "8760h";
/// How long before expiry a replica is renewed unless the cluster says otherwise: 30 days.
pub const DEFAULT_RENEW_BEFORE: &str = "720h";
/// Plan warns of certificates that expire within this, even outside the renewal window.
pub const WARN_WITHIN: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest lifetime or window the attributes take: ten years, about as long as the cluster's CAs live.
pub const MAX_LIFETIME: Duration = Duration::from_secs(87600 * 3600);
/// Shorter than a roll of a few replicas takes, a certificate would be due again before the last one is done.
pub const MIN_VALIDITY: Duration = Duration::from_secs(60);

/// `certificate_validity` and `certificate_renew_before` together: the window must leave a certificate some time
/// outside it, or every plan would renew every replica again.
pub fn check_lifetimes(validity: Duration, renew_before: Duration) -> Result<(), Problem> {
    if validity < MIN_VALIDITY {
        return Err((
            format!("certificate_validity {} is too short", human(validity)),
            "Certificates must live at least one minute, longer than a roll takes; a year (\"8760h\", the default) is usual.".into(),
        ));
    }
    if renew_before >= validity {
        return Err((
            format!(
                "certificate_renew_before ({}) is not shorter than certificate_validity ({})",
                human(renew_before),
                human(validity)
            ),
            "A new certificate would be due for renewal the moment it is issued, so every apply would roll every replica. Set `certificate_renew_before` well below `certificate_validity` (the defaults are 720h and 8760h).".into(),
        ));
    }
    Ok(())
}

/// What plan says of a replica's certificates, expiring at `expires_at` (Unix seconds) when it is `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outlook {
    /// Nothing to say.
    Fine,
    /// Within [`WARN_WITHIN`] but not yet in the renewal window: a warning only.
    ExpiresSoon,
    /// In the renewal window (or expired): the apply renews them by rolling the replica.
    Renew,
    /// Within [`WARN_WITHIN`] or the renewal window, and already expiring with the cluster's CAs: no leaf outlives
    /// its CA (`ha_pki::Issuer::issue_until`), so a renewal would issue the same expiry and every plan would roll
    /// the replica again. A warning ([`ca_expiry_warning`]) instead.
    ExpiresWithCa,
}

/// `ca_expires_at` is the earliest expiry of the cluster's CAs, when known. Certificates that say they outlive the
/// CAs (an earlier release issued such) expire with them in fact: no verifier accepts a chain past its CA.
pub fn outlook(
    expires_at: i64,
    now: i64,
    renew_before: Duration,
    ca_expires_at: Option<i64>,
) -> Outlook {
    let expires_at = ca_expires_at.map_or(expires_at, |ca| expires_at.min(ca));
    let left = expires_at.saturating_sub(now);
    if left > secs(WARN_WITHIN).max(secs(renew_before)) {
        Outlook::Fine
    } else if capped(expires_at, ca_expires_at) {
        Outlook::ExpiresWithCa
    } else if left <= secs(renew_before) {
        Outlook::Renew
    } else {
        Outlook::ExpiresSoon
    }
}

/// Whether certificates expiring at `expires_at` are due for renewal at `now`: what a roll decides with, as plan
/// does ([`outlook`]), so an apply never renews what its plan did not say it would.
pub fn due(expires_at: i64, now: i64, renew_before: Duration, ca_expires_at: Option<i64>) -> bool {
    outlook(expires_at, now, renew_before, ca_expires_at) == Outlook::Renew
}

/// Certificates capped at their CA's expiry: a renewal cannot move them later.
fn capped(expires_at: i64, ca_expires_at: Option<i64>) -> bool {
    ca_expires_at.is_some_and(|ca| expires_at >= ca)
}

/// How long before the cluster's CAs expire the cluster's plan warns: a year, the default leaf lifetime, so the
/// warning comes before the first leaf is capped at the CA's expiry.
pub const CA_WARN_WITHIN: Duration = Duration::from_secs(365 * 24 * 3600);

/// The cluster's plan, when its CAs expire within [`CA_WARN_WITHIN`] of `now`.
pub fn ca_outlook(
    cluster: &str,
    ca_expires_at: i64,
    expires_at: &str,
    now: i64,
) -> Option<Problem> {
    (ca_expires_at.saturating_sub(now) <= secs(CA_WARN_WITHIN))
        .then(|| ca_expiry_warning(cluster, expires_at))
}

/// What plan says when certificates cannot be renewed past the cluster's CAs.
pub fn ca_expiry_warning(who: &str, expires_at: &str) -> Problem {
    (
        format!("The CAs of {who} expire at {expires_at}"),
        format!(
            "Every certificate the masters run with is signed by these CAs and expires with them at the latest: renewing a replica's certificates cannot move them past {expires_at}, so the replicas are not rolled for it. After that time the masters refuse each other and every client. Rotate them before then: set `ca_rotation = \"started\"` on the cluster, then \"switched\", then remove it, an apply each (docs/guides/secrets.md, \"Rotating the CAs\"); a CA you brought rotates to a next one you bring (`next_ca_certificate`, \"Rotating a CA you brought\"); an imported cluster cannot rotate its CAs: build a new cluster and restore its etcd from this one's snapshot (docs/guides/disaster-recovery.md)."
        ),
    )
}

/// The plan's sentence for certificates expiring soon but outside the renewal window.
pub fn expiry_warning(replica: &str, expires_at: &str, renew_before: Duration) -> Problem {
    (
        format!("The certificates of replica {replica} expire at {expires_at}"),
        format!(
            "They are renewed by a roll once they are within certificate_renew_before ({}) of expiring; set a longer `certificate_renew_before` on the cluster to renew sooner.",
            human(renew_before)
        ),
    )
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// `8760h`, `90m`, `45s`: durations as the attributes take them.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// A Unix time as Terraform users read timestamps (RFC 3339, UTC); empty when out of range.
pub fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// A timestamp `rfc3339` wrote, back as Unix seconds; `None` when it is not RFC 3339.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timestamp_reads_back_as_it_was_written() {
        for t in [0, 1_767_225_600, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
        assert_eq!(
            parse_rfc3339("2026-11-28T01:02:03+01:00"),
            Some(1_795_824_123)
        );
        assert_eq!(parse_rfc3339(""), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    const MIN: Duration = Duration::from_secs(60);
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn lifetimes_must_leave_time_outside_the_renewal_window() {
        // (validity, renew_before, error summary prefix)
        let cases: &[(Duration, Duration, Option<&str>)] = &[
            (HOUR * 8760, HOUR * 720, None),
            (MIN * 4, MIN * 3, None),
            (
                MIN * 4,
                MIN * 4,
                Some("certificate_renew_before (4m) is not shorter than certificate_validity (4m)"),
            ),
            (
                HOUR,
                HOUR * 2,
                Some("certificate_renew_before (2h) is not shorter"),
            ),
            (
                Duration::from_secs(30),
                Duration::from_secs(10),
                Some("certificate_validity 30s is too short"),
            ),
        ];
        for (validity, renew, want) in cases {
            match (check_lifetimes(*validity, *renew), want) {
                (Ok(()), None) => {}
                (Err((s, _)), Some(w)) => assert!(s.starts_with(w), "{s}"),
                (got, _) => panic!("{validity:?} {renew:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn certificates_are_renewed_inside_the_window_and_warned_of_within_thirty_days() {
        let now = 1_000_000_000;
        let day = 24 * 3600;
        // (seconds left, renew_before, outlook)
        let cases: &[(i64, Duration, Outlook)] = &[
            (365 * day, HOUR * 720, Outlook::Fine),
            (31 * day, HOUR * 720, Outlook::Fine),
            (30 * day, HOUR * 720, Outlook::Renew),
            (29 * day, HOUR * 24, Outlook::ExpiresSoon),
            (day, HOUR * 24, Outlook::Renew),
            (-day, HOUR * 24, Outlook::Renew),
            (120, MIN * 3, Outlook::Renew),
            (240, MIN * 3, Outlook::ExpiresSoon),
        ];
        for (left, renew, want) in cases {
            assert_eq!(
                outlook(now + left, now, *renew, None),
                *want,
                "{left}s left, {renew:?}"
            );
            // A CA that outlives them changes nothing.
            assert_eq!(
                outlook(now + left, now, *renew, Some(now + left + 1)),
                *want,
                "{left}s left, {renew:?}, a later CA"
            );
            assert_eq!(
                due(now + left, now, *renew, None),
                *want == Outlook::Renew,
                "{left}s left, {renew:?}"
            );
        }
    }

    /// A leaf capped at its CA's expiry is never renewed (the renewal would issue the same expiry, and the roll
    /// would come back at every plan); plan warns instead. One that a renewal can move later is renewed, even if
    /// the new one will be capped.
    #[test]
    fn certificates_that_expire_with_their_ca_are_warned_of_not_renewed() {
        let now = 1_000_000_000;
        let day = 24 * 3600;
        // (leaf expiry, CA expiry, renew_before, outlook)
        let cases: &[(i64, i64, Duration, Outlook)] = &[
            (
                now + 10 * day,
                now + 10 * day,
                HOUR * 720,
                Outlook::ExpiresWithCa,
            ),
            (
                now + 29 * day,
                now + 29 * day,
                HOUR * 24,
                Outlook::ExpiresWithCa,
            ),
            (now - day, now - day, HOUR * 24, Outlook::ExpiresWithCa),
            (now + 10 * day, now + 20 * day, HOUR * 720, Outlook::Renew),
            (
                now + 29 * day,
                now + 200 * day,
                HOUR * 24,
                Outlook::ExpiresSoon,
            ),
            (now + 200 * day, now + 200 * day, HOUR * 720, Outlook::Fine),
            // Leaves an earlier release issued past the CA: they expire with it.
            (
                now + 365 * day,
                now + day,
                HOUR * 720,
                Outlook::ExpiresWithCa,
            ),
            (now + 365 * day, now + 200 * day, HOUR * 720, Outlook::Fine),
        ];
        for (leaf, ca, renew, want) in cases {
            let left = leaf - now;
            assert_eq!(
                outlook(*leaf, now, *renew, Some(*ca)),
                *want,
                "{left}s left, CA {}s",
                ca - now
            );
            assert_eq!(due(*leaf, now, *renew, Some(*ca)), *want == Outlook::Renew);
        }
    }

    #[test]
    fn the_cluster_warns_a_year_before_its_cas_expire() {
        let now = 1_000_000_000;
        let day = 24 * 3600;
        assert_eq!(ca_outlook("prod", now + 366 * day, "T", now), None);
        let (summary, detail) = ca_outlook("prod", now + 365 * day, "T", now).unwrap();
        assert_eq!(summary, "The CAs of prod expire at T");
        assert!(
            detail.contains("set `ca_rotation = \"started\"`"),
            "{detail}"
        );
        assert!(ca_outlook("prod", now - day, "T", now).is_some());
    }
}
