//! The HTTP function: `/healthz` and the ALB's health checks now; the console's static
//! files and `/auth/*` later. Wiring only: config → stores → service → runtime (the
//! config and stores are opened already, so a broken deployment fails its health check).

use wisp_lambda::boot::Boot;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let boot = Boot::load("http").await?;

    let service = wisp_lambda::stack::http();

    boot.ready();
    lambda_http::run(service).await
}
