//! The public API function: APIService behind the ALB (upstream pipectl reaches it
//! through `wisp bridge`). Wiring only: config → stores → service → runtime.

use std::sync::Arc;

use tonic::service::Routes;
use wisp_lambda::boot::Boot;
use wisp_transport::api::ApiGrpc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let boot = Boot::load("api").await?;

    let verifier = Arc::new(wisp_auth::ApiKeyVerifier::new(boot.key_source()));
    let api = Arc::new(wisp_services::api::ApiApi::new(
        boot.stores.clone(),
        boot.web_base_url(),
    ));
    let service = wisp_lambda::stack::grpc(Routes::new(ApiGrpc::new(api, verifier).into_server()));

    boot.ready();
    lambda_http::run(service).await
}
