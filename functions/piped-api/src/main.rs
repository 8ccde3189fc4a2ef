//! The piped API function: PipedService behind the ALB (upstream pipeds reach it through
//! `wisp bridge`). Wiring only: config → stores → service → runtime.

use std::sync::Arc;

use tonic::service::Routes;
use wisp_lambda::boot::Boot;
use wisp_transport::piped::PipedGrpc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let boot = Boot::load("piped-api").await?;

    let verifier = Arc::new(wisp_auth::PipedVerifier::new(boot.key_source()));
    let api = Arc::new(wisp_services::piped::PipedApi::new(
        boot.stores.clone(),
        boot.web_base_url(),
    ));
    let service =
        wisp_lambda::stack::grpc(Routes::new(PipedGrpc::new(api, verifier).into_server()));

    boot.ready();
    lambda_http::run(service).await
}
