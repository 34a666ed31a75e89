//! Service-account tokens, as kube-apiserver authenticates them: an ES256 JWT whose signature verifies under one
//! of the public keys in `--service-account-key-file` (every key of the file, as client-go's
//! `keyutil.PublicKeysFromFile` reads it) and whose issuer is `--service-account-issuer`, not expired. The
//! subject `system:serviceaccount:<namespace>:<name>` is the user. Only what the masters sign with is modelled: ES256,
//! since their key is ECDSA P-256 (`ha_pki::service_account_key`).

use std::path::Path;

use base64::Engine as _;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

use super::VmError;
use crate::contract::Identity;

/// What the API server verifies tokens with.
#[derive(Debug, Clone)]
pub(crate) struct TokenVerifier {
    issuer: String,
    /// Each key's uncompressed EC point.
    keys: Vec<Vec<u8>>,
}

impl TokenVerifier {
    /// The keys of the file at `path` (PEM `PUBLIC KEY` blocks) and the issuer the flags name.
    pub fn load(path: &Path, issuer: &str) -> Result<TokenVerifier, VmError> {
        let refused = |why: String| {
            VmError::Config(format!(
                "--service-account-key-file {}: {why}",
                path.display()
            ))
        };
        let pem = std::fs::read(path).map_err(|e| refused(e.to_string()))?;
        let mut keys = Vec::new();
        for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
            let block = block.map_err(|e| refused(e.to_string()))?;
            let (_, spki) = SubjectPublicKeyInfo::from_der(&block.contents)
                .map_err(|e| refused(format!("a key that is not a public key: {e}")))?;
            keys.push(spki.subject_public_key.data.to_vec());
        }
        if keys.is_empty() {
            return Err(refused("no public key".into()));
        }
        Ok(TokenVerifier {
            issuer: issuer.to_string(),
            keys,
        })
    }

    /// The service account `token` authenticates, at `now` (Unix seconds); why not otherwise.
    pub fn verify(&self, token: &str, now: u64) -> Result<Identity, String> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<&str> = token.split('.').collect();
        let [header, claims, signature] = parts.as_slice() else {
            return Err("not a JWT".into());
        };
        let json = |part: &str| -> Result<serde_json::Value, String> {
            let bytes = b64.decode(part).map_err(|e| e.to_string())?;
            serde_json::from_slice(&bytes).map_err(|e| e.to_string())
        };
        if json(header)?["alg"] != "ES256" {
            return Err("not an ES256 token".into());
        }
        let signature = b64.decode(signature).map_err(|e| e.to_string())?;
        let signed = format!("{header}.{claims}");
        if !self.keys.iter().any(|k| {
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, k)
                .verify(signed.as_bytes(), &signature)
                .is_ok()
        }) {
            return Err("no key verifies the signature".into());
        }
        let claims = json(claims)?;
        if claims["iss"] != self.issuer.as_str() {
            return Err(format!("issuer {} is not {}", claims["iss"], self.issuer));
        }
        if claims["exp"].as_u64().is_none_or(|exp| exp <= now) {
            return Err("expired".into());
        }
        let subject = claims["sub"].as_str().unwrap_or_default();
        match subject
            .strip_prefix("system:serviceaccount:")
            .and_then(|s| s.split_once(':'))
        {
            Some((namespace, name)) => Ok(Identity::service_account(namespace, name)),
            None => Err(format!("subject {subject:?} is not a service account")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

    const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

    fn key() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
    }

    fn token(k: &EcdsaKeyPair, claims: serde_json::Value) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let head = b64.encode(br#"{"alg":"ES256","typ":"JWT"}"#);
        let body = b64.encode(claims.to_string());
        let sig = k
            .sign(&SystemRandom::new(), format!("{head}.{body}").as_bytes())
            .unwrap();
        format!("{head}.{body}.{}", b64.encode(sig.as_ref()))
    }

    fn verifier(keys: &[&EcdsaKeyPair]) -> TokenVerifier {
        TokenVerifier {
            issuer: ISSUER.into(),
            keys: keys
                .iter()
                .map(|k| k.public_key().as_ref().to_vec())
                .collect(),
        }
    }

    #[test]
    fn a_token_verifies_under_any_key_of_the_file_and_nothing_else() {
        let (a, b, c) = (key(), key(), key());
        let claims = serde_json::json!({"iss": ISSUER, "sub": "system:serviceaccount:kube-system:default", "exp": 2000});
        let both = verifier(&[&a, &b]);
        for k in [&a, &b] {
            let who = both.verify(&token(k, claims.clone()), 1000).unwrap();
            assert_eq!(who.user, "system:serviceaccount:kube-system:default");
        }
        assert!(
            both.verify(&token(&c, claims.clone()), 1000).is_err(),
            "another key"
        );
        assert!(
            verifier(&[&b])
                .verify(&token(&a, claims.clone()), 1000)
                .is_err(),
            "a key dropped"
        );
        assert!(
            both.verify(&token(&a, claims.clone()), 2000).is_err(),
            "expired"
        );
        let other_issuer = serde_json::json!({"iss": "https://elsewhere", "sub": "system:serviceaccount:a:b", "exp": 2000});
        assert!(both.verify(&token(&a, other_issuer), 1000).is_err());
        let mut forged = token(&a, claims);
        forged.replace_range(forged.len() - 4.., "AAAA");
        assert!(both.verify(&forged, 1000).is_err(), "a signature changed");
    }
}
