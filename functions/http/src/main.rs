//! The HTTP function: `/healthz` (the ALB's health checks), the console's `/auth/*`
//! (static admin login, logout) and its static files. Wiring only: config → stores →
//! service → runtime (the config and stores are opened during init, so a broken
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

use std::sync::Arc;

use wisp_lambda::boot::Boot;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wisp_lambda::telemetry::init();
    let boot = Boot::load("http").await?;

    let signer = boot.session_signer()?;
    let insecure = std::env::var("WISP_INSECURE_COOKIE").is_ok_and(|v| v == "true");
    let mut console = wisp_console::Console::new(Arc::new(boot.web_api()), signer)
        .insecure_cookie(insecure)
        .with_address(&boot.web_base_url())
        .with_shared_sso(&boot.config.spec.shared_sso_configs);
    if let Some(key) = boot.sso_key() {
        console = console.with_sso_key(key);
    }
    if let Ok(prefix) = std::env::var("WISP_WEB_PREFIX") {
        let files =
            wisp_console::StaticFiles::from_filestore(boot.stores.filestore.clone(), prefix)
                .redirect_assets(true);
        console = console.with_static_files(files);
    } else if let Some(dir) = std::env::var_os("WISP_WEB_DIR") {
        console = console.with_static_dir(dir);
    }
    let service = wisp_lambda::stack::console(Arc::new(console));

    boot.ready();
    lambda_http::run(service).await
}
