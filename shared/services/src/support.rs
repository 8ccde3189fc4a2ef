//! Small helpers every service shares.

use wisp_store::StoreError;
use wisp_store::collection::{Collection, Entity};

use crate::error::ServiceError;

/// `Collection::update` with a closure that refuses with a [`ServiceError`] of its own
/// choosing (PermissionDenied, InvalidArgument, ...). Store failures map through
/// [`ServiceError::store`] with `what` ("update deployment d-1 as planned").
pub(crate) async fn update_checked<E, F>(
    collection: &Collection<E>,
    project_id: &str,
    id: &str,
    what: &str,
    mut mutate: F,
) -> Result<E, ServiceError>
where
    E: Entity,
    F: FnMut(&mut E) -> Result<(), ServiceError> + Send,
{
    let mut refusal: Option<ServiceError> = None;
    let result = collection
        .update(project_id, id, |entity| {
            refusal = None;
            mutate(entity).map_err(|err| {
                let msg = err.to_string();
                refusal = Some(err);
                // Ends the update without a retry; replaced by `refusal` below.
                StoreError::FailedPrecondition(msg)
            })
        })
        .await;
    match result {
        Ok(entity) => Ok(entity),
        Err(err) => match refusal {
            Some(refused) => Err(refused),
            None => Err(ServiceError::store(err, what)),
        },
    }
}

/// Unix seconds now: the one clock.
pub(crate) use wisp_model::clock::now_unix;

/// A fresh id for objects the control plane creates (chains, commands): uuid v4.
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// An id in the same form as [`new_id`], but the same every time for the same `parts`:
/// for objects a retried call must find instead of making twice.
#[cfg(feature = "piped")]
pub(crate) fn derived_id(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        // Length-prefixed, so that no two lists of parts hash the same bytes.
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// bcrypt of a freshly generated key or password, off the async workers (it takes tens
/// of milliseconds by design).
pub(crate) async fn hash_secret(secret: String, what: &str) -> Result<String, ServiceError> {
    tokio::task::spawn_blocking(move || wisp_auth::hash_secret(&secret))
        .await
        .map_err(|e| ServiceError::internal(format!("Failed to generate the {what}"), e))
        .and_then(|r| {
            r.map_err(|e| ServiceError::internal(format!("Failed to generate the {what}"), e))
        })
}
