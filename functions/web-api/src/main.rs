//! The console's API function: WebService over gRPC-web behind the ALB, authenticated by
//! the session cookie. Wiring only: the app (config → stores) → service → runtime.

use tonic::service::Routes;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let app = wisp_lambda::boot::load("web-api").await?;
    let web = app.web_grpc(app.web_api())?;
    let service = wisp_lambda::stack::grpc(Routes::new(web.into_server()));
    app.log_ready("web-api");
    lambda_http::run(service).await
}
