//! The `EphemeralResource` trait (Terraform 1.10+): a value made for one Terraform run, handed to the
//! configuration and never written to the plan or the state. Terraform opens it when a run needs it, may renew
//! it while the run lasts, and closes it at the end.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use serde::{Serialize, de::DeserializeOwned};
use tfplugin::diag::Diagnostics;
use tfplugin::value::Value;

use crate::erased::{typed_model, untyped_value};
use crate::plan::validate_config;
use crate::schema::Schema;

/// What an open returns.
pub struct Opened<M> {
    /// The configuration with every computed attribute filled in.
    pub result: M,
    /// When Terraform should call [`EphemeralResource::renew`] if it still holds the value; `None`: never.
    pub renew_at: Option<SystemTime>,
    /// Opaque bytes Terraform hands back to renew and close (e.g. a lease id). Never secret: Terraform may log it.
    pub private: Option<Vec<u8>>,
}

/// What a renewal returns: the next renewal time and the private bytes to keep.
pub struct Renewed {
    pub renew_at: Option<SystemTime>,
    pub private: Option<Vec<u8>>,
}

#[async_trait]
pub trait EphemeralResource: Send + Sync + 'static {
    /// Mirrors [`EphemeralResource::schema`] one-to-one.
    type Model: Serialize + DeserializeOwned + Send + Sync;

    /// The ephemeral resource type name, e.g. `ha_admin_credentials`.
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;

    /// Checks across attributes; attribute validators in the schema have already run on known values.
    fn validate(&self, _config: &Self::Model, _diags: &mut Diagnostics) {}

    /// Makes the value. `None` on error.
    async fn open(
        &self,
        config: Self::Model,
        diags: &mut Diagnostics,
    ) -> Option<Opened<Self::Model>>;

    /// Extends what `open` made. The default has nothing to extend: it asks for no further renewal.
    async fn renew(&self, _private: Option<Vec<u8>>, _diags: &mut Diagnostics) -> Renewed {
        Renewed {
            renew_at: None,
            private: None,
        }
    }

    /// Releases what `open` made. The default has nothing to release.
    async fn close(&self, _private: Option<Vec<u8>>, _diags: &mut Diagnostics) {}
}

/// An ephemeral resource behind type erasure, as the server holds it.
#[async_trait]
pub trait AnyEphemeral: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> &Schema;
    fn validate(&self, config: &Value) -> Diagnostics;
    async fn open(&self, config: &Value) -> (Option<Opened<Value>>, Diagnostics);
    async fn renew(&self, private: Option<Vec<u8>>) -> (Renewed, Diagnostics);
    async fn close(&self, private: Option<Vec<u8>>) -> Diagnostics;
}

pub type EphemeralHandle = Arc<dyn AnyEphemeral>;

pub fn ephemeral<E: EphemeralResource>(e: E) -> EphemeralHandle {
    let schema = e.schema();
    Arc::new(TypedEphemeral { e, schema })
}

struct TypedEphemeral<E: EphemeralResource> {
    e: E,
    schema: Schema,
}

#[async_trait]
impl<E: EphemeralResource> AnyEphemeral for TypedEphemeral<E> {
    fn type_name(&self) -> &'static str {
        self.e.type_name()
    }

    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut diags = validate_config(&self.schema, config);
        let name = self.e.type_name();
        if let Some(m) = typed_model::<E::Model>(name, config, "configuration", &mut diags) {
            self.e.validate(&m, &mut diags);
        }
        diags
    }

    async fn open(&self, config: &Value) -> (Option<Opened<Value>>, Diagnostics) {
        // Values unknown at validate are known now: check them with the same messages.
        let mut diags = self.validate(config);
        if diags.has_error() {
            return (None, diags);
        }
        let name = self.e.type_name();
        let Some(m) = typed_model::<E::Model>(name, config, "configuration", &mut diags) else {
            return (None, diags);
        };
        let opened = match self.e.open(m, &mut diags).await {
            Some(o) => untyped_value(name, &o.result, "result", &mut diags).map(|result| Opened {
                result,
                renew_at: o.renew_at,
                private: o.private,
            }),
            None => None,
        };
        (opened, diags)
    }

    async fn renew(&self, private: Option<Vec<u8>>) -> (Renewed, Diagnostics) {
        let mut diags = Diagnostics::new();
        let r = self.e.renew(private, &mut diags).await;
        (r, diags)
    }

    async fn close(&self, private: Option<Vec<u8>>) -> Diagnostics {
        let mut diags = Diagnostics::new();
        self.e.close(private, &mut diags).await;
        diags
    }
}
