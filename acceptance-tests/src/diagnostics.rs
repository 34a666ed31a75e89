//! Invalid-configuration scenarios: the error must come out of `validate` or `plan` (never only at apply),
//! under both clients, pointing at the offending attribute.

use std::fmt;

use crate::client::{Client, for_each_client};
use crate::command::{CmdOutput, normalize_ws};
use crate::provider::REQUIRED_PROVIDERS;
use crate::workspace::Workspace;

/// The command at which a configuration was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Core-level errors (HCL syntax, unknown arguments, bad references) stop `init` already.
    Init,
    Validate,
    Plan,
}

/// Where a diagnostic must point, parsed from a path like `ha_master_replica.x.zone`,
/// `ha_master_replica.m["b"].labels["team"]`, `data.ha_x.y.attr` or `provider.ha.project`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributePath {
    /// What follows `with ` in the diagnostic, e.g. `ha_master_replica.x` or `provider["…/hamaster/ha"]`;
    /// None for a provider path, whose address depends on the client.
    resource: Option<String>,
    /// The last attribute name in the path (indexes dropped): the source line the client quotes contains it.
    attribute: String,
}

impl AttributePath {
    pub fn parse(path: &str) -> AttributePath {
        let segments = split_top_level(path);
        let resource_len = match segments.first().map(String::as_str) {
            Some("provider") => 2,
            Some("data") => 3,
            _ => 2,
        };
        assert!(
            segments.len() > resource_len,
            "attribute path {path:?} names no attribute after the address"
        );
        let resource = (segments[0] != "provider").then(|| segments[..resource_len].join("."));
        let last = segments.last().expect("non-empty");
        let attribute = last.split('[').next().unwrap_or(last).to_string();
        AttributePath {
            resource,
            attribute,
        }
    }

    /// The `with …,` line the clients print for a diagnostic carrying this path.
    fn with_line(&self, client: Client) -> String {
        match &self.resource {
            Some(address) => format!("with {address},"),
            None => format!("with provider[{:?}],", client.provider_address()),
        }
    }
}

/// Splits on dots outside `[...]` and quotes.
fn split_top_level(path: &str) -> Vec<String> {
    let (mut segments, mut current, mut depth, mut quoted) =
        (Vec::new(), String::new(), 0usize, false);
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '[' if !quoted => depth += 1,
            ']' if !quoted => depth = depth.saturating_sub(1),
            '.' if !quoted && depth == 0 => {
                segments.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    segments.push(current);
    segments
}

/// The diagnostic that matched, and where.
#[derive(Clone, Debug)]
pub struct Rejection {
    pub client: Client,
    pub stage: Stage,
    /// The matching `Error: …` block as printed.
    pub diagnostic: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] rejected at {:?}:\n{}",
            self.client, self.stage, self.diagnostic
        )
    }
}

/// Asserts that `config` is rejected under both clients with an error diagnostic that contains every
/// `expected` substring (whitespace-insensitive: the clients wrap lines) and points at `attribute_path` (the
/// `with <address>,` line plus a quoted source line naming the attribute). `init`, `validate` and `plan` run in
/// order; the first that fails must carry the diagnostic, and `plan` succeeding fails the assertion.
///
/// A `terraform { required_providers }` block for `hamaster/ha` is prepended when `config` has none.
/// Returns the matching diagnostics, e.g. to assert the stage.
#[track_caller]
pub fn assert_validation_error(
    config: &str,
    expected: &[&str],
    attribute_path: &str,
) -> Vec<Rejection> {
    let config = if config.contains("required_providers") {
        config.to_string()
    } else {
        format!("{REQUIRED_PROVIDERS}\n{config}")
    };
    let path = AttributePath::parse(attribute_path);
    let rejections = std::sync::Mutex::new(Vec::new());
    for_each_client(|client| {
        let ws = Workspace::new(client, &format!("invalid-{attribute_path}"));
        ws.write_main_tf(&config);
        let rejection = expect_rejection(&ws, expected, &path);
        rejections
            .lock()
            .expect("no poisoning: pushes don't panic")
            .push(rejection);
    });
    rejections.into_inner().expect("no poisoning")
}

