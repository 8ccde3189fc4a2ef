//! The scheduled-jobs function: EventBridge names the job in its event (`{"job":
//! "orphan-commands"}`; see `wisp_jobs`). Wiring only: config → stores → runtime.

use wisp_lambda::boot::Boot;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    wisp_lambda::telemetry::init();
    let boot = Boot::load("jobs").await?;

    let settings = boot.job_settings();

    boot.ready();
    wisp_lambda::jobs::run(boot.stores, settings).await
}
