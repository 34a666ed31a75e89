//! The `DataSource` trait: a read-only object whose whole value is computed from its configuration when Terraform
//! reads it, and stored in state like a resource's. The framework decodes the configuration, runs the schema's
//! validators, calls `read` and encodes the result.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Serialize, de::DeserializeOwned};
use tfplugin::diag::Diagnostics;
use tfplugin::value::Value;

use crate::erased::{typed_model, untyped_value};
use crate::plan::validate_config;
use crate::schema::Schema;

#[async_trait]
pub trait DataSource: Send + Sync + 'static {
    /// Mirrors [`DataSource::schema`] one-to-one, as a resource's model does.
    type Model: Serialize + DeserializeOwned + Send + Sync;

    /// The data source type name, e.g. `ha_admin_credentials`.
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;

    /// Checks across attributes; attribute validators in the schema have already run on known values.
    fn validate(&self, _config: &Self::Model, _diags: &mut Diagnostics) {}

    /// The object: the configuration with every computed attribute filled in. `None` on error.
    async fn read(&self, config: Self::Model, diags: &mut Diagnostics) -> Option<Self::Model>;
}

/// A data source behind type erasure, as the server holds it.
#[async_trait]
pub trait AnyDataSource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> &Schema;
    fn validate(&self, config: &Value) -> Diagnostics;
    async fn read(&self, config: &Value) -> (Option<Value>, Diagnostics);
}

pub type DataSourceHandle = Arc<dyn AnyDataSource>;

pub fn data_source<D: DataSource>(d: D) -> DataSourceHandle {
    let schema = d.schema();
    Arc::new(TypedDataSource { d, schema })
}

struct TypedDataSource<D: DataSource> {
    d: D,
    schema: Schema,
}

#[async_trait]
impl<D: DataSource> AnyDataSource for TypedDataSource<D> {
    fn type_name(&self) -> &'static str {
        self.d.type_name()
    }

    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut diags = validate_config(&self.schema, config);
        let name = self.d.type_name();
        if let Some(m) = typed_model::<D::Model>(name, config, "configuration", &mut diags) {
            self.d.validate(&m, &mut diags);
        }
        diags
    }

    async fn read(&self, config: &Value) -> (Option<Value>, Diagnostics) {
        // Values unknown at validate are known now: check them with the same messages.
        let mut diags = self.validate(config);
        if diags.has_error() {
            return (None, diags);
        }
        let name = self.d.type_name();
        let Some(m) = typed_model::<D::Model>(name, config, "configuration", &mut diags) else {
            return (None, diags);
        };
        let out = self.d.read(m, &mut diags).await;
        let v = out.and_then(|m| untyped_value(name, &m, "result", &mut diags));
        (v, diags)
    }
}
