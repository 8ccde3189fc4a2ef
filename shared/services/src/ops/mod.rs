//! The domain layer: every operation that more than one entry point performs (the CLI,
//! APIService, WebService, the PipedService helpers, the simulator) is one function
//! here, so that each rule has one wording and each write one shape whichever way it
//! comes in. A caller decides who may act (roles, ownership answers of its own
//! protocol) and maps its request to a call and the result to its reply; an operation
//! applies the domain's rules and does the write, scoped to the project it is given, so
//! that an object of another project reads as NotFound.

pub mod api_keys;
pub mod applications;
pub mod commands;
pub mod deployments;
pub mod pipeds;
pub mod projects;
#[cfg(any(feature = "api", feature = "web"))]
pub mod secrets;

use wisp_store::StoreError;
use wisp_store::collection::{Collection, Entity};

use crate::error::ServiceError;

/// An object of any project by id (the caller then checks whose it is, with its own
/// protocol's answer): upstream's `getPiped`/`getApplication`/... shared by APIService
/// and WebService: NotFound `"<What> is not found"`, other store failures as
/// [`ServiceError::store`] of `"get <what>"`.
pub async fn find<E: Entity>(
    collection: &Collection<E>,
    id: &str,
    what: &str,
) -> Result<E, ServiceError> {
    collection.get_any(id).await.map_err(|e| match e {
        StoreError::NotFound(_) => ServiceError::NotFound(format!("{} is not found", title(what))),
        other => ServiceError::store(other, &format!("get {what}")),
    })
}

/// `what` with its first letter in upper case ("application" -> "Application").
fn title(what: &str) -> String {
    let mut chars = what.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// What replaces a secret (a key hash, a password hash) in objects handed to clients
/// (upstream's text).
pub const REDACTED: &str = "redacted";

/// Records a revocation, so that verifiers that cached the credential (here at once,
/// on other instances within their refresh) stop trusting it. The datastore change
/// (`done`, e.g. "piped p-1 disabled") is already made and stands; if the shared list
/// cannot be written, other instances may keep accepting what it revokes, so the action
/// fails with UNAVAILABLE saying what happened and to retry (the action is idempotent: a
/// retry records the revocation again). The store counts and logs the failure.
pub(crate) async fn revoke(
    stores: &wisp_store::stores::Stores,
    what: wisp_store::revocations::Revoked<'_>,
    until: i64,
    done: &str,
) -> Result<(), crate::error::ServiceError> {
    stores
        .revocations
        .revoke(what, until)
        .await
        .map_err(|_| revocation_not_shared(done))
}

/// The error of an action whose revocation could not be recorded.
pub fn revocation_not_shared(done: &str) -> crate::error::ServiceError {
    crate::error::ServiceError::Unavailable(
        format!(
            "{done}, but the revocation could not be shared with other instances, which may \
             still accept it for a while; retry the same action (the server log says why)"
        )
        .into(),
    )
}

/// How long a credential revocation must be remembered: past the verifiers' cache TTL.
pub(crate) fn credential_revocation_until() -> i64 {
    wisp_store::collection::now_unix()
        + i64::try_from(wisp_auth::VERIFIED_TTL.as_secs()).unwrap_or(i64::MAX / 2)
        + 60
}

// A logout is remembered for as long as its token could work.
const _: () =
    assert!(wisp_auth::MAX_SESSION_TTL.as_secs() < wisp_store::revocations::MAX_KEEP.as_secs());
