//! The public API function: APIService behind the ALB (upstream pipectl reaches it
//! through `wisp bridge`). Wiring only: the app (config → stores) → service → runtime.

use tonic::service::Routes;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let app = wisp_lambda::boot::load("api").await?;
    let service = wisp_lambda::stack::grpc(Routes::new(app.api_grpc().into_server()));
    app.log_ready("api");
    lambda_http::run(service).await
}
