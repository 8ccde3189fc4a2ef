//! The scheduled-jobs function: EventBridge names the job in its event (`{"job":
//! "orphan-commands"}`; see `wisp_jobs`). Wiring only: the app (config → stores) →
//! runtime.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    wisp_lambda::telemetry::init();
    let app = wisp_lambda::boot::load("jobs").await?;
    let settings = app.job_settings();
    app.log_ready("jobs");
    wisp_lambda::jobs::run(app.stores, settings).await
}
