//! The stages every rotation of a key the masters share goes through, whatever the key: the service-account
//! signing key (`domain::service_account_rotation`) and the cluster's CAs (`domain::ca_rotation`). Both are keys
//! one side signs with and the other side verifies, held by masters that serve side by side while a roll runs, so
//! both need the same order to change them without a window in which a master refuses what another one made.
//!
//! Each stage is one roll of every replica, since the masters of two stages serve side by side while it runs:
//! - `started`: a next key is made; every master verifies (trusts) both, and still signs with the current one, so
//!   what masters not yet rolled make verifies everywhere;
//! - `switched`: every master signs with the next key and still verifies both: a master can switch only once every
//!   other one verifies the next key, which is what `started` made sure of;
//! - the setting removed: the next key becomes the key and the old one is forgotten. What it signed stops
//!   verifying, so this is the user's step once everything signed with the old key was made again.
//!
//! Going back is safe from either stage: from `switched` to `started` (signing with the current key again, both
//! still verified) and from `started` to nothing (the next key dropped before anything used it). Skipping
//! `started` is refused: a switched master's signatures would be refused by every master not yet rolled. Each
//! change is checked against the masters as they run before the cluster moves ([`Rotation::masters_ready`]): a
//! roll of the previous stage that failed shows there, not in state.

use std::collections::BTreeSet;

use super::Problem;

const STARTED: &str = "started";
const SWITCHED: &str = "switched";

/// What one kind of rotation is called, for the sentences the user reads; the stages and their rules are shared.
#[derive(Debug)]
pub struct Rotation {
    /// The cluster's attribute, which is also the masters' build setting while a rotation is under way
    /// (`master_spec`): another stage is another build, so every replica rolls onto it.
    pub attribute: &'static str,
    /// What rotates, as in "changes its …": "service-account key", "CAs".
    pub what: &'static str,
    /// What `started` does, `switched` does and removing the setting does, as the parse error lists them.
    pub stages: [&'static str; 3],
    /// Why `started` cannot be skipped.
    pub why_started_first: &'static str,
    /// What a master that runs another stage's keys would meet.
    pub why_masters_first: &'static str,
    /// What the plan says an apply does, for each change that moves the stage.
    pub describe: fn(KeyChange, Stage) -> &'static str,
}

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
    /// The value the masters' build carries; none when no rotation is under way, so clusters that never rotate
    /// keep their build.
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

    fn shown(self) -> String {
        self.setting()
            .map(|s| format!("= \"{s}\""))
            .unwrap_or_else(|| "removed".into())
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
    /// Forget the next key, which signed nothing (back from `started`).
    DropNext,
    /// The next key becomes the key; the old one is forgotten (the rotation done).
    PromoteNext,
}

/// The keys a running master uses, by fingerprint, as its files show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterKeys {
    /// The master, as the user reads it (a VM name, with what kind of key when a master has several).
    pub master: String,
    pub signs: String,
    pub verifies: BTreeSet<String>,
}

impl Rotation {
    /// The stage a configured value names (`None`: no rotation under way).
    pub fn parse(&self, value: Option<&str>) -> Result<Stage, Problem> {
        match value {
            None => Ok(Stage::Steady),
            Some(STARTED) => Ok(Stage::Started),
            Some(SWITCHED) => Ok(Stage::Switched),
            Some(other) => {
                let [started, switched, removed] = self.stages;
                Err((
                    format!("{} {other:?} is not a stage of a rotation", self.attribute),
                    format!(
                        "Set it to \"{STARTED}\" to {started}, then to \"{SWITCHED}\" to {switched}, then remove \
                         it to {removed}. Each stage is a roll of every replica (docs/guides/secrets.md)."
                    ),
                ))
            }
        }
    }

