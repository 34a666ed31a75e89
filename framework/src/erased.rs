//! Type erasure: the server holds resources as `dyn AnyResource` working on untyped values; `Typed<R>` converts to
//! and from the resource's model around each call.

use async_trait::async_trait;
use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::types::{IdentityAttribute, IdentitySchema};
use tfplugin::value::{Type, Value};

use crate::model::{from_value, to_value};
use crate::plan::{self, unknown_paths};
use crate::resource::{PlanChange, Resource};
use crate::schema::Schema;
use crate::write_only;

#[async_trait]
pub trait AnyResource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> &Schema;
    fn validate(&self, config: &Value) -> Diagnostics;
    /// A stored state's JSON, written under schema `version`, in the current schema's shape (see
    /// [`Resource::upgrade_state`]), or the sentence that says why it cannot be.
    fn upgrade(&self, version: i64, json: &[u8]) -> Result<Vec<u8>, String>;
    async fn plan(&self, config: &Value, prior: Option<&Value>, proposed: &Value) -> plan::Planned;
    async fn plan_destroy(&self, prior: &Value) -> Diagnostics;
    async fn apply(
        &self,
        config: &Value,
        prior: Option<Value>,
        planned: Option<Value>,
    ) -> (Option<Value>, Diagnostics);
    async fn read(&self, state: Value) -> (Option<Value>, Diagnostics);
    async fn import(&self, id: &str) -> (Option<Value>, Diagnostics);
    /// The identity schema, if the type has one; its value type is an object of strings.
    fn identity_schema(&self) -> Option<IdentitySchema>;
    /// The identity of an object (state or plan), when the type has one and it is known.
    fn identity_of(&self, state: &Value) -> Option<Value>;
    /// The import id for an identity value, or a sentence saying what is missing.
    fn import_id(&self, identity: &Value) -> Result<String, String>;
    /// The list resource's config schema, if the type can be listed.
    fn list_config_schema(&self) -> Option<&Schema>;
    /// The objects a list config selects: (state, display name) each.
    async fn list(&self, config: &Value) -> (Vec<(Value, String)>, Diagnostics);
}

/// The object type of an identity: every attribute a string.
pub fn identity_type(schema: &IdentitySchema) -> Type {
    Type::object(
        schema
            .attributes
            .iter()
            .map(|a| (a.name.as_str(), Type::String)),
    )
}

/// A resource handle the provider lists; build one with [`resource`].
pub type ResourceHandle = std::sync::Arc<dyn AnyResource>;

pub fn resource<R: Resource>(r: R) -> ResourceHandle {
    let schema = r.schema();
    let list_schema = r.list_config_schema();
    std::sync::Arc::new(Typed {
        r,
        schema,
        list_schema,
    })
}

struct Typed<R: Resource> {
    r: R,
    schema: Schema,
    list_schema: Option<Schema>,
}

