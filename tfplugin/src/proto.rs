//! Generated protobuf and gRPC server code (see `build.rs`). Private to this crate: everything else talks in
//! [`crate::types`], and `convert` is the only bridge.

// Generated code: its style is prost's and tonic's, not ours.
#![allow(clippy::all, clippy::pedantic, dead_code, unreachable_pub)]

/// Terraform plugin protocol 6.
pub(crate) mod tfplugin6 {
    tonic::include_proto!("tfplugin6");
}

/// go-plugin's controller, stdio and broker services.
pub(crate) mod plugin {
    tonic::include_proto!("plugin");
}

/// The standard gRPC health service.
pub(crate) mod health {
    tonic::include_proto!("grpc.health.v1");
}
