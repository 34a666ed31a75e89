//! go-plugin's startup handshake: check that a plugin client launched us, then print the one line that tells it
//! where to connect.
//!
//! The functions here are pure (the environment is passed in), so the rules are unit-tested without processes.

use std::fmt;
use std::net::SocketAddr;

use base64::Engine;

/// Set by Terraform and OpenTofu for every provider process. A fixed value, not a secret: it only tells a human
/// who ran the binary by hand that it is not a command.
pub(crate) const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
pub(crate) const MAGIC_COOKIE_VALUE: &str =
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// go-plugin's own protocol version (the first handshake field).
const CORE_PROTOCOL_VERSION: u32 = 1;
/// The only plugin protocol this crate speaks.
pub(crate) const APP_PROTOCOL_VERSION: u32 = 6;

/// What the launching client told us through the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// PEM of the client's certificate (AutoMTLS). Absent only when the client disabled plugin TLS
    /// (`TF_DISABLE_PLUGIN_TLS`), in which case go-plugin expects plaintext gRPC.
    pub client_cert_pem: Option<String>,
}

/// Why we will not start; each message is meant for the person reading the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LaunchError {
    /// Run by hand, or by something that is not a plugin client.
    NotLaunchedByClient,
    /// The client speaks only protocol versions we do not.
    NoCommonProtocol { offered: String },
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::NotLaunchedByClient => write!(
                f,
                "This binary is a plugin for Terraform/OpenTofu; it is not meant to be run directly. \
                 Run `terraform init` in a configuration that uses it."
            ),
            LaunchError::NoCommonProtocol { offered } => write!(
                f,
                "This provider speaks plugin protocol {APP_PROTOCOL_VERSION}, but the client offered only \
                 version(s) {offered:?}. Use Terraform 1.0 or later, or OpenTofu."
            ),
        }
    }
}

impl std::error::Error for LaunchError {}

/// Checks the environment a plugin client sets. `env` returns a variable's value, or `None` if it is unset or not
/// valid Unicode.
pub(crate) fn check_launch(env: impl Fn(&str) -> Option<String>) -> Result<Launch, LaunchError> {
    if env(MAGIC_COOKIE_KEY).as_deref() != Some(MAGIC_COOKIE_VALUE) {
        return Err(LaunchError::NotLaunchedByClient);
    }
    // Clients since go-plugin 1.0 list the versions they accept (order varies: "5,6" or "6,5"). An old client that
    // lists none gets our only version, as go-plugin's own server would give it its default.
    if let Some(offered) = env("PLUGIN_PROTOCOL_VERSIONS").filter(|v| !v.trim().is_empty()) {
        let speaks_ours = offered
            .split(',')
            .any(|v| v.trim().parse::<u32>() == Ok(APP_PROTOCOL_VERSION));
        if !speaks_ours {
            return Err(LaunchError::NoCommonProtocol { offered });
        }
    }
    let client_cert_pem = env("PLUGIN_CLIENT_CERT").filter(|pem| !pem.trim().is_empty());
    Ok(Launch { client_cert_pem })
}

/// The handshake line, newline included: `1|6|tcp|127.0.0.1:PORT|grpc|CERT`.
///
/// CERT is the server certificate's DER in standard base64 **without padding**: go-plugin decodes it with
/// `RawStdEncoding` and rejects `=`. It is empty when serving plaintext. Nothing follows it: a 7th field would
/// announce gRPC multiplexing, which we do not do.
pub(crate) fn handshake_line(addr: SocketAddr, server_cert_der: Option<&[u8]>) -> String {
    let cert = server_cert_der
        .map(|der| base64::engine::general_purpose::STANDARD_NO_PAD.encode(der))
        .unwrap_or_default();
    format!("{CORE_PROTOCOL_VERSION}|{APP_PROTOCOL_VERSION}|tcp|{addr}|grpc|{cert}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn without_the_cookie_we_refuse_with_one_clear_line() {
        let err = check_launch(env_of(&[])).unwrap_err();
        assert_eq!(err, LaunchError::NotLaunchedByClient);
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "one line: {msg}");
        assert!(msg.contains("terraform init"));
        let wrong = check_launch(env_of(&[(MAGIC_COOKIE_KEY, "nope")])).unwrap_err();
        assert_eq!(wrong, LaunchError::NotLaunchedByClient);
    }

    #[test]
    fn protocol_6_must_be_offered_in_any_order() {
        for offered in ["5,6", "6,5", "6", " 5 , 6 "] {
            let env = env_of(&[
                (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
                ("PLUGIN_PROTOCOL_VERSIONS", offered),
            ]);
            assert!(check_launch(env).is_ok(), "{offered}");
        }
        let env = env_of(&[
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_PROTOCOL_VERSIONS", "4,5"),
        ]);
        let err = check_launch(env).unwrap_err();
        assert_eq!(
            err,
            LaunchError::NoCommonProtocol {
                offered: "4,5".into()
            }
        );
        assert!(err.to_string().contains("protocol 6"));
    }

    #[test]
    fn no_version_list_means_ours() {
        assert!(check_launch(env_of(&[(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)])).is_ok());
    }

    #[test]
    fn client_cert_is_optional_and_blank_means_absent() {
        let env = env_of(&[
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_CLIENT_CERT", "-----BEGIN…"),
        ]);
        assert_eq!(
            check_launch(env).unwrap().client_cert_pem.as_deref(),
            Some("-----BEGIN…")
        );
        let env = env_of(&[
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_CLIENT_CERT", ""),
        ]);
        assert_eq!(check_launch(env).unwrap().client_cert_pem, None);
    }

    #[test]
    fn handshake_line_has_six_fields_and_unpadded_cert() {
        let addr: SocketAddr = "127.0.0.1:36719".parse().unwrap();
        // 4 bytes encode to 8 characters with "==" padding in padded base64; unpadded drops them.
        let line = handshake_line(addr, Some(&[1, 2, 3, 4]));
        assert_eq!(line, "1|6|tcp|127.0.0.1:36719|grpc|AQIDBA\n");
        assert_eq!(
            handshake_line(addr, None),
            "1|6|tcp|127.0.0.1:36719|grpc|\n"
        );
    }
}
