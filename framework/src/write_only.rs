//! Write-only attributes (Terraform 1.11+): a value the user sets in configuration, that the resource reads at
//! plan (from the configuration) and at apply, and that is never in a plan or a state. Terraform requires it null
//! in both and keeps it out of state files, saved plans and their backups, which `sensitive` alone does not.
//!
//! The framework does the protocol's part so a resource cannot get it wrong: every plan and state it sends has
//! the write-only attributes null; the planned model a resource's create or update receives carries them from
//! the configuration of that apply; and a client that does not say it supports them (OpenTofu 1.6, Terraform
//! before 1.11) is refused at validate when one is set, naming the attribute: such a client would store the value
//! in state as an ordinary attribute.

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use crate::plan::attr;
use crate::schema::Schema;

/// Every write-only attribute's path and name in the object's shape: top-level, then inside single blocks.
fn paths(schema: &Schema) -> impl Iterator<Item = (Option<&'static str>, &'static str)> + '_ {
    let top = schema
        .attributes
        .iter()
        .filter(|a| a.write_only)
        .map(|a| (None, a.name));
    let nested = schema.blocks.iter().flat_map(|b| {
        b.attributes
            .iter()
            .filter(|a| a.write_only)
            .map(move |a| (Some(b.name), a.name))
    });
    top.chain(nested)
}

/// Sets the value at `block.name` (or `name`) of an object, where the object (and the block) is there.
fn set(v: &mut Value, block: Option<&str>, name: &str, to: Value) {
    let target = match block {
        None => Some(v),
        Some(b) => match v {
            Value::Object(m) => m.get_mut(b),
            _ => None,
        },
    };
    if let Some(Value::Object(m)) = target
        && m.contains_key(name)
    {
        m.insert(name.to_string(), to);
    }
}

/// `v` with every write-only attribute null: what a plan or a state may hold.
pub fn strip(schema: &Schema, mut v: Value) -> Value {
    for (block, name) in paths(schema) {
        set(&mut v, block, name, Value::Null);
    }
    v
}

/// A planned object with the write-only values of `config` put in, for the resource's create or update.
pub fn from_config(schema: &Schema, config: &Value, mut planned: Value) -> Value {
    for (block, name) in paths(schema) {
        let configured = match block {
            None => attr(config, name),
            Some(b) => attr(attr(config, b), name),
        };
        set(&mut planned, block, name, configured.clone());
    }
    planned
}

