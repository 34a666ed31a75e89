//! The rules of the cross-process cluster lock (`ops::lock`): what the lock looks like as labels on the cluster's
//! static address, when a waiter may take it, when a holder counts as dead, and what the user reads while waiting.
//!
//! The lock is a set of `ha-lock-*` labels written with GCE's label fingerprint as a compare-and-set. A holder
//! rewrites `ha-lock-renewed` every few seconds, and every accepted write rotates the fingerprint; a waiter that
//! sees the *same* fingerprint for a whole TTL on its own clock knows the holder stopped renewing (it died), so it
//! may take the lock over with a compare-and-set from that fingerprint. No clock is compared across machines.

use std::collections::BTreeMap;
use std::time::Duration;

pub const TOKEN: &str = "ha-lock-token";
pub const HOLDER: &str = "ha-lock-holder";
pub const DOING: &str = "ha-lock-doing";
pub const SINCE: &str = "ha-lock-since";
pub const RENEWED: &str = "ha-lock-renewed";

/// How long a holder may go without renewing before a waiter takes its lock over, unless the provider's
/// `lock_ttl` says otherwise: about what a killed `terraform apply` makes the next one wait.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The shortest `lock_ttl`: a holder renews three times per TTL, each renewal one API call, and a renewal that
/// is late by a whole TTL hands the lock to a waiter while the holder still works.
pub const MIN_TTL: Duration = Duration::from_secs(3);

/// `lock_ttl` as written, checked against [`MIN_TTL`]: `Err((summary, detail))` says how to fix it.
pub fn check_ttl(ttl: Duration) -> Result<(), (String, String)> {
    if ttl < MIN_TTL {
        return Err((
            format!("lock_ttl {ttl:?} is too short"),
            format!(
                "A lock holder renews its lock three times per lock_ttl with one Compute API call each; under {MIN_TTL:?} one slow call would hand a live holder's lock to another apply. Set lock_ttl to {MIN_TTL:?} or more (the default is {DEFAULT_TTL:?})."
            ),
        ));
    }
    Ok(())
}

/// GCE's limit on a label value.
const MAX_VALUE: usize = 63;

/// Who holds the lock, as its labels say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Unique per acquisition: two applies on one host, or two locks of one process, never share it.
    pub token: String,
    /// Host and process id, for the message a waiter reads.
    pub holder: String,
    /// What the holder is doing (`create-replica-walk-2`).
    pub doing: String,
    /// Unix seconds when it took the lock.
    pub since: u64,
    /// Unix seconds of its last renewal (changes every renewal, so the fingerprint rotates).
    pub renewed: u64,
}

/// What a process that wants the lock does after reading the labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it, or its holder stopped renewing: write ourselves with a compare-and-set from what was read.
    Take,
    /// Our own labels are there (a write that succeeded although its answer was lost): we hold it.
    Held,
    /// A live holder has it.
    Wait,
}

/// `current`: the holder the labels name; `unchanged_for`: how long this waiter has seen the same fingerprint.
pub fn decide(
    current: Option<&Holder>,
    my_token: &str,
    unchanged_for: Duration,
    ttl: Duration,
) -> Decision {
    match current {
        None => Decision::Take,
        Some(h) if h.token == my_token => Decision::Held,
        Some(_) if unchanged_for >= ttl => Decision::Take,
        Some(_) => Decision::Wait,
    }
}

/// A label value from free text: lowercase letters, digits, `_` and `-` (anything else becomes `-`), at most 63.
pub fn label_value(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_VALUE)
        .collect()
}

/// The holder the labels name, if any (a lock is held exactly when `ha-lock-token` is set and not empty).
pub fn holder_of(labels: &BTreeMap<String, String>) -> Option<Holder> {
    let token = labels.get(TOKEN).filter(|t| !t.is_empty())?;
    let text = |k: &str| labels.get(k).cloned().unwrap_or_default();
    let secs = |k: &str| labels.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
    Some(Holder {
        token: token.clone(),
        holder: text(HOLDER),
        doing: text(DOING),
        since: secs(SINCE),
        renewed: secs(RENEWED),
    })
}

/// `labels` with `h` as the holder; labels that are not the lock's are kept as they are.
pub fn with_holder(labels: &BTreeMap<String, String>, h: &Holder) -> BTreeMap<String, String> {
    let mut out = without_holder(labels);
    out.insert(TOKEN.into(), label_value(&h.token));
    out.insert(HOLDER.into(), label_value(&h.holder));
    out.insert(DOING.into(), label_value(&h.doing));
    out.insert(SINCE.into(), h.since.to_string());
    out.insert(RENEWED.into(), h.renewed.to_string());
    out
}

