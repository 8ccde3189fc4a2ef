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
    let opened = async {
        let app = App::open(&Sources::from_lambda_env()?).await?;
        #[cfg(feature = "web")]
        let app = app
            .with_web_response_budget(wisp_services::web::ResponseBudget {
                max_compressed_bytes: crate::limits::WEB_RESPONSE_BUDGET,
            })
            .with_sso_policy(sso_policy_from_env(
                std::env::var(SSO_ALLOW_PRIVATE_ENV).ok(),
            )?);
        Ok::<_, AppError>(app)
    }
    .await;
    match opened {
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

/// `true` lets projects' SSO settings reach private, loopback, link-local and
/// unique-local addresses (an identity provider inside the VPC), as `wisp serve
/// --sso-allow-private-addresses` does; unset or `false`: public `https://` only. Read
/// by the functions that save SSO settings (web-api) and that call the provider (http).
#[cfg(feature = "web")]
pub const SSO_ALLOW_PRIVATE_ENV: &str = "WISP_SSO_ALLOW_PRIVATE_ADDRESSES";

/// The SSO address policy from [`SSO_ALLOW_PRIVATE_ENV`]'s value; any other value than
/// `true`, `false` or empty is refused, so a typo does not silently keep (or drop) it.
#[cfg(feature = "web")]
pub fn sso_policy_from_env(
    value: Option<String>,
) -> Result<wisp_services::web::sso_policy::ProviderPolicy, AppError> {
    let allow_private = match value.as_deref().map(str::trim) {
        None | Some("" | "false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(AppError::Unsupported(format!(
                "{SSO_ALLOW_PRIVATE_ENV} must be true or false, not {other:?}"
            )));
        }
    };
    Ok(wisp_services::web::sso_policy::ProviderPolicy { allow_private })
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

#[cfg(all(test, feature = "web"))]
mod tests {
    use super::*;

    #[test]
    fn the_private_sso_switch_is_true_or_false() {
        let allows =
            |v: Option<&str>| sso_policy_from_env(v.map(str::to_string)).map(|p| p.allow_private);
        assert!(!allows(None).unwrap());
        assert!(!allows(Some("")).unwrap());
        assert!(!allows(Some("false")).unwrap());
        assert!(allows(Some("true")).unwrap());
        assert!(allows(Some(" true ")).unwrap());
        let err = allows(Some("yes please")).unwrap_err().to_string();
        assert!(err.contains(SSO_ALLOW_PRIVATE_ENV), "{err}");
    }
}