/// A value read into a model (resources, data sources and ephemeral resources share it).
pub(crate) fn typed_model<M: serde::de::DeserializeOwned>(
    type_name: &str,
    v: &Value,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<M> {
    match from_value::<M>(v) {
        Ok(m) => Some(m),
        Err(e) => {
            // A number the model's type cannot hold is the user's to fix, at its attribute; plan reads the
            // config and the planned value, and the identical diagnostic is kept once.
            diags.push(e.diagnostic(&format!("Could not read the {what} of {type_name}")));
            None
        }
    }
}

/// A model written back as a value; failing is a provider bug.
pub(crate) fn untyped_value<M: serde::Serialize>(
    type_name: &str,
    m: &M,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<Value> {
    match to_value(m) {
        Ok(v) => Some(v),
        Err(e) => {
            diags.error(
                format!("Could not write the {what} of {type_name}"),
                format!("{e}. This is a bug in the provider; please report it."),
            );
            None
        }
    }
}

impl<R: Resource> Typed<R> {
    fn model(&self, v: &Value, what: &str, diags: &mut Diagnostics) -> Option<R::Model> {
        typed_model(self.r.type_name(), v, what, diags)
    }

    fn value(&self, m: &R::Model, what: &str, diags: &mut Diagnostics) -> Option<Value> {
        untyped_value(self.r.type_name(), m, what, diags)
    }
}

#[async_trait]
impl<R: Resource> AnyResource for Typed<R> {
    fn type_name(&self) -> &'static str {
        self.r.type_name()
    }

    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn upgrade(&self, version: i64, json: &[u8]) -> Result<Vec<u8>, String> {
        let current = self.schema.version;
        if version == current {
            return Ok(json.to_vec());
        }
        if version > current {
            return Err(format!(
                "This state of {} was written by a newer release of the provider (schema version {version}; this \
                 release reads up to {current}). Use that release or a newer one.",
                self.r.type_name()
            ));
        }
        let mut state: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(json)
            .map_err(|e| format!("the stored state is not a JSON object: {e}"))?;
        for from in version..current {
            state = self.r.upgrade_state(from, state)?;
        }
        serde_json::to_vec(&state).map_err(|e| e.to_string())
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut diags = plan::validate_config(&self.schema, config);
        if let Some(m) = self.model(config, "configuration", &mut diags) {
            self.r.validate(&m, &mut diags);
        }
        diags
    }

    async fn plan(&self, config: &Value, prior: Option<&Value>, proposed: &Value) -> plan::Planned {
        let mut out = plan::plan(&self.schema, config, prior, proposed);
        let diags = &mut out.diagnostics;
        let (Some(cfg), Some(mut planned)) = (
            self.model(config, "configuration", diags),
            self.model(&out.planned, "plan", diags),
        ) else {
            return out;
        };
        let prior_model = match prior {
            Some(p) => match self.model(p, "prior state", diags) {
                Some(m) => Some(m),
                None => return out,
            },
            None => None,
        };
        self.r.validate(&cfg, diags);
        let change = PlanChange {
            config: &cfg,
            prior: prior_model.as_ref(),
            planned: &mut planned,
            requires_replace: &mut out.requires_replace,
        };
        self.r.modify_plan(change, diags).await;
        if let Some(v) = self.value(&planned, "plan", diags) {
            out.planned = keep_configured(&self.schema, &out.planned, v);
        }
        // Terraform requires a write-only attribute null in every plan; the resource read it from the config.
        out.planned = write_only::strip(&self.schema, std::mem::take(&mut out.planned));
        // The resource may have settled a value it found unknown: send the list core itself would keep.
        if let Some(prior) = prior {
            out.requires_replace = plan::replacing(
                prior,
                &out.planned,
                std::mem::take(&mut out.requires_replace),
            );
        }
        dedup_paths(&mut out.requires_replace);
        out
    }

    async fn plan_destroy(&self, prior: &Value) -> Diagnostics {
        let mut diags = Diagnostics::new();
        if let Some(m) = self.model(prior, "prior state", &mut diags) {
            self.r.plan_destroy(&m, &mut diags).await;
        }
        diags
    }

    async fn apply(
        &self,
        config: &Value,
        prior: Option<Value>,
        planned: Option<Value>,
    ) -> (Option<Value>, Diagnostics) {
        let mut diags = Diagnostics::new();
        let prior_m = match &prior {
            Some(p) => match self.model(p, "prior state", &mut diags) {
                Some(m) => Some(m),
                None => return (prior, diags),
            },
            None => None,
        };
        let Some(planned) = planned else {
            // Destroy.
            if let Some(p) = prior_m {
                self.r.delete(p, &mut diags).await;
            }
            return (if diags.has_error() { prior } else { None }, diags);
        };
        // What was unknown at plan time is known now: validate it with the same messages as at plan.
        diags.extend(self.validate(config));
        if diags.has_error() {
            return (prior, diags);
        }
        // The plan holds no write-only value: the resource gets this apply's from its configuration.
        let planned = write_only::from_config(&self.schema, config, planned);
        let Some(planned_m) = self.model(&planned, "plan", &mut diags) else {
            return (prior, diags);
        };
        let result = match prior_m {
            None => self.r.create(planned_m, &mut diags).await,
            Some(p) => self.r.update(p, planned_m, &mut diags).await,
        };
        let state = result
            .and_then(|m| self.value(&m, "new state", &mut diags))
            .map(|v| write_only::strip(&self.schema, v));
        match &state {
            None if !diags.has_error() => diags.error(
                format!("{} returned no state", self.r.type_name()),
                "The apply reported success but returned no state. This is a bug in the provider; please report it.",
            ),
            Some(v) => {
                let unknown = unknown_paths(v);
                if !unknown.is_empty() {
                    diags.error(
                        format!("{} left values unknown after apply", self.r.type_name()),
                        format!("Still unknown: {}. This is a bug in the provider; please report it.", unknown.join(", ")),
                    );
                }
            }
            None => {}
        }
        (state.or(prior), diags)
    }

    async fn read(&self, state: Value) -> (Option<Value>, Diagnostics) {
        let mut diags = Diagnostics::new();
        let Some(m) = self.model(&state, "state", &mut diags) else {
            return (Some(state), diags);
        };
        let refreshed = self.r.read(m, &mut diags).await;
        match refreshed {
            Some(m) => {
                let v = self.value(&m, "state", &mut diags);
                let v = v.map(|v| write_only::strip(&self.schema, v));
                (v.or(Some(state)), diags)
            }
            None => (None, diags),
        }
    }

    fn identity_schema(&self) -> Option<IdentitySchema> {
        let attrs = self.r.identity_schema()?;
        Some(IdentitySchema {
            version: 0,
            attributes: attrs
                .iter()
                .map(|(name, description)| IdentityAttribute {
                    name: name.to_string(),
                    ty: Type::String,
                    required_for_import: true,
                    optional_for_import: false,
                    description: description.to_string(),
                })
                .collect(),
        })
    }

    fn identity_of(&self, state: &Value) -> Option<Value> {
        let names = self.r.identity_schema()?;
        let m = from_value::<R::Model>(state).ok()?;
        let values = self.r.identity(&m)?;
        Some(Value::Object(
            names
                .iter()
                .zip(values)
                .map(|((n, _), v)| (n.to_string(), Value::String(v)))
                .collect(),
        ))
    }

    fn import_id(&self, identity: &Value) -> Result<String, String> {
        let names = self
            .r
            .identity_schema()
            .ok_or("this resource type has no identity")?;
        let values = names
            .iter()
            .map(|(n, _)| match plan::attr(identity, n) {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                _ => Err(format!("the identity has no {n}")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.r.import_id(&values))
    }

    fn list_config_schema(&self) -> Option<&Schema> {
        self.list_schema.as_ref()
    }

    async fn list(&self, config: &Value) -> (Vec<(Value, String)>, Diagnostics) {
        let mut diags = Diagnostics::new();
        let found = self.r.list(config, &mut diags).await;
        let listed = found
            .iter()
            .filter_map(|m| {
                let v = self.value(m, "listed state", &mut diags)?;
                Some((v, self.r.display_name(m)))
            })
            .collect();
        (listed, diags)
    }

    async fn import(&self, id: &str) -> (Option<Value>, Diagnostics) {
        let mut diags = Diagnostics::new();
        let m = self.r.import(id, &mut diags).await;
        let v = m.and_then(|m| self.value(&m, "imported state", &mut diags));
        (v.map(|v| write_only::strip(&self.schema, v)), diags)
    }
}

/// Terraform refuses a plan in which the provider changed a value the user configures (a non-computed attribute or
/// a block). A resource's `modify_plan` only derives computed values, so the framework's plan is kept for the rest.
/// This also keeps partially-unknown collections intact when a model can only say "unknown" for them.
fn keep_configured(schema: &Schema, framework_plan: &Value, resource_plan: Value) -> Value {
    let (Value::Object(fw), Value::Object(mut out)) = (framework_plan, resource_plan) else {
        return framework_plan.clone();
    };
    let user_owned = schema
        .attributes
        .iter()
        .filter(|a| !a.is_computed())
        .map(|a| a.name)
        .chain(schema.blocks.iter().map(|b| b.name));
    for name in user_owned {
        if let Some(v) = fw.get(name) {
            out.insert(name.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

fn dedup_paths(paths: &mut Vec<AttributePath>) {
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Val;
    use crate::schema::Attribute;

    #[derive(serde::Serialize, serde::Deserialize, Clone)]
    struct Model {
        name: Val<String>,
        generation: Val<String>,
    }

    /// Every apply fails; an update returns no state.
    struct Failing;

    #[async_trait]
    impl Resource for Failing {
        type Model = Model;
        fn type_name(&self) -> &'static str {
            "test_failing"
        }
        fn schema(&self) -> Schema {
            Schema::new("A resource whose applies fail.")
                .attribute(Attribute::string("name").required())
                .attribute(Attribute::string("generation").required())
        }
        async fn create(&self, _: Model, diags: &mut Diagnostics) -> Option<Model> {
            diags.error("create failed", "before anything was made");
            None
        }
        async fn read(&self, state: Model, _: &mut Diagnostics) -> Option<Model> {
            Some(state)
        }
        async fn update(&self, _: Model, _: Model, diags: &mut Diagnostics) -> Option<Model> {
            diags.error("update failed", "before anything changed");
            None
        }
        async fn delete(&self, _: Model, _: &mut Diagnostics) {}
    }

    fn obj(generation: &str) -> Value {
        Value::object([
            ("name", Value::String("r".into())),
            ("generation", Value::String(generation.into())),
        ])
    }

    /// A resource relies on this (a replica's rejoin that could not take the cluster's lock): the prior state,
    /// not nothing, so Terraform keeps the object and the next plan proposes the same change again.
    #[tokio::test]
    async fn an_update_that_returns_no_state_keeps_the_prior_one() {
        let r = resource(Failing);
        let (state, diags) = r.apply(&obj("2"), Some(obj("1")), Some(obj("2"))).await;
        assert!(diags.has_error());
        assert_eq!(state, Some(obj("1")));
    }

    #[tokio::test]
    async fn a_create_that_returns_no_state_saves_nothing() {
        let r = resource(Failing);
        let (state, diags) = r.apply(&obj("1"), None, Some(obj("1"))).await;
        assert!(diags.has_error());
        assert_eq!(state, None);
    }

    /// Schema version 2 of a resource whose version 0 had `secret`, dropped in 1, and whose version 1 called
    /// `generation` `gen`.
    struct Renamed;

    #[async_trait]
    impl Resource for Renamed {
        type Model = Model;
        fn type_name(&self) -> &'static str {
            "test_renamed"
        }
        fn schema(&self) -> Schema {
            let mut s = Failing.schema();
            s.version = 2;
            s
        }
        fn upgrade_state(
            &self,
            version: i64,
            mut state: serde_json::Map<String, serde_json::Value>,
        ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
            match version {
                0 => {
                    state.remove("secret");
                }
                1 => {
                    let g = state.remove("gen").ok_or("no gen")?;
                    state.insert("generation".into(), g);
                }
                _ => unreachable!("the framework asks only for older versions"),
            }
            Ok(state)
        }
        async fn create(&self, m: Model, _: &mut Diagnostics) -> Option<Model> {
            Some(m)
        }
        async fn read(&self, state: Model, _: &mut Diagnostics) -> Option<Model> {
            Some(state)
        }
        async fn update(&self, _: Model, m: Model, _: &mut Diagnostics) -> Option<Model> {
            Some(m)
        }
        async fn delete(&self, _: Model, _: &mut Diagnostics) {}
    }

    fn json(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_state_is_upgraded_one_version_at_a_time_and_a_newer_one_is_refused() {
        let r = resource(Renamed);
        let current = json(serde_json::json!({"name": "r", "generation": "1"}));
        let upgraded = |version, state| {
            r.upgrade(version, &json(state))
                .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap())
        };
        let want = serde_json::json!({"name": "r", "generation": "1"});
        assert_eq!(
            upgraded(
                0,
                serde_json::json!({"name": "r", "gen": "1", "secret": "k"})
            ),
            Ok(want.clone())
        );
        assert_eq!(
            upgraded(1, serde_json::json!({"name": "r", "gen": "1"})),
            Ok(want)
        );
        assert_eq!(
            r.upgrade(2, &current),
            Ok(current.clone()),
            "current: as stored"
        );
        let newer = r.upgrade(3, &current).unwrap_err();
        assert!(
            newer.contains("newer release") && newer.contains("schema version 3"),
            "{newer}"
        );
        // A resource that never changed its schema has nothing older to read.
        let never = resource(Failing).upgrade(-1, &current);
        assert!(never.is_err(), "{never:?}");
    }
}
