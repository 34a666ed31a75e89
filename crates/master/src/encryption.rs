//! Secrets encrypted at rest (docs/master-config.md §12): kube-apiserver's `--encryption-provider-config`, an
//! `apiserver.config.k8s.io/v1` `EncryptionConfiguration` that encrypts `secrets` with `secretbox` (XSalsa20 and
//! Poly1305) under the cluster's key and still reads what was written plain.
//!
//! Why these providers, in this order: Kubernetes' encryption-at-rest page rates `aescbc` weak (padding oracle)
//! and asks `aesgcm` keys to be rotated every 200,000 writes, which nothing here could promise; `secretbox` has
//! neither caveat. `identity` comes last so what was written before the key existed, or restored from a snapshot
//! taken plain, stays readable; the first provider is the one every write uses.
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

    /// The `EncryptionConfiguration` the API server reads.
    pub fn config_yaml(&self) -> String {
        let config = EncryptionConfiguration {
            api_version: "apiserver.config.k8s.io/v1".into(),
            kind: "EncryptionConfiguration".into(),
            resources: vec![ResourceConfiguration {
                resources: vec!["secrets".into()],
                providers: vec![
                    Provider {
                        secretbox: Some(Keys {
                            keys: vec![Key {
                                name: self.name(),
                                secret: STANDARD.encode(self.key),
                            }],
                        }),
                        identity: None,
                    },
                    Provider {
                        secretbox: None,
                        identity: Some(Identity {}),
                    },
                ],
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
        let read: EncryptionConfiguration = serde_norway::from_str(&key.config_yaml()).unwrap();
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
}