    /// Whether the cluster may go from `before` (its state) to `after` (the configuration), and what that does to
    /// its keys. A cluster that does not exist yet has one key: a rotation starts once it runs.
    pub fn change(&self, exists: bool, before: Stage, after: Stage) -> Result<KeyChange, Problem> {
        use Stage::*;
        let attribute = self.attribute;
        if !exists {
            return match after {
                Steady => Ok(KeyChange::Keep),
                _ => Err((
                    format!(
                        "A new cluster has no {} to rotate yet ({attribute})",
                        self.what
                    ),
                    format!(
                        "A cluster is made with one. Remove {attribute} to create it, and start a rotation \
                         once it runs."
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
                format!("{attribute} cannot go to \"{SWITCHED}\" before \"{STARTED}\""),
                format!(
                    "{} Set {attribute} = \"{STARTED}\" and apply (every replica rolls), then set \
                     \"{SWITCHED}\".",
                    self.why_started_first
                ),
            )),
        }
    }

    /// What the plan says an apply will do, for a change of stage; `None` when the stage does not change.
    pub fn plan_note(&self, cluster: &str, before: Stage, after: Stage) -> Option<Problem> {
        let change = self.change(true, before, after).ok()?;
        if before == after {
            return None;
        }
        Some((
            format!(
                "Cluster {cluster} changes its {}: {} {}",
                self.what,
                self.attribute,
                after.shown()
            ),
            format!(
                "In this apply {}. The cluster first checks that every master runs the keys of the stage \
                 before; the replicas then roll one at a time.",
                (self.describe)(change, after)
            ),
        ))
    }

    /// Before the cluster moves off stage `stage`, every master must run its keys exactly: `current` and `next`
    /// are the fingerprints of the cluster's keys at that stage (`next` none when `Steady`). A master that runs
    /// others missed the roll of that stage (it failed, or its replica was not applied): moving on would let a
    /// rolled master sign what another does not verify, or drop a key it signs with.
    pub fn masters_ready(
        &self,
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
        let attribute = self.attribute;
        Err((
            format!(
                "Master {} does not run the {} of the cluster's stage yet ({})",
                behind.join(", "),
                self.what,
                match stage {
                    Stage::Steady => "no rotation under way".to_string(),
                    s => format!("{attribute} {}", s.shown()),
                }
            ),
            format!(
                "Every master must run the keys of the current stage before the cluster moves to the next one, \
                 {}. Apply the configuration with {attribute} {} until every replica has rolled (the plan shows \
                 the replicas still to roll), then change the stage. Nothing was changed.",
                self.why_masters_first,
                stage.shown()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::Stage::*;
    use super::*;

    const R: Rotation = Rotation {
        attribute: "key_rotation",
        what: "key",
        stages: ["make one", "use it", "forget"],
        why_started_first: "Verify first.",
        why_masters_first: "or else",
        describe: |_, _| "things happen",
    };

    #[test]
    fn values_parse_and_others_are_refused_naming_the_attribute() {
        assert_eq!(R.parse(None), Ok(Steady));
        assert_eq!(R.parse(Some("started")), Ok(Started));
        assert_eq!(R.parse(Some("switched")), Ok(Switched));
        let (summary, detail) = R.parse(Some("done")).unwrap_err();
        assert!(summary.contains("key_rotation") && detail.contains("\"started\" to make one"));
        for s in [Steady, Started, Switched] {
            assert_eq!(R.parse(s.setting()), Ok(s));
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
                R.change(true, before, after).ok(),
                want,
                "{before:?} -> {after:?}"
            );
        }
        let (summary, detail) = R.change(true, Steady, Switched).unwrap_err();
        assert!(summary.contains("before \"started\""), "{summary}");
        assert!(detail.starts_with("Verify first."), "{detail}");
    }

    #[test]
    fn a_new_cluster_starts_with_one_key() {
        assert_eq!(R.change(false, Steady, Steady), Ok(KeyChange::Keep));
        for after in [Started, Switched] {
            assert!(R.change(false, Steady, after).is_err(), "{after:?}");
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
    fn the_plan_names_each_change_of_stage() {
        assert_eq!(R.plan_note("prod", Started, Started), None);
        let (summary, detail) = R.plan_note("prod", Steady, Started).unwrap();
        assert!(summary.contains("changes its key: key_rotation = \"started\""));
        assert!(detail.contains("In this apply things happen."));
        let (summary, _) = R.plan_note("prod", Switched, Steady).unwrap();
        assert!(summary.contains("removed"));
        assert!(R.plan_note("prod", Steady, Switched).is_none());
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
        assert_eq!(R.masters_ready(&started, Started, "K", Some("N")), Ok(()));
        // b's roll to `started` failed: it verifies K alone.
        let behind = [master("a", "K", &["K", "N"]), master("b", "K", &["K"])];
        let (summary, detail) = R
            .masters_ready(&behind, Started, "K", Some("N"))
            .unwrap_err();
        assert!(
            summary.starts_with("Master b does not run the key"),
            "{summary}"
        );
        assert!(
            detail.contains("= \"started\"") && detail.contains("or else"),
            "{detail}"
        );
        // Switched: N signs, both verified.
        let switched = [master("a", "N", &["K", "N"])];
        assert_eq!(R.masters_ready(&switched, Switched, "K", Some("N")), Ok(()));
        assert!(R.masters_ready(&started, Switched, "K", Some("N")).is_err());
        // Steady: no next key, one verified.
        assert_eq!(
            R.masters_ready(&[master("a", "K", &["K"])], Steady, "K", None),
            Ok(())
        );
        assert!(R.masters_ready(&started, Steady, "K", None).is_err());
        // No master runs: nothing to disagree.
        assert_eq!(R.masters_ready(&[], Switched, "K", Some("N")), Ok(()));
    }
}
