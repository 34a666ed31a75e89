//! A new service-account signing key without a window in which any API server refuses a token another one minted
//! (`service_account_key_rotation` on the cluster). The key signs every service-account token; a key that leaked
//! mints a token for any service account until the API servers stop trusting it, so a cluster must be able to
//! change it while it runs.
//!
//! Each stage is one roll of every replica, since the masters of two stages serve side by side while it runs:
//! - `started`: a next key is made; every API server verifies tokens with both, and still signs with the current
//!   one, so tokens from masters not yet rolled verify everywhere;
//! - `switched`: every API server signs with the next key and still verifies both: a master can switch only once
//!   every other one verifies the next key, which is what `started` made sure of;
//! - the setting removed: the next key becomes the key and the old one is forgotten. Tokens it signed stop
//!   verifying, so this is the user's step once pods have fresh tokens (kubelets refresh projected tokens well
//!   within an hour; secret-based legacy tokens must be deleted to be minted again).
//!
//! Going back is safe from either stage: from `switched` to `started` (signing with the current key again, both
//! still verified) and from `started` to nothing (the next key dropped before any token used it). Skipping
//! `started` is refused: a switched master's tokens would be refused by every master not yet rolled. Each change
//! is checked against the masters as they run before the cluster moves ([`masters_ready`]): a roll of the
//! previous stage that failed shows there, not in state.

use std::collections::BTreeSet;

use super::Problem;

/// The cluster's attribute.
pub const ATTRIBUTE: &str = "service_account_key_rotation";
/// The masters' build setting that names the stage while a rotation is under way (`master_spec`): another stage
/// is another build, so every replica rolls onto it.
pub const SETTING: &str = "service_account_key_rotation";

const STARTED: &str = "started";
const SWITCHED: &str = "switched";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// One key, signing and verifying.
    Steady,
    /// A next key, verified; the current one signs.
    Started,
    /// The next key signs; both are verified.
    Switched,
}

impl Stage {
    /// The stage a configured value names (`None`: no rotation under way).
    pub fn parse(value: Option<&str>) -> Result<Stage, Problem> {
        match value {
            None => Ok(Stage::Steady),
            Some(STARTED) => Ok(Stage::Started),
            Some(SWITCHED) => Ok(Stage::Switched),
            Some(other) => Err((
                format!("{ATTRIBUTE} {other:?} is not a stage of a rotation"),
                format!(
                    "Set it to \"{STARTED}\" to make a next service-account key that every API server verifies, \
                     then to \"{SWITCHED}\" to sign with it, then remove it to forget the old key. Each stage is \
                     a roll of every replica (docs/guides/secrets.md)."
                ),
            )),
        }
    }

