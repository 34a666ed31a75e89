//! A new service-account signing key without a window in which any API server refuses a token another one minted
//! (`service_account_key_rotation` on the cluster). The key signs every service-account token; a key that leaked
//! mints a token for any service account until the API servers stop trusting it, so a cluster must be able to
//! change it while it runs. The stages and their rules are every rotation's (`domain::rotation`); here, what they
//! mean for this key:
//! - `started`: a next key is made; every API server verifies tokens with both and still signs with the current
//!   one;
//! - `switched`: every API server signs with the next key and still verifies both;
//! - the setting removed: the next key becomes the key. Tokens the old one signed stop verifying, so this is the
//!   user's step once pods have fresh tokens (kubelets refresh projected tokens well within an hour;
//!   secret-based legacy tokens must be deleted to be minted again).

pub use super::rotation::{Key, KeyChange, KeyUse, MasterKeys, Rotation, Stage};

/// The cluster's attribute, and the masters' build setting while a rotation is under way.
pub const ATTRIBUTE: &str = "service_account_key_rotation";

pub const ROTATION: Rotation = Rotation {
    attribute: ATTRIBUTE,
    what: "service-account key",
    stages: [
        "make a next service-account key that every API server verifies",
        "sign with it",
        "forget the old key",
    ],
    why_started_first: "Masters sign with the next key only once every API server verifies it, or tokens minted \
                        by a rolled master are refused by those not rolled yet.",
    why_masters_first: "or a master would meet tokens signed with a key it does not verify",
    describe,
};

fn describe(change: KeyChange, after: Stage) -> &'static str {
    match change {
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
    }
}

#[cfg(test)]
mod tests {
    use super::Stage::*;
    use super::*;

    #[test]
    fn the_plan_names_what_each_change_does() {
        let (summary, detail) = ROTATION.plan_note("prod", Steady, Started).unwrap();
        assert!(
            summary.contains("service-account key: service_account_key_rotation = \"started\"")
                && detail.contains("next service-account key is made")
        );
        let (_, detail) = ROTATION.plan_note("prod", Started, Switched).unwrap();
        assert!(detail.contains("sign service-account tokens with the next key"));
        let (_, detail) = ROTATION.plan_note("prod", Switched, Started).unwrap();
        assert!(detail.contains("with the current key again"));
        let (_, detail) = ROTATION.plan_note("prod", Started, Steady).unwrap();
        assert!(detail.contains("signed no token"));
        let (summary, detail) = ROTATION.plan_note("prod", Switched, Steady).unwrap();
        assert!(summary.contains("removed") && detail.contains("stop verifying"));
    }

    #[test]
    fn a_stage_out_of_order_says_why_for_tokens() {
        let (_, detail) = ROTATION.change(true, Steady, Switched).unwrap_err();
        assert!(
            detail.contains("tokens minted by a rolled master"),
            "{detail}"
        );
        let (summary, _) = ROTATION.parse(Some("done")).unwrap_err();
        assert!(summary.contains(ATTRIBUTE));
    }
}
