//! The piped API function: PipedService behind the ALB (upstream pipeds reach it through
//! `wisp bridge`), and OTLP TraceService for the pipeds' spans, relayed to the collector
//! `WISP_OTLP_ENDPOINT` names (dropped without one). Wiring only: the app (config →
//! stores) → services → runtime.

use tonic::service::Routes;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let app = wisp_lambda::boot::load("piped-api").await?;
    // Unset or empty (the SAM parameter's default): dropped.
    let endpoint = std::env::var("WISP_OTLP_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty());
    let relay = wisp_transport::trace::Relay::from_endpoint(endpoint.as_deref())?;
    let service = wisp_lambda::stack::grpc(
        Routes::new(app.piped_grpc().into_server()).add_service(app.trace_grpc(relay)),
    );
    app.log_ready("piped-api");
    lambda_http::run(service).await
}
