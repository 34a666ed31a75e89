//! Schema-driven planning, the part every resource shares: computed attributes become unknown on create, defaults
//! fill what the user left out, plan modifiers adjust values and flag replacements, and validators check known
//! config values. Works on untyped values; the resource's typed `modify_plan` runs after this.

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use crate::planmodifier::{AttrPlanRequest, AttrPlanResponse};
use crate::schema::{Attribute, Schema};

static NULL: Value = Value::Null;

/// An object's attribute, or null when the object (or the attribute) is absent.
pub fn attr<'a>(object: &'a Value, name: &str) -> &'a Value {
    match object {
        Value::Object(m) => m.get(name).unwrap_or(&NULL),
        _ => &NULL,
    }
}

fn set_attr(object: &mut Value, name: &str, v: Value) {
    if let Value::Object(m) = object {
        m.insert(name.to_string(), v);
    }
}

pub struct Planned {
    pub planned: Value,
    pub requires_replace: Vec<AttributePath>,
    pub diagnostics: Diagnostics,
}

/// Plans a create (`prior` is `None`) or an update.
pub fn plan(schema: &Schema, config: &Value, prior: Option<&Value>, proposed: &Value) -> Planned {
    let mut planned = proposed.clone();
    let mut requires_replace = Vec::new();
    let mut diagnostics = Diagnostics::new();

    // First the values the user drives: defaults for what they left out.
    for a in &schema.attributes {
        if a.default.is_some() && attr(config, a.name).is_null() {
            set_attr(
                &mut planned,
                a.name,
                a.default.clone().unwrap_or(Value::Null),
            );
        }
    }

    // Computed values the user did not set: unknown on create; on an update, unknown only if something else
    // changes (a resource that changes may change its computed values too). UseStateForUnknown keeps stable ones.
    let changing = match prior {
        None => true,
        Some(prior) => {
            schema.attributes.iter().any(|a| {
                !(a.is_computed() && attr(config, a.name).is_null())
                    && attr(prior, a.name) != attr(&planned, a.name)
            }) || schema
                .blocks
                .iter()
                .any(|b| attr(prior, b.name) != attr(&planned, b.name))
        }
    };
    for a in &schema.attributes {
        if a.is_computed() && a.default.is_none() && attr(config, a.name).is_null() && changing {
            set_attr(&mut planned, a.name, Value::Unknown(Default::default()));
        }
    }

    for a in &schema.attributes {
        let path = AttributePath::attr(a.name);
        let mut resp = AttrPlanResponse {
            planned: attr(&planned, a.name).clone(),
            requires_replace: false,
            diagnostics: Diagnostics::new(),
        };
        let req = AttrPlanRequest {
            path: path.clone(),
            config: attr(config, a.name),
            state: prior.map(|p| attr(p, a.name)),
        };
        for m in &a.plan_modifiers {
            m.modify(&req, &mut resp);
        }
        if resp.requires_replace {
            requires_replace.push(path);
        }
        diagnostics.extend(resp.diagnostics);
        set_attr(&mut planned, a.name, resp.planned);
    }

    diagnostics.extend(validate_config(schema, config));
    Planned {
        planned,
        requires_replace,
        diagnostics,
    }
}

/// Runs every attribute validator on the known values of a config (or of a planned state at apply).
pub fn validate_config(schema: &Schema, config: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for a in &schema.attributes {
        validate_attr(
            a,
            AttributePath::attr(a.name),
            attr(config, a.name),
            &mut diags,
        );
    }
    for b in &schema.blocks {
        let block = attr(config, b.name);
        for a in &b.attributes {
            validate_attr(
                a,
                AttributePath::attr(b.name).then_attr(a.name),
                attr(block, a.name),
                &mut diags,
            );
        }
    }
    diags
}

fn validate_attr(a: &Attribute, path: AttributePath, v: &Value, diags: &mut Diagnostics) {
    // Null: nothing to check (required-ness is the client's job). Unknown: checked at apply.
    if v.is_null() || v.is_unknown() {
        return;
    }
    for validator in &a.validators {
        validator.validate(&path, v, diags);
    }
}

/// Attributes whose value is still unknown anywhere inside: at apply, the provider must have settled them.
pub fn unknown_paths(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_unknown(v, &mut String::new(), &mut out);
    out
}

fn collect_unknown(v: &Value, path: &mut String, out: &mut Vec<String>) {
    match v {
        Value::Unknown(_) => out.push(if path.is_empty() {
            "(whole value)".into()
        } else {
            path.clone()
        }),
        Value::Object(m) | Value::Map(m) => {
            for (k, item) in m {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                collect_unknown(item, path, out);
                path.truncate(len);
            }
        }
        Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                collect_unknown(item, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}
