//! The `Resource` trait: what a resource implements. The framework does the RPC plumbing: decoding, schema-driven
//! planning (computed values, defaults, plan modifiers, validators), encoding, and protocol rules such as "a
//! create must return a state".
//!
//! Models are serde structs that mirror the schema one-to-one, with [`crate::model::Val`] for attributes that may be
//! null or unknown.

use async_trait::async_trait;
use serde::{Serialize, de::DeserializeOwned};
use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use crate::model::to_value;
use crate::schema::Schema;

/// A planned change as the resource sees it in [`Resource::modify_plan`].
pub struct PlanChange<'a, M> {
    /// The configuration (null where unset, unknown where not yet known).
    pub config: &'a M,
    /// The prior state; `None` when creating.
    pub prior: Option<&'a M>,
    /// The plan so far (defaults, computed unknowns and modifiers applied). The resource may adjust it.
    pub planned: &'a mut M,
    /// Attributes whose change forces a replacement; the resource may add some.
    pub requires_replace: &'a mut Vec<AttributePath>,
}

/// Whether a plan replaces the object, as Terraform core will judge it: some path of `requires_replace` whose
/// value in `planned` is unknown or differs from `prior` ([`crate::plan::replacing`]). For a resource's
/// `modify_plan`, which may have settled values the framework saw unknown.
pub fn replaces<M: Serialize>(prior: &M, planned: &M, requires_replace: &[AttributePath]) -> bool {
    match (to_value(prior), to_value(planned)) {
        (Ok(prior), Ok(planned)) => {
            !crate::plan::replacing(&prior, &planned, requires_replace.to_vec()).is_empty()
        }
        // A model that cannot be written is reported when the plan is; until then the list is all there is.
        _ => !requires_replace.is_empty(),
    }
}

/// What a failed or partial apply returns: the state that exists now (saved so the next apply can finish the job),
/// or `None` when nothing exists. For an update, `None` keeps the prior state (`erased` tests it).
pub type ApplyResult<M> = Option<M>;

#[async_trait]
pub trait Resource: Send + Sync + 'static {
    type Model: Serialize + DeserializeOwned + Clone + Send + Sync;

    /// The resource type name, e.g. `ha_master_replica`.
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;

    /// Checks across attributes; attribute validators in the schema have already run on known values. Values
    /// still unknown are checked again at apply.
    fn validate(&self, _config: &Self::Model, _diags: &mut Diagnostics) {}

    /// Adjusts a plan: derived values, replacements, warnings. Called for creates and updates, not destroys.
    async fn modify_plan(&self, _change: PlanChange<'_, Self::Model>, _diags: &mut Diagnostics) {}

    /// Checks a planned destroy (e.g. a quorum guard). Errors refuse the plan.
    async fn plan_destroy(&self, _prior: &Self::Model, _diags: &mut Diagnostics) {}

    async fn create(
        &self,
        planned: Self::Model,
        diags: &mut Diagnostics,
    ) -> ApplyResult<Self::Model>;
    /// Refreshes state from the world. `None` means the object is gone, so the plan proposes to create it again.
    async fn read(&self, state: Self::Model, diags: &mut Diagnostics) -> Option<Self::Model>;
    async fn update(
        &self,
        prior: Self::Model,
        planned: Self::Model,
        diags: &mut Diagnostics,
    ) -> ApplyResult<Self::Model>;
    async fn delete(&self, prior: Self::Model, diags: &mut Diagnostics);

    /// The resource identity's attributes (Terraform 1.12+) as (name, description): strings that name the remote
    /// object, all required to import by identity. `None` (the default): the type has no identity.
    fn identity_schema(&self) -> Option<&'static [(&'static str, &'static str)]> {
        None
    }

    /// Rewrites a state stored under schema version `version`, older than [`Schema::version`], into the shape of
    /// `version + 1`, as JSON; the framework calls it once per version up to the current one. The default knows
    /// no older version. An `Err` is the sentence the user reads.
    fn upgrade_state(
        &self,
        version: i64,
        _state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        Err(format!(
            "{} has no state of schema version {version} to upgrade from",
            self.type_name()
        ))
    }

    /// The identity of an object, values in the order of [`Resource::identity_schema`]; `None` while not known.
    fn identity(&self, _model: &Self::Model) -> Option<Vec<String>> {
        None
    }

    /// The import id an identity stands for (`import { identity = { … } }`), values in schema order.
    fn import_id(&self, identity: &[String]) -> String {
        identity.join("/")
    }

    /// The `config` block of this type's list resource (`terraform query`, Terraform 1.14+). `None` (the default):
    /// the type cannot be listed.
    fn list_config_schema(&self) -> Option<Schema> {
        None
    }

    /// The existing objects a list block's `config` selects (decoded against [`Resource::list_config_schema`]),
    /// as states; the framework reports each with its identity.
    async fn list(&self, _config: &Value, _diags: &mut Diagnostics) -> Vec<Self::Model> {
        Vec::new()
    }

    /// How `terraform query` names a found object. The default: its identity values joined by `/`.
    fn display_name(&self, model: &Self::Model) -> String {
        self.identity(model)
            .map(|v| v.join("/"))
            .unwrap_or_default()
    }

    /// Builds a state from an import id. The default says import is not supported.
    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Self::Model> {
        diags.error(
            format!("{} cannot be imported", self.type_name()),
            format!("Import of id {id:?} is not supported for this resource type."),
        );
        None
    }
}
