//! A function's init: its sources from the environment (see [`wisp_app::sources`] for
//! the variables), then the one loader and store opener of [`wisp_app`]. Everything here
//! runs once per instance, during the Lambda init phase; a failure is logged and the
//! function exits (Lambda reports an init error).

use wisp_app::{App, AppError, Sources};

/// The function's [`App`]: configuration and key loaded, stores opened and warmed. Every
/// WebService answer of a function goes through the ALB, so it is fitted to the ALB's
/// response limit.
pub async fn load(function: &'static str) -> Result<App, AppError> {
    install_metrics(function);
    let opened = async { App::open(&Sources::from_lambda_env()?).await }.await;
    match opened {
        #[cfg(feature = "web")]
        Ok(app) => Ok(
            app.with_web_response_budget(wisp_services::web::ResponseBudget {
                max_compressed_bytes: crate::limits::WEB_RESPONSE_BUDGET,
            }),
        ),
        #[cfg(not(feature = "web"))]
        Ok(app) => Ok(app),
        Err(e) => {
            tracing::error!(function, error = %wisp_telemetry::chain(&e), "init failed");
            // The ALB shows this start as a 502; the metric says which function and why
            // to look at its log.
            wisp_telemetry::metrics::counter!(wisp_telemetry::INIT_FAILURES).increment(1);
            wisp_telemetry::emf::flush();
            Err(e)
        }
    }
}

/// Metrics as CloudWatch Embedded Metric Format lines on stdout (docs/METRICS.md):
/// namespace `WISP_METRICS_NAMESPACE` (default `Wisp`; `off` for none), dimensions
/// `Deployment` (`WISP_DEPLOYMENT`, default `wisp`) and `Function`; the basic set, or
/// every metric with `WISP_METRICS_DETAIL=detailed`.
fn install_metrics(function: &'static str) {
    let namespace = std::env::var("WISP_METRICS_NAMESPACE").unwrap_or_else(|_| "Wisp".into());
    if namespace == "off" {
        return;
    }
    let deployment = std::env::var("WISP_DEPLOYMENT").unwrap_or_else(|_| "wisp".into());
    let detailed = std::env::var("WISP_METRICS_DETAIL").is_ok_and(|d| d == "detailed");
    if let Err(err) = wisp_telemetry::emf::install(&namespace, &deployment, function, detailed) {
        tracing::warn!(error = %wisp_telemetry::chain(&err), "metrics off");
    }
}
