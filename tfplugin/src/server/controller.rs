//! go-plugin's side services, which every go-plugin client expects next to the Provider service:
//! `plugin.GRPCController` (Shutdown), `plugin.GRPCStdio` (StreamStdio), `plugin.GRPCBroker` (left UNIMPLEMENTED)
//! and `grpc.health.v1.Health`.

use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status};

use super::lifetime::Lifetime;
use crate::proto::health::{
    HealthCheckRequest, HealthCheckResponse, health_check_response::ServingStatus, health_server,
};
use crate::proto::plugin::{self, grpc_broker_server, grpc_controller_server, grpc_stdio_server};

/// `Shutdown` is the client's last call to every plugin process. We reply, then exit by ourselves a few
/// milliseconds later (see `lifetime`): go-plugin kills a plugin that is still there 2 s after asking.
pub(crate) struct Controller {
    pub lifetime: Lifetime,
}

#[tonic::async_trait]
impl grpc_controller_server::GrpcController for Controller {
    async fn shutdown(&self, _: Request<plugin::Empty>) -> Result<Response<plugin::Empty>, Status> {
        tracing::debug!("shutdown requested by the client");
        self.lifetime.shutdown_soon();
        Ok(Response::new(plugin::Empty {}))
    }
}

/// The client asks for our stdout/stderr through this stream. We never write to stdout after the handshake, and
/// logs go to the real stderr, which the client already reads, so the stream stays open and empty. Ending it
/// would make the client log an EOF; it is simply dropped when the process exits.
pub(crate) struct Stdio;

#[tonic::async_trait]
impl grpc_stdio_server::GrpcStdio for Stdio {
    async fn stream_stdio(
        &self,
        _: Request<()>,
    ) -> Result<Response<BoxStream<plugin::StdioData>>, Status> {
        Ok(Response::new(Box::pin(tokio_stream::pending())))
    }
}

/// Brokered extra connections are a go-plugin feature providers do not use; every method answers UNIMPLEMENTED,
/// which clients tolerate.
pub(crate) struct Broker;

#[tonic::async_trait]
impl grpc_broker_server::GrpcBroker for Broker {}

/// Serving as long as the process runs: there is no state in which we would answer NOT_SERVING.
pub(crate) struct Health;

#[tonic::async_trait]
impl health_server::Health for Health {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }
}
