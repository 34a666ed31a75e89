//! Schema-driven planning, the part every resource shares: computed attributes become unknown on create, defaults
//! fill what the user left out, plan modifiers adjust values and flag replacements, and validators check known
//! config values. Works on untyped values; the resource's typed `modify_plan` runs after this.

use tfplugin::diag::{AttributePath, Diagnostics, PathStep};
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
    // A write-only value is never in the prior state, so it says nothing of a change.
    let changing = match prior {
        None => true,
        Some(prior) => {
            schema.attributes.iter().filter(|a| !a.write_only).any(|a| {
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
    // A later modifier of the same attribute (UseStateForUnknown) may have put back the value an earlier
    // RequiresReplace saw unknown: keep only what core will keep, so the resource reads a true list.
    if let Some(prior) = prior {
        requires_replace = replacing(prior, &planned, requires_replace);
    }

    diagnostics.extend(validate_config(schema, config));
    Planned {
        planned,
        requires_replace,
        diagnostics,
    }
}

/// The paths of `requires_replace` that Terraform core keeps, by its own rule (`plan()` in
/// `node_resource_abstract_instance.go`): a path stays when its planned value is unknown or differs from the prior
/// one, and is dropped when both are known and equal. A path that leads nowhere reads as null, as core reads it.
pub fn replacing(
    prior: &Value,
    planned: &Value,
    requires_replace: Vec<AttributePath>,
) -> Vec<AttributePath> {
    requires_replace
        .into_iter()
        .filter(|path| !known_equal(value_at(prior, path), value_at(planned, path)))
        .collect()
}

/// The value `path` names inside `v`: null where a step finds nothing, and the unknown itself where an unknown
/// stands on the way (what is inside it is unknown too).
pub fn value_at<'a>(v: &'a Value, path: &AttributePath) -> &'a Value {
    let mut at = v;
    for step in &path.0 {
        if let Value::Dynamic(d) = at {
            at = &d.value;
        }
        at = match (at, step) {
            (Value::Unknown(_), _) => return at,
            (Value::Object(m) | Value::Map(m), PathStep::Attribute(k) | PathStep::Key(k)) => {
                m.get(k).unwrap_or(&NULL)
            }
            (Value::List(items) | Value::Tuple(items), PathStep::Index(i)) => usize::try_from(*i)
                .ok()
                .and_then(|i| items.get(i))
                .unwrap_or(&NULL),
            _ => &NULL,
        };
    }
    at
}

/// cty's `Equals` known to be true: no unknown on either side, and the same value, sets compared as sets.
fn known_equal(a: &Value, b: &Value) -> bool {
    a.is_fully_known() && b.is_fully_known() && same(a, b)
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Dynamic(x), _) => same(&x.value, b),
        (_, Value::Dynamic(y)) => same(a, &y.value),
        (Value::Set(x), Value::Set(y)) => {
            x.len() == y.len() && x.iter().all(|i| y.iter().any(|j| same(i, j)))
        }
        (Value::List(x) | Value::Tuple(x), Value::List(y) | Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| same(i, j))
        }
        (Value::Object(x) | Value::Map(x), Value::Object(y) | Value::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, i)| y.get(k).is_some_and(|j| same(i, j)))
        }
        _ => a == b,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planmodifier::{requires_replace, use_state_for_unknown};

    fn obj(attrs: &[(&str, Value)]) -> Value {
        Value::object(attrs.iter().cloned())
    }

    fn s(v: &str) -> Value {
        Value::string(v)
    }

    /// Core's rule, case by case: a path stays when its planned value is unknown (anywhere inside) or differs.
    #[test]
    fn a_path_stays_only_when_its_value_may_change() {
        let zone = AttributePath::attr("zone");
        let block_size = AttributePath::attr("disk").then_attr("size");
        let cases: [(&str, Value, Value, &AttributePath, bool); 9] = [
            (
                "the same string",
                obj(&[("zone", s("a"))]),
                obj(&[("zone", s("a"))]),
                &zone,
                false,
            ),
            (
                "another string",
                obj(&[("zone", s("a"))]),
                obj(&[("zone", s("b"))]),
                &zone,
                true,
            ),
            (
                "unknown now",
                obj(&[("zone", s("a"))]),
                obj(&[("zone", Value::unknown())]),
                &zone,
                true,
            ),
            (
                "unknown inside a list",
                obj(&[("zone", Value::list([s("a")]))]),
                obj(&[("zone", Value::list([Value::unknown()]))]),
                &zone,
                true,
            ),
            (
                "null on both sides",
                obj(&[]),
                obj(&[("zone", Value::Null)]),
                &zone,
                false,
            ),
            (
                "set from null",
                obj(&[]),
                obj(&[("zone", s("a"))]),
                &zone,
                true,
            ),
            (
                "inside an unknown block",
                obj(&[("disk", obj(&[("size", Value::number(10))]))]),
                obj(&[("disk", Value::unknown())]),
                &block_size,
                true,
            ),
            (
                "inside the same block",
                obj(&[("disk", obj(&[("size", Value::number(10))]))]),
                obj(&[("disk", obj(&[("size", Value::number(10))]))]),
                &block_size,
                false,
            ),
            (
                "a set in another order",
                obj(&[("zone", Value::Set(vec![s("a"), s("b")]))]),
                obj(&[("zone", Value::Set(vec![s("b"), s("a")]))]),
                &zone,
                false,
            ),
        ];
        for (case, prior, planned, path, stays) in cases {
            let kept = replacing(&prior, &planned, vec![path.clone()]);
            assert_eq!(!kept.is_empty(), stays, "{case}");
        }
    }

    /// RequiresReplace sees an unset computed attribute unknown (something else changes) before
    /// UseStateForUnknown puts its prior value back; the plan names it only when the user changed it.
    #[test]
    fn a_value_put_back_by_a_later_modifier_forces_no_replacement() {
        let schema = Schema::new("test")
            .attribute(
                Attribute::string("region")
                    .optional_computed()
                    .modifier(requires_replace())
                    .modifier(use_state_for_unknown()),
            )
            .attribute(Attribute::string("machine_type").optional());
        let prior = obj(&[("region", s("europe-west1")), ("machine_type", s("a"))]);
        // Terraform proposes the prior value of an unset computed attribute.
        let config = obj(&[("region", Value::Null), ("machine_type", s("b"))]);
        let proposed = obj(&[("region", s("europe-west1")), ("machine_type", s("b"))]);
        let kept = plan(&schema, &config, Some(&prior), &proposed);
        assert_eq!(kept.planned, proposed);
        assert!(
            kept.requires_replace.is_empty(),
            "{:?}",
            kept.requires_replace
        );

        let moved = obj(&[("region", s("us-east1")), ("machine_type", s("b"))]);
        let replaced = plan(&schema, &moved, Some(&prior), &moved);
        assert_eq!(replaced.requires_replace, [AttributePath::attr("region")]);
    }

    /// A write-only value is in the configuration and proposal of every plan but never in the prior state: it
    /// alone does not make the resource change, so a computed value with no modifier keeps its prior value.
    #[test]
    fn a_write_only_value_alone_changes_nothing() {
        let schema = Schema::new("test")
            .attribute(Attribute::string("name").optional())
            .attribute(Attribute::string("key_wo").optional().write_only())
            .attribute(Attribute::string("last_seen").computed());
        let prior = obj(&[
            ("name", s("a")),
            ("key_wo", Value::Null),
            ("last_seen", s("then")),
        ]);
        let config = obj(&[
            ("name", s("a")),
            ("key_wo", s("secret")),
            ("last_seen", Value::Null),
        ]);
        let proposed = obj(&[
            ("name", s("a")),
            ("key_wo", s("secret")),
            ("last_seen", s("then")),
        ]);
        let kept = plan(&schema, &config, Some(&prior), &proposed);
        assert_eq!(attr(&kept.planned, "last_seen"), &s("then"));
        let renamed = |last_seen: Value| {
            obj(&[
                ("name", s("b")),
                ("key_wo", s("secret")),
                ("last_seen", last_seen),
            ])
        };
        let changed = plan(
            &schema,
            &renamed(Value::Null),
            Some(&prior),
            &renamed(s("then")),
        );
        assert!(attr(&changed.planned, "last_seen").is_unknown());
    }
}
