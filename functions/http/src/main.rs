//! The HTTP function: `/healthz` (the ALB's health checks), the console's `/auth/*`
//! (static admin login, logout) and its static files. Wiring only: the app (config →
//! stores) → service → runtime (the config and stores are opened during init, so a broken
//! deployment fails its health check).
//!
//! The console's built files come from `WISP_WEB_PREFIX`, a prefix of the filestore
//! (the S3 bucket, e.g. `console/`, where `wisp console upload` puts them): `index.html`
//! is answered here, every other file with a redirect to a presigned S3 URL, since the
//! scripts are larger than the 1 MB an ALB takes from a Lambda function. Or
//! `WISP_WEB_DIR`, a directory inside the function's package (e.g. `/var/task/web`),
//! only for consoles whose every file fits. Without either only `/healthz` and
//! `/auth/*` are served.
//! `WISP_INSECURE_COOKIE=true` drops `Secure` from the cookies (never behind HTTPS).

use wisp_app::ConsoleOptions;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let app = wisp_lambda::boot::load("http").await?;

    let static_files = if let Ok(prefix) = std::env::var("WISP_WEB_PREFIX") {
        Some(
            wisp_console::StaticFiles::from_filestore(app.stores.filestore.clone(), prefix)
                .redirect_assets(true),
        )
    } else {
        std::env::var_os("WISP_WEB_DIR").map(wisp_console::StaticFiles::new)
    };
    let console = app.console(
        app.web_api(),
        ConsoleOptions {
            insecure_cookie: std::env::var("WISP_INSECURE_COOKIE").is_ok_and(|v| v == "true"),
            static_files,
            trusted_proxies: Vec::new(),
        },
    )?;
    let service = wisp_lambda::stack::console(std::sync::Arc::new(console));
    app.log_ready("http");
    lambda_http::run(service).await
}
