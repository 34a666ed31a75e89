//! Secrets encrypted at rest (docs/master-config.md §12): kube-apiserver's `--encryption-provider-config`, an
//! `apiserver.config.k8s.io/v1` `EncryptionConfiguration` that encrypts `secrets` with `secretbox` (XSalsa20 and
//! Poly1305) under the cluster's key and still reads what was written plain, or under the older keys of a change
//! of key in progress ([`SecretsEncryption`]).
//!
//! Why these providers, in this order: Kubernetes' encryption-at-rest page rates `aescbc` weak (padding oracle)
//! and asks `aesgcm` keys to be rotated every 200,000 writes, which nothing here could promise; `secretbox` has
//! neither caveat. The first provider, and within `secretbox` its first key, is the one every write uses; every
//! other key, and `identity`, only read. `identity` is always there, so what was written before a key existed, or
//! restored from a snapshot taken plain, stays readable.
//!
//! The file holds the key, so it is a 0600 key file: it travels in the replica's key bundle (its Secret Manager
//! secret), never in `user-data`, and only the API server mounts it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// Where the masters read it.
pub const CONFIG_PATH: &str = "/etc/srv/kubernetes/encryption-config.yaml";

/// secretbox's key size (XSalsa20-Poly1305): Kubernetes refuses any other.
pub const KEY_BYTES: usize = 32;

/// The key Secrets are encrypted with. Its `Debug` prints the name alone.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretsKey {
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsKey")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

impl SecretsKey {
    /// The key from a Secret Manager payload: 32 raw bytes (`head -c 32 /dev/urandom`), or their base64 (what
    /// `head -c 32 /dev/urandom | base64` prints, a trailing newline allowed). Anything else is refused with what
    /// was found, never with the bytes.
    pub fn from_payload(payload: &[u8]) -> Result<SecretsKey, String> {
        let raw = if payload.len() == KEY_BYTES {
            payload.to_vec()
        } else {
            let text = std::str::from_utf8(payload)
                .map_err(|_| {
                    format!(
                        "it holds {} bytes that are not text; a key is {KEY_BYTES} raw bytes or their base64",
                        payload.len()
                    )
                })?
                .trim();
            STANDARD.decode(text).map_err(|_| {
                format!(
                    "it holds {} bytes that are neither {KEY_BYTES} raw bytes nor base64",
                    payload.len()
                )
            })?
        };
        let key: [u8; KEY_BYTES] = raw.as_slice().try_into().map_err(|_| {
            format!(
                "it decodes to {} bytes; secretbox takes exactly {KEY_BYTES}",
                raw.len()
            )
        })?;
        Ok(SecretsKey { key })
    }

    /// The key's name in the configuration, and so in every value it encrypts (etcd values start
    /// `k8s:enc:secretbox:v1:<name>:`): a fingerprint, so the name alone says which key a value or a snapshot
    /// needs, and no two keys share one.
    pub fn name(&self) -> String {
        let digest = super::keys::sha256_hex(&self.key);
        format!("ha-{}", &digest[..16])
    }
}

/// What one master's API server does with Secrets: encrypt every write with `writes` (none: write them plain), and
/// read what any of `reads` or `writes` encrypted, or what was written plain. A change of the cluster's key is a
/// sequence of these, one roll each (`domain::secrets_encryption::change` says which steps are safe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretsEncryption {
    pub writes: Option<SecretsKey>,
    /// Keys still read, not written with, in the cluster's order.
    pub reads: Vec<SecretsKey>,
}

impl From<SecretsKey> for SecretsEncryption {
    fn from(key: SecretsKey) -> Self {
        SecretsEncryption {
            writes: Some(key),
            reads: Vec::new(),
        }
    }
}

impl SecretsEncryption {
    /// Every key's name the API server can decrypt with, the one it writes with first.
    pub fn names(&self) -> Vec<String> {
        self.writes
            .iter()
            .chain(&self.reads)
            .map(SecretsKey::name)
            .collect()
    }

    /// The `EncryptionConfiguration` the API server reads: `secretbox` with the written key first then the read
    /// ones, then `identity`; without a written key, `identity` first (every write plain) and `secretbox` after
    /// it, to read. A key named twice is listed once (Kubernetes refuses two keys of one name).
    pub fn config_yaml(&self) -> String {
        let mut keys: Vec<Key> = Vec::new();
        for key in self.writes.iter().chain(&self.reads) {
            if !keys.iter().any(|k| k.name == key.name()) {
                keys.push(Key {
                    name: key.name(),
                    secret: STANDARD.encode(key.key),
                });
            }
        }
        let secretbox = Provider {
            secretbox: Some(Keys { keys }),
            identity: None,
        };
        let identity = Provider {
            secretbox: None,
            identity: Some(Identity {}),
        };
        let providers = match (&self.writes, self.reads.is_empty()) {
            (Some(_), _) => vec![secretbox, identity],
            (None, false) => vec![identity, secretbox],
            // Nothing to read with: upstream refuses an empty `secretbox`, and identity alone is what no
            // configuration does.
            (None, true) => vec![identity],
        };
        let config = EncryptionConfiguration {
            api_version: "apiserver.config.k8s.io/v1".into(),
            kind: "EncryptionConfiguration".into(),
            resources: vec![ResourceConfiguration {
                resources: vec!["secrets".into()],
                providers,
            }],
        };
        serde_norway::to_string(&config).expect("plain structs always serialize")
    }
}