/// The per-workspace half of `assert_validation_error`, for scenarios that need their own setup (env, extra
/// files) before the invalid configuration is checked. `main.tf` must already be written.
#[track_caller]
pub fn expect_rejection(ws: &Workspace, expected: &[&str], path: &AttributePath) -> Rejection {
    let steps: [(Stage, &[&str]); 3] = [
        (Stage::Init, &["init", "-input=false", "-no-color"]),
        (Stage::Validate, &["validate", "-no-color"]),
        (Stage::Plan, &["plan", "-input=false", "-no-color"]),
    ];
    let mut outputs: Vec<CmdOutput> = Vec::new();
    for (stage, args) in steps {
        let output = ws.run(args);
        let failed = !output.success();
        outputs.push(output);
        if !failed {
            continue;
        }
        let output = outputs.last().expect("just pushed");
        assert!(
            !output.timed_out,
            "[{}] {stage:?} timed out:\n{output}",
            ws.client()
        );
        let with_line = path.with_line(ws.client());
        match matching_error(&output.combined(), expected, &with_line, &path.attribute) {
            Some(diagnostic) => {
                let rejection = Rejection {
                    client: ws.client(),
                    stage,
                    diagnostic,
                };
                eprintln!("{rejection}");
                return rejection;
            }
            None => panic!(
                "[{client}] {stage:?} failed, but with no error diagnostic containing {expected:?}, `{with_line}` and \
                 a source line quoting `{attr}`:\n{output}",
                client = ws.client(),
                attr = path.attribute,
            ),
        }
    }
    let all: Vec<String> = outputs.iter().map(ToString::to_string).collect();
    panic!(
        "[{}] expected the configuration to be rejected, but plan succeeded:\n{}",
        ws.client(),
        all.join("\n")
    );
}

/// The first `Error:` block of `output` that contains all of `expected`, the `with` line and a quoted source line
/// (`  12:   zone = …`) mentioning `attribute`.
fn matching_error(
    output: &str,
    expected: &[&str],
    with_line: &str,
    attribute: &str,
) -> Option<String> {
    error_blocks(output).into_iter().find(|block| {
        let flat = normalize_ws(block);
        expected.iter().all(|e| flat.contains(&normalize_ws(e)))
            && block.lines().any(|l| l.trim() == with_line)
            && block
                .lines()
                .any(|l| is_source_line(l) && l.contains(attribute))
    })
}

/// Splits client output into diagnostics: each starts at an `Error: ` or `Warning: ` line (as printed with
/// -no-color, which also drops the box-drawing border); only errors are returned.
fn error_blocks(output: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in output.lines() {
        // Keep tolerating the border in case a client prints it anyway.
        let unbordered = line.trim_start_matches(['│', '╷', '╵']);
        let line = if unbordered.len() < line.len() {
            unbordered.strip_prefix(' ').unwrap_or(unbordered)
        } else {
            line
        };
        if line.starts_with("Error: ") || line.starts_with("Warning: ") {
            blocks.extend(current.take());
            current = line.starts_with("Error: ").then(String::new);
        }
        if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks.extend(current);
    blocks
}

/// A quoted source line: optional spaces, a line number, a colon.
fn is_source_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && trimmed[digits..].starts_with(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_attribute_paths() {
        let p = AttributePath::parse("ha_master_replica.x.zone");
        assert_eq!(
            (p.resource.as_deref(), p.attribute.as_str()),
            (Some("ha_master_replica.x"), "zone")
        );
        let p = AttributePath::parse(r#"ha_master_replica.m["eu.b"].labels["a.b"]"#);
        assert_eq!(
            (p.resource.as_deref(), p.attribute.as_str()),
            (Some(r#"ha_master_replica.m["eu.b"]"#), "labels")
        );
        let p = AttributePath::parse("data.ha_x.y.attr");
        assert_eq!(
            (p.resource.as_deref(), p.attribute.as_str()),
            (Some("data.ha_x.y"), "attr")
        );
        let p = AttributePath::parse("provider.ha.project");
        assert_eq!(
            (p.resource.clone(), p.with_line(Client::OpenTofu)),
            (
                None,
                r#"with provider["registry.opentofu.org/hamaster/ha"],"#.into()
            )
        );
    }

    /// Output shaped like Terraform 1.15's with -no-color, including a wrapped detail line.
    const OUTPUT: &str = "\nWarning: Something minor\n\n  with ha_master_replica.x,\n  on main.tf line 3:\n   3:   zone = \"nope\"\n\n\
        Error: Invalid zone\n\n  with ha_master_replica.x,\n  on main.tf line 12, in resource \"ha_master_replica\" \"x\":\n  \
        12:   zone = \"nope\"\n\nThe zone \"nope\" is not a\nGCE zone.\n";

    #[test]
    fn finds_the_error_with_path_and_wrapped_text() {
        let block = matching_error(
            OUTPUT,
            &["Invalid zone", "is not a GCE zone"],
            "with ha_master_replica.x,",
            "zone",
        );
        assert!(block.is_some_and(|b| b.starts_with("Error: Invalid zone")));
    }

    #[test]
    fn ignores_warnings_and_wrong_paths() {
        assert!(
            matching_error(
                OUTPUT,
                &["Something minor"],
                "with ha_master_replica.x,",
                "zone"
            )
            .is_none()
        );
        assert!(
            matching_error(
                OUTPUT,
                &["Invalid zone"],
                "with ha_master_replica.y,",
                "zone"
            )
            .is_none()
        );
        assert!(
            matching_error(
                OUTPUT,
                &["Invalid zone"],
                "with ha_master_replica.x,",
                "cluster"
            )
            .is_none()
        );
    }
}
