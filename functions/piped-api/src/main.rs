//! The piped API function: PipedService behind the ALB (upstream pipeds reach it through
//! `wisp bridge`). Wiring only: the app (config → stores) → service → runtime.

use tonic::service::Routes;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let app = wisp_lambda::boot::load("piped-api").await?;
    let service = wisp_lambda::stack::grpc(Routes::new(app.piped_grpc().into_server()));
    app.log_ready("piped-api");
    lambda_http::run(service).await
}