/// `apiserver.config.k8s.io/v1` `EncryptionConfiguration`, only the fields set here; Deserialize so tests read
/// the rendered file back.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EncryptionConfiguration {
    pub api_version: String,
    pub kind: String,
    pub resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct ResourceConfiguration {
    pub resources: Vec<String>,
    pub providers: Vec<Provider>,
}

/// One provider: exactly one field is set (upstream's `ProviderConfiguration`). Fields, not an enum, so the
/// YAML is upstream's `- secretbox: {...}` rather than a YAML tag.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Provider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secretbox: Option<Keys>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Keys {
    pub keys: Vec<Key>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Key {
    pub name: String,
    /// base64 of the key.
    pub secret: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Identity {}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: [u8; 32] = *b"0123456789abcdef0123456789abcdef";

    #[test]
    fn a_key_is_32_raw_bytes_or_their_base64() {
        let raw = SecretsKey::from_payload(&RAW).unwrap();
        let text = format!("{}\n", STANDARD.encode(RAW));
        assert_eq!(SecretsKey::from_payload(text.as_bytes()).unwrap(), raw);
        let short = STANDARD.encode(&RAW[..31]);
        for (payload, says) in [
            (&RAW[..31], "neither 32 raw bytes nor base64"),
            (short.as_bytes(), "decodes to 31 bytes"),
            (
                b"not a key at all!".as_slice(),
                "neither 32 raw bytes nor base64",
            ),
            (&[0xff; 40][..], "not text"),
        ] {
            let e = SecretsKey::from_payload(payload).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains("0123456789abcdef"), "never the bytes: {e}");
        }
    }

    #[test]
    fn the_name_is_a_fingerprint_and_debug_prints_only_it() {
        let a = SecretsKey::from_payload(&RAW).unwrap();
        let mut other = RAW;
        other[0] ^= 1;
        let b = SecretsKey::from_payload(&other).unwrap();
        assert!(a.name().starts_with("ha-") && a.name().len() == 19);
        assert_ne!(a.name(), b.name());
        let shown = format!("{a:?}");
        assert!(shown.contains(&a.name()) && !shown.contains("0123456789"));
        assert!(!shown.contains(&STANDARD.encode(RAW)));
    }

    /// secretbox with this key first (every write), identity after (reads of what was written plain).
    #[test]
    fn the_configuration_encrypts_secrets_with_secretbox_then_reads_plain() {
        let key = SecretsKey::from_payload(&RAW).unwrap();
        let read: EncryptionConfiguration =
            serde_norway::from_str(&SecretsEncryption::from(key.clone()).config_yaml()).unwrap();
        assert_eq!(read.api_version, "apiserver.config.k8s.io/v1");
        assert_eq!(read.kind, "EncryptionConfiguration");
        let [only] = read.resources.as_slice() else {
            panic!("one resource list: {read:?}")
        };
        assert_eq!(only.resources, ["secrets"]);
        let [first, last] = only.providers.as_slice() else {
            panic!("two providers: {only:?}")
        };
        let keys = &first.secretbox.as_ref().expect("secretbox first").keys;
        assert!(first.identity.is_none());
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].name, key.name());
        assert_eq!(STANDARD.decode(&keys[0].secret).unwrap(), RAW);
        assert!(last.identity.is_some() && last.secretbox.is_none());
    }

    /// A change of key in progress: the written key first and the read ones after it within `secretbox`, then
    /// `identity`; with no written key, `identity` first so every write is plain, `secretbox` after it to read.
    #[test]
    fn a_change_of_key_writes_with_the_first_and_reads_with_every_key() {
        let a = SecretsKey::from_payload(&RAW).unwrap();
        let mut other = RAW;
        other[0] ^= 1;
        let b = SecretsKey::from_payload(&other).unwrap();
        let providers = |e: &SecretsEncryption| {
            let read: EncryptionConfiguration = serde_norway::from_str(&e.config_yaml()).unwrap();
            read.resources
                .into_iter()
                .flat_map(|r| r.providers)
                .map(|p| match (p.secretbox, p.identity) {
                    (Some(k), None) => k
                        .keys
                        .into_iter()
                        .map(|k| k.name)
                        .collect::<Vec<_>>()
                        .join(","),
                    (None, Some(_)) => "identity".to_string(),
                    other => panic!("one field per provider: {other:?}"),
                })
                .collect::<Vec<_>>()
        };
        let (an, bn) = (a.name(), b.name());
        for (e, want) in [
            (
                SecretsEncryption {
                    writes: Some(b.clone()),
                    reads: vec![a.clone()],
                },
                vec![format!("{bn},{an}"), "identity".into()],
            ),
            (
                SecretsEncryption {
                    writes: None,
                    reads: vec![a.clone(), b.clone()],
                },
                vec!["identity".into(), format!("{an},{bn}")],
            ),
            (
                SecretsEncryption {
                    writes: Some(a.clone()),
                    reads: vec![a.clone()],
                },
                vec![an.clone(), "identity".into()],
            ),
            (
                SecretsEncryption {
                    writes: None,
                    reads: vec![],
                },
                vec!["identity".into()],
            ),
        ] {
            assert_eq!(providers(&e), want, "{e:?}");
            assert_eq!(
                e.names(),
                e.writes
                    .iter()
                    .chain(&e.reads)
                    .map(SecretsKey::name)
                    .collect::<Vec<_>>()
            );
        }
    }
}
