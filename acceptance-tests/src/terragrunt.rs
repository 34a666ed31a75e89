//! A Terragrunt stack run the way Terragrunt runs it, with the real clients. Terragrunt itself cannot be installed
//! here (no registry this machine reaches has it), so this does its part for the features `examples/terragrunt/`
//! uses, reading the example's own `terragrunt.hcl` files (hcl-rs parses and evaluates them):
//! - `include` with `find_in_parent_folders(...)`, and the included file's `generate` blocks, written into the
//!   unit's working copy;
//! - `terraform { source = "<dir>//<module>" }`: the module's files copied into the working copy (Terragrunt
//!   copies all of `<dir>` and runs in `<module>`; the example's modules reach nothing outside their own folder);
//! - `dependency` blocks: the dependency's outputs read with `output -json` in its working copy; when it has none
//!   (not applied yet) and the command is in `mock_outputs_allowed_terraform_commands`, its `mock_outputs`;
//! - `inputs`, evaluated with `dependency.<name>.outputs`, handed to the client as `TF_VAR_<name>`: a string as
//!   it is, any other value as JSON, as Terragrunt does.
//!
//! Each unit runs in a [`Workspace`] of its own (Terragrunt's `.terragrunt-cache`), so its state is its own.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hcl::eval::{Context, Evaluate, FuncArgs, FuncDef, ParamType};
use serde_json::Value;

use crate::client::Client;
use crate::command::CmdOutput;
use crate::workspace::Workspace;

/// A copy of a Terragrunt stack (so a scenario can edit its inputs) and a working copy per unit.
pub struct Stack {
    root: tempfile::TempDir,
    units: BTreeMap<String, Workspace>,
}

thread_local! {
    /// The unit whose file is evaluated: where `find_in_parent_folders` starts (hcl-rs functions are plain `fn`s).
    static UNIT_DIR: RefCell<PathBuf> = const { RefCell::new(PathBuf::new()) };
}

impl Stack {
    /// Copies the stack at `source` and makes a working copy for each of `units` (directories holding a
    /// `terragrunt.hcl`), whose commands get `env` as well.
    pub fn new(client: Client, source: &Path, units: &[&str], env: &[(&str, &str)]) -> Stack {
        let root = tempfile::Builder::new()
            .prefix("terragrunt-stack-")
            .tempdir_in(crate::work_dir())
            .expect("a directory for the stack");
        copy_dir(source, root.path());
        let units = units
            .iter()
            .map(|name| {
                let mut ws = Workspace::new(client, &format!("terragrunt-{name}"));
                for (k, v) in env {
                    ws.set_env(*k, *v);
                }
                ((*name).to_string(), ws)
            })
            .collect();
        Stack { root, units }
    }

