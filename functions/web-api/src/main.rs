//! The console's API function: WebService over gRPC-web behind the ALB, authenticated by
//! the session cookie. Wiring only: config → stores → service → runtime.

use std::sync::Arc;

use tonic::service::Routes;
use wisp_lambda::boot::Boot;
use wisp_transport::web::WebGrpc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let boot = Boot::load("web-api").await?;

    let signer = boot.session_signer()?;
    let web = Arc::new(boot.web_api());
    let service = wisp_lambda::stack::grpc(Routes::new(WebGrpc::new(web, signer).into_server()));

    boot.ready();
    lambda_http::run(service).await
}
