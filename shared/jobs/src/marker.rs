//! Where a job that walks a listing stopped, kept in the filestore at
//! `jobs/<job>.json` so that the next run continues from there instead of the start.
//! Losing it costs only re-walking: every job is idempotent.

use serde::{Deserialize, Serialize};
use wisp_store::filestore::PutCondition;
use wisp_store::stores::Stores;
use wisp_store::{Filestore, StoreError};

use crate::{Job, JobError};

/// Markers live under this prefix of the filestore.
pub const MARKER_PREFIX: &str = "jobs/";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Marker {
    /// The listing position to resume after (an opaque cursor or an object path).
    pub after: String,
    /// Unix seconds when it was written.
    pub saved_at: i64,
}

fn path(job: Job) -> String {
    format!("{MARKER_PREFIX}{}.json", job.name())
}

/// The saved marker; `None` when there is none or it cannot be read (start over).
pub(crate) async fn load(stores: &Stores, job: Job) -> Result<Option<Marker>, JobError> {
    match stores.filestore.get(&path(job)).await {
        Ok(object) => match serde_json::from_slice::<Marker>(&object.data) {
            Ok(marker) if !marker.after.is_empty() => Ok(Some(marker)),
            Ok(_) => Ok(None),
            Err(e) => {
                tracing::warn!(job = %job, error = %wisp_telemetry::chain(&e), "ignoring an unreadable job marker");
                Ok(None)
            }
        },
        Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(JobError::store(job, "read the job marker", e)),
    }
}

/// Saves where to resume; `None` clears the marker (the walk is complete).
pub(crate) async fn save(
    stores: &Stores,
    job: Job,
    after: Option<&str>,
    now: i64,
) -> Result<(), JobError> {
    let fs: &dyn Filestore = stores.filestore.as_ref();
    let result = match after {
        Some(after) => {
            let marker = Marker {
                after: after.to_string(),
                saved_at: now,
            };
            let data = serde_json::to_vec(&marker).map_err(|e| {
                JobError::store(
                    job,
                    "encode the job marker",
                    StoreError::internal_from("serializing", e),
                )
            })?;
            fs.put(&path(job), data, PutCondition::Any)
                .await
                .map(|_| ())
        }
        None => fs.delete(&path(job)).await,
    };
    result.map_err(|e| JobError::store(job, "save the job marker", e))
}