    /// The stack's copy, for a scenario to edit.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    pub fn unit(&self, name: &str) -> &Workspace {
        self.units
            .get(name)
            .unwrap_or_else(|| panic!("no unit {name}"))
    }

    /// Runs `args` in unit `name` as `terragrunt <args>` would: its working copy is written afresh from the
    /// stack (module, generated files, inputs as of now), then the client runs there.
    pub fn run(&mut self, name: &str, args: &[&str]) -> CmdOutput {
        let command = args.first().copied().unwrap_or_default();
        let unit_dir = self.root.path().join(name);
        let text = std::fs::read_to_string(unit_dir.join("terragrunt.hcl"))
            .unwrap_or_else(|e| panic!("unit {name}: {e}"));
        let body: hcl::Body = hcl::from_str(&text).unwrap_or_else(|e| panic!("unit {name}: {e}"));
        UNIT_DIR.with(|d| *d.borrow_mut() = unit_dir.clone());
        let mut ctx = Context::new();
        let find = FuncDef::builder()
            .param(ParamType::String)
            .build(find_in_parent_folders);
        ctx.declare_func("find_in_parent_folders", find);
        let dependencies = self.dependencies(name, &body, command, &ctx);
        ctx.declare_var("dependency", dependencies);
        let ws = &self.units[name];
        for block in body.blocks() {
            match block.identifier() {
                "include" => write_generated(ws, &eval_str(block.body(), "path", &ctx)),
                "terraform" => {
                    let source = eval_str(block.body(), "source", &ctx);
                    let (dir, module) = source.split_once("//").unwrap_or((&source, ""));
                    copy_dir(&unit_dir.join(dir).join(module), ws.path());
                }
                _ => {}
            }
        }
        let inputs = attribute(&body, "inputs")
            .map(|e| {
                json(
                    e.evaluate(&ctx)
                        .unwrap_or_else(|e| panic!("{name} inputs: {e}")),
                )
            })
            .unwrap_or_default();
        let ws = self.units.get_mut(name).expect("unit");
        for (key, value) in inputs.as_object().into_iter().flatten() {
            // A string as it is, anything else as JSON (which Terraform parses as HCL for typed variables).
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            ws.set_env(format!("TF_VAR_{key}"), text);
        }
        if !ws.path().join(".terraform").exists() {
            ws.init().assert_success();
        }
        ws.run(args)
    }

    /// `dependency.<name>.outputs` for each `dependency` block of unit `name`: the applied unit's outputs, or its
    /// mock when it has none and `command` may use mocks.
    fn dependencies(
        &self,
        name: &str,
        body: &hcl::Body,
        command: &str,
        ctx: &Context,
    ) -> hcl::Value {
        let mut all = hcl::Map::new();
        for block in body.blocks().filter(|b| b.identifier() == "dependency") {
            let label = block.labels()[0].as_str().to_string();
            let path = eval_str(block.body(), "config_path", ctx);
            let dep = Path::new(&path)
                .file_name()
                .and_then(|f| f.to_str())
                .expect("a unit");
            let out = self.unit(dep).run(&["output", "-json"]);
            let outputs: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
            let outputs: serde_json::Map<String, Value> = outputs
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v["value"].clone()))
                .collect();
            let outputs = if outputs.is_empty() {
                let allowed = attribute(block.body(), "mock_outputs_allowed_terraform_commands")
                    .map(|e| json(e.evaluate(ctx).expect("mock commands")))
                    .unwrap_or_default();
                assert!(
                    allowed
                        .as_array()
                        .is_some_and(|a| a.iter().any(|c| c == command)),
                    "unit {name}: dependency {label} ({dep}) has no outputs and `{command}` may not use its mock"
                );
                let mock = attribute(block.body(), "mock_outputs").expect("mock_outputs");
                json(mock.evaluate(ctx).expect("mock_outputs"))
            } else {
                Value::Object(outputs)
            };
            let mut entry = hcl::Map::new();
            entry.insert("outputs".to_string(), hcl_value(outputs));
            all.insert(label, hcl::Value::Object(entry));
        }
        hcl::Value::Object(all)
    }
}

/// Terragrunt's `find_in_parent_folders(name)`: the first `name` above the unit's directory.
fn find_in_parent_folders(args: FuncArgs) -> Result<hcl::Value, String> {
    let name = args[0].as_str().ok_or("a file name")?.to_string();
    let start = UNIT_DIR.with(|d| d.borrow().clone());
    start
        .ancestors()
        .skip(1)
        .map(|dir| dir.join(&name))
        .find(|p| p.is_file())
        .map(|p| hcl::Value::String(p.display().to_string()))
        .ok_or_else(|| format!("no {name} above {}", start.display()))
}

/// The included file's `generate` blocks, each written at its `path` in the working copy.
fn write_generated(ws: &Workspace, included: &str) {
    let text = std::fs::read_to_string(included).unwrap_or_else(|e| panic!("{included}: {e}"));
    let body: hcl::Body = hcl::from_str(&text).unwrap_or_else(|e| panic!("{included}: {e}"));
    let ctx = Context::new();
    for block in body.blocks().filter(|b| b.identifier() == "generate") {
        ws.write_file(
            &eval_str(block.body(), "path", &ctx),
            &eval_str(block.body(), "contents", &ctx),
        );
    }
}

fn attribute<'a>(body: &'a hcl::Body, key: &str) -> Option<&'a hcl::Expression> {
    body.attributes().find(|a| a.key() == key).map(|a| a.expr())
}

fn eval_str(body: &hcl::Body, key: &str, ctx: &Context) -> String {
    let expr = attribute(body, key).unwrap_or_else(|| panic!("no attribute {key}"));
    match expr.evaluate(ctx) {
        Ok(hcl::Value::String(s)) => s,
        other => panic!("{key}: not a string: {other:?}"),
    }
}

fn json(v: hcl::Value) -> Value {
    serde_json::to_value(v).expect("HCL values are JSON")
}

fn hcl_value(v: Value) -> hcl::Value {
    hcl::to_value(v).expect("JSON values are HCL")
}

fn copy_dir(from: &Path, to: &Path) {
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            std::fs::create_dir_all(&target).expect("a directory");
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target)
                .unwrap_or_else(|e| panic!("{} -> {}: {e}", path.display(), target.display()));
        }
    }
}