    /// The value the masters' build carries (`SETTING`); none when no rotation is under way, so clusters that
    /// never rotate keep their build.
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Stage::Steady => None,
            Stage::Started => Some(STARTED),
            Stage::Switched => Some(SWITCHED),
        }
    }

    /// Which key signs and which are verified at this stage.
    pub fn key_use(self) -> KeyUse {
        use Key::*;
        match self {
            Stage::Steady => KeyUse {
                signs: Current,
                verifies: vec![Current],
            },
            Stage::Started => KeyUse {
                signs: Current,
                verifies: vec![Current, Next],
            },
            Stage::Switched => KeyUse {
                signs: Next,
                verifies: vec![Next, Current],
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The key the cluster had before the rotation.
    Current,
    /// The key the rotation made.
    Next,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUse {
    pub signs: Key,
    /// Signing key first: kube-apiserver tries them in order.
    pub verifies: Vec<Key>,
}

/// What the cluster's apply does to its keys for a change of stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyChange {
    Keep,
    /// Make the next key (`started`).
    MakeNext,
    /// Forget the next key, which no token was signed with (back from `started`).
    DropNext,
    /// The next key becomes the key; the old one is forgotten (the rotation done).
    PromoteNext,
}

/// Whether the cluster may go from `before` (its state) to `after` (the configuration), and what that does to its
/// keys. A cluster that does not exist yet has one key: a rotation starts once it runs.
pub fn change(exists: bool, before: Stage, after: Stage) -> Result<KeyChange, Problem> {
    use Stage::*;
    if !exists {
        return match after {
            Steady => Ok(KeyChange::Keep),
            _ => Err((
                format!("A new cluster has no service-account key to rotate yet ({ATTRIBUTE})"),
                format!(
                    "A cluster is made with one service-account key. Remove {ATTRIBUTE} to create it, and \
                     start a rotation once it runs."
                ),
            )),
        };
    }
    match (before, after) {
        (Steady, Steady) | (Started, Started) | (Switched, Switched) => Ok(KeyChange::Keep),
        (Steady, Started) => Ok(KeyChange::MakeNext),
        (Started, Steady) => Ok(KeyChange::DropNext),
        (Switched, Steady) => Ok(KeyChange::PromoteNext),
        (Started, Switched) | (Switched, Started) => Ok(KeyChange::Keep),
        (Steady, Switched) => Err((
            format!("{ATTRIBUTE} cannot go to \"{SWITCHED}\" before \"{STARTED}\""),
            format!(
                "Masters sign with the next key only once every API server verifies it, or tokens minted by a \
                 rolled master are refused by those not rolled yet. Set {ATTRIBUTE} = \"{STARTED}\" and apply \
                 (every replica rolls to verify the next key), then set \"{SWITCHED}\"."
            ),
        )),
    }
}

/// What the plan says an apply will do, for a change of stage; `None` when the stage does not change.
pub fn plan_note(cluster: &str, before: Stage, after: Stage) -> Option<Problem> {
    let what = match change(true, before, after).ok()? {
        KeyChange::Keep if before == after => return None,
        KeyChange::Keep if after == Stage::Switched => {
            "every replica rolls to sign service-account tokens with the next key; both keys are still verified"
        }
        KeyChange::Keep => {
            "every replica rolls to sign service-account tokens with the current key again; both keys are still \
             verified"
        }
        KeyChange::MakeNext => {
            "a next service-account key is made and every replica rolls to verify tokens signed with it; the \
             current key still signs"
        }
        KeyChange::DropNext => {
            "the next service-account key, which signed no token, is forgotten and every replica rolls back to \
             the current key alone"
        }
        KeyChange::PromoteNext => {
            "the next service-account key becomes the key and every replica rolls to forget the old one: tokens \
             the old key signed stop verifying (projected tokens are refreshed by the kubelets; delete \
             secret-based tokens to have them minted again)"
        }
    };
    Some((
        format!(
            "Cluster {cluster} changes its service-account key: {ATTRIBUTE} {}",
            shown(after)
        ),
        format!(
            "In this apply {what}. The cluster first checks that every master runs the keys of the stage before; \
             the replicas then roll one at a time."
        ),
    ))
}

fn shown(stage: Stage) -> String {
    stage
        .setting()
        .map(|s| format!("= \"{s}\""))
        .unwrap_or_else(|| "removed".into())
}

/// The keys a running master uses, by fingerprint (`ha_pki::public_key_fingerprint`), as its files show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterKeys {
    pub master: String,
    pub signs: String,
    pub verifies: BTreeSet<String>,
}

/// Before the cluster moves off stage `stage`, every master must run its keys exactly: `current` and `next` are
/// the fingerprints of the cluster's keys at that stage (`next` none when `Steady`). A master that runs others
/// missed the roll of that stage (it failed, or its replica was not applied): moving on would let a rolled master
/// sign tokens it does not verify, or drop a key it signs with.
pub fn masters_ready(
    masters: &[MasterKeys],
    stage: Stage,
    current: &str,
    next: Option<&str>,
) -> Result<(), Problem> {
    let fp = |k: Key| match k {
        Key::Current => Some(current),
        Key::Next => next,
    };
    let want = stage.key_use();
    let signs = fp(want.signs);
    let verifies: Option<BTreeSet<String>> = want
        .verifies
        .iter()
        .map(|k| fp(*k).map(String::from))
        .collect();
    let behind: Vec<&str> = masters
        .iter()
        .filter(|m| Some(m.signs.as_str()) != signs || Some(&m.verifies) != verifies.as_ref())
        .map(|m| m.master.as_str())
        .collect();
    if behind.is_empty() {
        return Ok(());
    }
    Err((
        format!(
            "Master {} does not run the service-account keys of the cluster's stage yet ({})",
            behind.join(", "),
            match stage {
                Stage::Steady => "no rotation under way".to_string(),
                s => format!("{ATTRIBUTE} {}", shown(s)),
            }
        ),
        format!(
            "Every master must run the keys of the current stage before the cluster moves to the next one, or a \
             master would meet tokens signed with a key it does not verify. Apply the configuration with \
             {ATTRIBUTE} {} until every replica has rolled (the plan shows the replicas still to roll), then \
             change the stage. Nothing was changed.",
            shown(stage)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::Stage::*;
    use super::*;

    #[test]
    fn values_parse_and_others_are_refused_naming_the_attribute() {
        assert_eq!(Stage::parse(None), Ok(Steady));
        assert_eq!(Stage::parse(Some("started")), Ok(Started));
        assert_eq!(Stage::parse(Some("switched")), Ok(Switched));
        let (summary, detail) = Stage::parse(Some("done")).unwrap_err();
        assert!(summary.contains(ATTRIBUTE) && detail.contains("\"started\""));
        for s in [Steady, Started, Switched] {
            assert_eq!(Stage::parse(s.setting()), Ok(s));
        }
    }

    #[test]
    fn every_change_of_stage() {
        use KeyChange::*;
        // (before, after, what it does; None: refused)
        let cases = [
            (Steady, Steady, Some(Keep)),
            (Steady, Started, Some(MakeNext)),
            (Steady, Switched, None),
            (Started, Started, Some(Keep)),
            (Started, Switched, Some(Keep)),
            (Started, Steady, Some(DropNext)),
            (Switched, Switched, Some(Keep)),
            (Switched, Started, Some(Keep)),
            (Switched, Steady, Some(PromoteNext)),
        ];
        for (before, after, want) in cases {
            assert_eq!(
                change(true, before, after).ok(),
                want,
                "{before:?} -> {after:?}"
            );
        }
        let (summary, _) = change(true, Steady, Switched).unwrap_err();
        assert!(summary.contains("before \"started\""), "{summary}");
    }

    #[test]
    fn a_new_cluster_starts_with_one_key() {
        assert_eq!(change(false, Steady, Steady), Ok(KeyChange::Keep));
        for after in [Started, Switched] {
            assert!(change(false, Steady, after).is_err(), "{after:?}");
        }
    }

    /// The invariant the stages exist for: masters of two neighbouring stages, serving side by side during a roll,
    /// each verify what the other signs.
    #[test]
    fn neighbouring_stages_verify_what_each_other_signs() {
        for (a, b) in [(Steady, Started), (Started, Switched), (Switched, Started)] {
            let (ua, ub) = (a.key_use(), b.key_use());
            assert!(ub.verifies.contains(&ua.signs), "{b:?} verifies {a:?}");
            assert!(ua.verifies.contains(&ub.signs), "{a:?} verifies {b:?}");
        }
        // Completing: the old key signs nothing at either stage, and the next key is verified by both.
        let (switched, done) = (Switched.key_use(), Steady.key_use());
        assert_eq!(switched.signs, Key::Next);
        assert!(switched.verifies.contains(&Key::Next));
        assert_eq!(done.verifies, vec![done.signs]);
        // Skipping `started` would break it: a steady master does not verify the next key.
        assert!(
            !Steady
                .key_use()
                .verifies
                .contains(&Switched.key_use().signs)
        );
    }

    #[test]
    fn the_plan_names_what_each_change_does() {
        assert_eq!(plan_note("prod", Started, Started), None);
        let (summary, detail) = plan_note("prod", Steady, Started).unwrap();
        assert!(
            summary.contains("= \"started\"")
                && detail.contains("next service-account key is made")
        );
        let (summary, detail) = plan_note("prod", Switched, Steady).unwrap();
        assert!(summary.contains("removed") && detail.contains("stop verifying"));
        assert!(plan_note("prod", Steady, Switched).is_none());
    }

    fn master(name: &str, signs: &str, verifies: &[&str]) -> MasterKeys {
        MasterKeys {
            master: name.into(),
            signs: signs.into(),
            verifies: verifies.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_cluster_moves_on_only_when_every_master_runs_the_stage() {
        let started = [master("a", "K", &["K", "N"]), master("b", "K", &["K", "N"])];
        assert_eq!(masters_ready(&started, Started, "K", Some("N")), Ok(()));
        // b's roll to `started` failed: it verifies K alone.
        let behind = [master("a", "K", &["K", "N"]), master("b", "K", &["K"])];
        let (summary, detail) = masters_ready(&behind, Started, "K", Some("N")).unwrap_err();
        assert!(summary.starts_with("Master b does not run"), "{summary}");
        assert!(detail.contains("= \"started\""), "{detail}");
        // Switched: N signs, both verified.
        let switched = [master("a", "N", &["K", "N"])];
        assert_eq!(masters_ready(&switched, Switched, "K", Some("N")), Ok(()));
        assert!(masters_ready(&started, Switched, "K", Some("N")).is_err());
        // Steady: no next key, one verified.
        assert_eq!(
            masters_ready(&[master("a", "K", &["K"])], Steady, "K", None),
            Ok(())
        );
        assert!(masters_ready(&started, Steady, "K", None).is_err());
        // No master runs: nothing to disagree.
        assert_eq!(masters_ready(&[], Switched, "K", Some("N")), Ok(()));
    }
}
