//! The scheduled-jobs function's handler: the event names the job (see
//! [`wisp_jobs::JobRequest::from_event`]), the invocation's remaining time minus a margin
//! bounds the run, and the run's report is the function's result.

use std::time::{Duration, SystemTime};

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use wisp_jobs::fleet::{FleetMetrics, Scope};
use wisp_jobs::{Deadline, JobContext, JobError, JobReport, JobRequest, Settings};
use wisp_store::stores::Stores;

/// Time kept back from the invocation's deadline: the item in flight, the marker and
/// the report must fit in it.
pub const MIN_MARGIN: Duration = Duration::from_secs(3);

/// The run's deadline: the invocation deadline minus a margin of a tenth of the time
/// left, at least [`MIN_MARGIN`].
pub fn deadline_for(invocation_deadline: SystemTime) -> Deadline {
    let left = invocation_deadline
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    let margin = (left / 10).max(MIN_MARGIN);
    Deadline::after(left.saturating_sub(margin))
}

/// Runs the job the event names. An event naming no known job, or a store failure that
/// stops the job, fails the invocation with error type `BadEvent` or `StoreFailure`
/// (an asynchronous invocation is then retried by Lambda; the next schedule comes anyway).
pub async fn handle(
    stores: &Stores,
    settings: &Settings,
    event: LambdaEvent<serde_json::Value>,
) -> Result<JobReport, Diagnostic> {
    let (payload, context) = event.into_parts();
    let request = JobRequest::from_event(&payload).map_err(diagnostic)?;
    let ctx = JobContext::new(stores, deadline_for(context.deadline()), settings.clone());
    tracing::info!(
        job = %request.job,
        request_id = %context.request_id,
        budget_ms = u64::try_from(ctx.deadline.remaining().as_millis()).unwrap_or(u64::MAX),
        "job run starting"
    );
    wisp_jobs::run(request.job, &ctx).await.map_err(diagnostic)
}

fn diagnostic(err: JobError) -> Diagnostic {
    let error_type = match &err {
        JobError::BadEvent(_) => "BadEvent",
        JobError::Store { .. } => "StoreFailure",
    };
    Diagnostic {
        error_type: error_type.to_string(),
        error_message: err.to_string(),
    }
}

/// The jobs function's runtime loop.
pub async fn run(stores: Stores, settings: Settings) -> Result<(), lambda_runtime::Error> {
    // Only what the functions' metrics record: the pipeds, not their deployments.
    let fleet = std::sync::Arc::new(FleetMetrics::new(Scope::Pipeds));
    lambda_runtime::run(service_fn(move |event| {
        let stores = stores.clone();
        let settings = settings.clone();
        let fleet = fleet.clone();
        async move {
            let result = handle(&stores, &settings, event).await;
            // The fleet's size rides along with the jobs (the deployment chains run every
            // minute), at most once a minute per instance.
            fleet.record(&stores, &settings.config_projects).await;
            wisp_telemetry::emf::flush();
            result
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_keeps_a_margin() {
        let d = deadline_for(SystemTime::now() + Duration::from_secs(100));
        let left = d.remaining();
        assert!(
            left <= Duration::from_secs(90) && left > Duration::from_secs(88),
            "{left:?}"
        );
        let d = deadline_for(SystemTime::now() + Duration::from_secs(10));
        assert!(d.remaining() <= Duration::from_secs(7));
        assert!(deadline_for(SystemTime::now()).expired());
    }
}