/// `labels` without the lock's.
pub fn without_holder(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| ![TOKEN, HOLDER, DOING, SINCE, RENEWED].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Unix seconds as UTC text for messages (`2026-11-22 14:03:07 UTC`).
fn utc(secs: u64) -> String {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(secs as i64) else {
        return format!("{secs} (unix time)");
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The log line a waiter repeats.
pub fn waiting_message(cluster: &str, h: &Holder, waited: Duration) -> String {
    format!(
        "waiting {}s for the lock of cluster {cluster}: held by {} ({}) since {}",
        waited.as_secs(),
        h.holder,
        h.doing,
        utc(h.since)
    )
}

/// The error when the resource's deadline passes while another apply still holds the lock: summary and detail.
pub fn timeout_problem(cluster: &str, h: &Holder, ttl: Duration) -> super::Problem {
    (
        format!("Cluster {cluster} is locked by another apply"),
        format!(
            "Membership and load-balancer changes of a cluster run one at a time, across every Terraform process. \
             {} has held the lock since {} ({}), and the deadline of this change passed while waiting. \
             Wait for that apply to finish, then run this one again. If that apply died, its lock expires {} \
             seconds after its last renewal and the next apply takes it over; nothing needs to be deleted by hand.",
            h.holder,
            utc(h.since),
            h.doing,
            ttl.as_secs()
        ),
    )
}

/// The plan's warning when its checks of a replica's create, destroy or replacement stood aside for another
/// process's change (`holder`): a half-done change would be judged as it stands, so the plan says it did not judge
/// rather than let a destroy or a join pass in silence.
pub fn plan_stood_aside(cluster: &str, replica: &str, h: &Holder) -> super::Problem {
    (
        format!(
            "Did not check replica {replica}'s change against etcd: cluster {cluster} is locked"
        ),
        format!(
            "{} has held the lock of cluster {cluster} since {} ({}), last renewed {}, so this plan did not judge              quorum, deletion protection or fault tolerance for replica {replica}: another apply is changing the              cluster, and a look now would see its change half done. The apply judges all of it again under the              lock, and refuses what would break quorum or protection. Plan again once that apply has finished. If no              apply is running, its holder died: the next apply takes the lock over once it has not been renewed for              lock_ttl, and nothing needs deleting by hand.",
            h.holder,
            utc(h.since),
            h.doing,
            utc(h.renewed),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_that_stood_aside_names_the_holder_and_what_it_did_not_judge() {
        let (summary, detail) = plan_stood_aside("walk", "walk-a", &holder("a"));
        assert_eq!(
            summary,
            "Did not check replica walk-a's change against etcd: cluster walk is locked"
        );
        for said in [
            "build-7-pid-42",
            "create-replica-walk-2",
            "deletion protection",
            "Plan again",
        ] {
            assert!(detail.contains(said), "{said}: {detail}");
        }
    }

    const TTL: Duration = Duration::from_secs(30);

    /// A TTL leaves room for three renewals of one API call each: the minimum and above pass, below is refused
    /// with the minimum and the default in the sentence.
    #[test]
    fn a_ttl_shorter_than_three_seconds_is_refused() {
        for (secs_ms, ok) in [
            (2_999, false),
            (500, false),
            (3_000, true),
            (8_000, true),
            (30_000, true),
        ] {
            let got = check_ttl(Duration::from_millis(secs_ms));
            assert_eq!(got.is_ok(), ok, "{secs_ms} ms: {got:?}");
            if let Err((summary, detail)) = got {
                assert!(
                    summary.contains("lock_ttl") && summary.contains("too short"),
                    "{summary}"
                );
                assert!(
                    detail.contains("3s or more") && detail.contains("30s"),
                    "{detail}"
                );
            }
        }
    }

    fn holder(token: &str) -> Holder {
        Holder {
            token: token.into(),
            holder: "build-7-pid-42".into(),
            doing: "create-replica-walk-2".into(),
            since: 1_795_000_000,
            renewed: 1_795_000_010,
        }
    }

    #[test]
    fn who_takes_holds_or_waits() {
        let other = holder("b");
        let cases = [
            (None, Duration::ZERO, Decision::Take),
            (None, TTL * 2, Decision::Take),
            (Some(holder("a")), Duration::ZERO, Decision::Held),
            (Some(holder("a")), TTL * 2, Decision::Held),
            (Some(other.clone()), Duration::ZERO, Decision::Wait),
            (
                Some(other.clone()),
                TTL - Duration::from_millis(1),
                Decision::Wait,
            ),
            // The holder's fingerprint did not move for a whole TTL: it stopped renewing.
            (Some(other.clone()), TTL, Decision::Take),
        ];
        for (current, unchanged, want) in cases {
            assert_eq!(
                decide(current.as_ref(), "a", unchanged, TTL),
                want,
                "{current:?} unchanged for {unchanged:?}"
            );
        }
    }

    #[test]
    fn labels_round_trip_and_keep_what_is_not_the_lock() {
        let others: BTreeMap<String, String> = [("team".to_string(), "infra".to_string())].into();
        let h = holder("0123abcd");
        let labels = with_holder(&others, &h);
        assert_eq!(holder_of(&labels), Some(h));
        assert_eq!(labels["team"], "infra");
        assert_eq!(without_holder(&labels), others);
        assert_eq!(holder_of(&others), None);
        // An empty token is no holder (a half-cleared lock).
        let empty: BTreeMap<String, String> = [(TOKEN.to_string(), String::new())].into();
        assert_eq!(holder_of(&empty), None);
    }

    #[test]
    fn label_values_are_what_gce_accepts() {
        let cases = [
            ("build-7", "build-7"),
            ("Build.Example.COM pid 42", "build-example-com-pid-42"),
            ("create replica walk_2", "create-replica-walk_2"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(label_value(text), want, "{text:?}");
        }
        assert_eq!(label_value(&"x".repeat(100)).len(), 63);
    }

    #[test]
    fn messages_name_the_cluster_the_holder_and_the_way_out() {
        let h = holder("b");
        let line = waiting_message("walk", &h, Duration::from_secs(12));
        assert!(
            line.contains("walk") && line.contains("build-7-pid-42"),
            "{line}"
        );
        assert!(
            line.contains("create-replica-walk-2") && line.contains("12s"),
            "{line}"
        );
        let (summary, detail) = timeout_problem("walk", &h, TTL);
        assert_eq!(summary, "Cluster walk is locked by another apply");
        assert!(detail.contains("build-7-pid-42"), "{detail}");
        assert!(detail.contains("2026-11-18 11:06:40 UTC"), "{detail}");
        assert!(detail.contains("expires 30 seconds"), "{detail}");
    }
}