/// An error at each write-only attribute set in `config`, for a client that cannot keep it out of state.
pub fn refused(schema: &Schema, config: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (block, name) in paths(schema) {
        let (value, path) = match block {
            None => (attr(config, name), AttributePath::attr(name)),
            Some(b) => (
                attr(attr(config, b), name),
                AttributePath::attr(b).then_attr(name),
            ),
        };
        if !value.is_null() {
            diags.attr_error(
                path,
                format!("`{name}` is write-only, and this client cannot keep it out of state"),
                format!(
                    "A write-only attribute is read at plan and apply and never stored, which needs Terraform \
                     1.11 or later (or an OpenTofu that supports write-only attributes). This client did not \
                     say it supports them, so it would save `{name}` in the state file in plain text. Run this \
                     configuration with such a client, or leave `{name}` unset."
                ),
            );
        }
    }
    diags
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::*;
    use crate::model::Val;
    use crate::resource::{PlanChange, Resource};
    use crate::schema::Attribute;
    use crate::{SingleBlock, resource};

    #[derive(serde::Serialize, serde::Deserialize, Clone, Default)]
    struct Model {
        name: Val<String>,
        key: Val<String>,
        /// What the resource derives from the key: shows it saw the value.
        key_length: Val<i64>,
        options: Val<Options>,
    }

    #[derive(serde::Serialize, serde::Deserialize, Clone, Default)]
    struct Options {
        token: Val<String>,
    }

    /// Records the length of the write-only `key` it is given, at plan and at apply.
    struct Keyed;

    #[async_trait]
    impl Resource for Keyed {
        type Model = Model;
        fn type_name(&self) -> &'static str {
            "test_keyed"
        }
        fn schema(&self) -> Schema {
            Schema::new("A resource with write-only attributes.")
                .attribute(Attribute::string("name").required())
                .attribute(Attribute::string("key").optional().sensitive().write_only())
                .attribute(Attribute::number("key_length").computed())
                .block(SingleBlock {
                    name: "options",
                    description: String::new(),
                    attributes: vec![Attribute::string("token").optional().write_only()],
                })
        }
        async fn modify_plan(&self, change: PlanChange<'_, Model>, _: &mut Diagnostics) {
            change.planned.key_length = length(&change.config.key);
        }
        async fn create(&self, mut m: Model, _: &mut Diagnostics) -> Option<Model> {
            m.key_length = length(&m.key);
            Some(m)
        }
        async fn read(&self, state: Model, _: &mut Diagnostics) -> Option<Model> {
            Some(state)
        }
        async fn update(&self, _: Model, m: Model, d: &mut Diagnostics) -> Option<Model> {
            self.create(m, d).await
        }
        async fn delete(&self, _: Model, _: &mut Diagnostics) {}
    }

    fn length(v: &Val<String>) -> Val<i64> {
        v.known().map_or(Val::Null, |k| Val::Known(k.len() as i64))
    }

    fn object(key: Value, token: Value, key_length: Value) -> Value {
        Value::object([
            ("name", Value::string("r")),
            ("key", key),
            ("key_length", key_length),
            ("options", Value::object([("token", token)])),
        ])
    }

    #[tokio::test]
    async fn a_write_only_value_is_read_at_plan_and_apply_and_never_planned_or_stored() {
        let r = resource(Keyed);
        let config = object(Value::string("secret"), Value::string("tok"), Value::Null);
        // Terraform proposes the configuration; the plan must hold neither value, only what was derived.
        let planned = r.plan(&config, None, &config).await;
        assert!(
            !planned.diagnostics.has_error(),
            "{:?}",
            planned.diagnostics
        );
        assert_eq!(
            planned.planned,
            object(Value::Null, Value::Null, Value::number(6))
        );

        let (state, diags) = r.apply(&config, None, Some(planned.planned)).await;
        assert!(!diags.has_error(), "{diags:?}");
        assert_eq!(
            state,
            Some(object(Value::Null, Value::Null, Value::number(6))),
            "the create saw the key, and the state holds neither value"
        );
    }

    #[test]
    fn a_client_without_write_only_support_is_refused_each_value_it_would_store() {
        let schema = Keyed.schema();
        let at = |config: &Value| -> Vec<String> {
            refused(&schema, config)
                .iter()
                .filter_map(|d| d.attribute.as_ref().map(|p| p.to_string()))
                .collect()
        };
        let both = object(Value::string("s"), Value::string("t"), Value::Null);
        assert_eq!(at(&both), ["key", "options.token"]);
        let neither = object(Value::Null, Value::Null, Value::Null);
        assert_eq!(at(&neither), Vec::<String>::new());
        let diags = refused(&schema, &both);
        let first = diags.iter().next().unwrap();
        assert!(
            first.summary.contains("`key` is write-only")
                && first.detail.contains("Terraform 1.11"),
            "{first:?}"
        );
    }

    #[test]
    fn the_wire_schema_marks_write_only_attributes() {
        let wire = Keyed.schema().to_wire();
        let key = wire
            .block
            .attributes
            .iter()
            .find(|a| a.name == "key")
            .unwrap();
        assert!(key.write_only && key.sensitive);
        let name = wire
            .block
            .attributes
            .iter()
            .find(|a| a.name == "name")
            .unwrap();
        assert!(!name.write_only);
    }
}
