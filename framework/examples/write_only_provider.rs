//! A provider with one write-only attribute, for `acceptance-tests/tests/write_only.rs`: the framework's write-only
//! support judged by real Terraform and OpenTofu. `ha_sealed` takes a secret in `secret_wo` and records only its
//! length, so a test can see that the resource read the value while no plan or state holds it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tfplugin::diag::Diagnostics;
use tfplugin_framework::erased::ResourceHandle;
use tfplugin_framework::planmodifier::use_state_for_unknown;
use tfplugin_framework::{
    Attribute, FrameworkServer, PlanChange, Provider, Resource, Schema, Val, resource,
};

#[derive(Deserialize)]
struct NoConfig {}

struct Sealing;

#[async_trait]
impl Provider for Sealing {
    type Config = NoConfig;
    fn schema(&self) -> Schema {
        Schema::new("A provider with a write-only attribute.")
    }
    fn resources(&self) -> Vec<ResourceHandle> {
        vec![resource(Sealed)]
    }
    async fn configure(&self, _: NoConfig, _: &str, _: &mut Diagnostics) {}
}

#[derive(Serialize, Deserialize, Clone)]
struct Model {
    id: Val<String>,
    name: Val<String>,
    secret_wo: Val<String>,
    secret_length: Val<i64>,
}

struct Sealed;

fn length(secret: &Val<String>) -> Val<i64> {
    match secret {
        Val::Unknown => Val::Unknown,
        v => v.known().map_or(Val::Null, |s| Val::Known(s.len() as i64)),
    }
}

#[async_trait]
impl Resource for Sealed {
    type Model = Model;
    fn type_name(&self) -> &'static str {
        "ha_sealed"
    }
    fn schema(&self) -> Schema {
        Schema::new("Keeps the length of a secret it is given, never the secret.")
            .attribute(
                Attribute::string("id")
                    .computed()
                    .modifier(use_state_for_unknown()),
            )
            .attribute(Attribute::string("name").required())
            .attribute(
                Attribute::string("secret_wo")
                    .optional()
                    .sensitive()
                    .write_only(),
            )
            .attribute(Attribute::number("secret_length").computed())
    }
    async fn modify_plan(&self, change: PlanChange<'_, Model>, _: &mut Diagnostics) {
        change.planned.secret_length = length(&change.config.secret_wo);
    }
    async fn create(&self, mut m: Model, _: &mut Diagnostics) -> Option<Model> {
        m.id = m.name.clone();
        m.secret_length = length(&m.secret_wo);
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

fn main() -> std::process::ExitCode {
    tfplugin::serve(FrameworkServer::new(Sealing))
}
