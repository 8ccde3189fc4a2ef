//! A function's init: its sources from the environment (see [`wisp_app::sources`] for
//! the variables), then the one loader and store opener of [`wisp_app`]. Everything here
//! runs once per instance, during the Lambda init phase; a failure is logged and the
//! function exits (Lambda reports an init error).

use wisp_app::{App, AppError, Sources};

/// The function's [`App`]: configuration and key loaded, stores opened and warmed. Every
/// WebService answer of a function goes through the ALB, so it is fitted to the ALB's
/// response limit.
pub async fn load(function: &'static str) -> Result<App, AppError> {
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
            tracing::error!(function, error = %e, "init failed");
            Err(e)
        }
    }
}
