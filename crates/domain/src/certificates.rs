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
}

pub fn outlook(expires_at: i64, now: i64, renew_before: Duration) -> Outlook {
    let left = expires_at.saturating_sub(now);
    if left <= secs(renew_before) {
        Outlook::Renew
    } else if left <= secs(WARN_WITHIN) {
        Outlook::ExpiresSoon
    } else {
        Outlook::Fine
    }
}

/// The latest expiry that is due for renewal at `now`: what a roll compares a VM's certificates with.
pub fn renew_if_expiring_by(now: i64, renew_before: Duration) -> i64 {
    now.saturating_add(secs(renew_before))
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

#[cfg(test)]
mod tests {
    use super::*;

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
                outlook(now + left, now, *renew),
                *want,
                "{left}s left, {renew:?}"
            );
        }
        assert_eq!(renew_if_expiring_by(now, MIN * 3), now + 180);
    }
}
