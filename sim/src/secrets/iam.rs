//! Who may do what to a secret: the caller's principal, the permission a method needs, and the roles of
//! Secret Manager that grant it (the predefined roles' permission lists, cloud.google.com/secret-manager/docs/
//! access-control). A project owner (the provider's own credentials) may do everything; a VM's service account
//! only what a binding on the secret grants it.

use super::model::Policy;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The credentials the sim was started with (`--require-token`, or any token without one): a project owner.
    Owner,
    /// A service account, as a VM's metadata server vouches for it (`serviceAccount:<email>`).
    ServiceAccount(String),
}

impl Principal {
    /// The member string a binding names this principal by.
    pub fn member(&self) -> Option<String> {
        match self {
            Principal::Owner => None,
            Principal::ServiceAccount(email) => Some(format!("serviceAccount:{email}")),
        }
    }
}

/// The permissions each predefined Secret Manager role grants on a secret.
const ROLES: &[(&str, &[&str])] = &[
    (
        "roles/secretmanager.secretAccessor",
        &["secretmanager.versions.access"],
    ),
    (
        "roles/secretmanager.viewer",
        &[
            "secretmanager.secrets.get",
            "secretmanager.secrets.getIamPolicy",
            "secretmanager.versions.get",
            "secretmanager.versions.list",
        ],
    ),
    (
        "roles/secretmanager.secretVersionAdder",
        &["secretmanager.versions.add"],
    ),
    (
        "roles/secretmanager.secretVersionManager",
        &[
            "secretmanager.versions.add",
            "secretmanager.versions.enable",
            "secretmanager.versions.disable",
            "secretmanager.versions.destroy",
            "secretmanager.versions.get",
            "secretmanager.versions.list",
        ],
    ),
];

/// The roles the sim knows: a binding to another role is refused, as IAM refuses a role that does not exist.
pub fn known_role(role: &str) -> bool {
    role == ADMIN || role == "roles/owner" || ROLES.iter().any(|(r, _)| *r == role)
}

const ADMIN: &str = "roles/secretmanager.admin";

/// Whether `who` holds `permission` on a secret with `policy` (none: the secret does not exist, and only an
/// owner may act, e.g. create it).
pub fn allows(policy: Option<&Policy>, who: &Principal, permission: &str) -> bool {
    let Some(member) = who.member() else {
        return true;
    };
    let Some(policy) = policy else {
        return false;
    };
    policy
        .bindings
        .iter()
        .filter(|b| {
            b.members
                .iter()
                .any(|m| *m == member || m == "allAuthenticatedUsers" || m == "allUsers")
        })
        .any(|b| {
            b.role == ADMIN
                || b.role == "roles/owner"
                || ROLES
                    .iter()
                    .any(|(r, perms)| *r == b.role && perms.contains(&permission))
        })
}

#[cfg(test)]
mod tests {
    use super::super::model::Binding;
    use super::*;

    fn policy(role: &str, member: &str) -> Policy {
        Policy {
            bindings: vec![Binding {
                role: role.into(),
                members: vec![member.into()],
            }],
        }
    }

    #[test]
    fn an_owner_may_do_anything_and_a_service_account_only_what_it_is_bound_to() {
        let sa = Principal::ServiceAccount("masters@p.iam.gserviceaccount.com".into());
        let other = Principal::ServiceAccount("other@p.iam.gserviceaccount.com".into());
        let access = "secretmanager.versions.access";
        assert!(allows(None, &Principal::Owner, access));
        assert!(!allows(None, &sa, access));
        let p = policy(
            "roles/secretmanager.secretAccessor",
            "serviceAccount:masters@p.iam.gserviceaccount.com",
        );
        assert!(allows(Some(&p), &sa, access));
        assert!(!allows(Some(&p), &other, access));
        assert!(!allows(Some(&p), &sa, "secretmanager.versions.add"));
        assert!(!allows(Some(&p), &sa, "secretmanager.secrets.getIamPolicy"));
        let viewer = policy(
            "roles/secretmanager.viewer",
            "serviceAccount:masters@p.iam.gserviceaccount.com",
        );
        assert!(
            !allows(Some(&viewer), &sa, access),
            "a viewer reads no payload"
        );
    }
}
