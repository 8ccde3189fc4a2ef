//! Domain operations on a project's pipeds and API keys, each written once: the CLI,
//! APIService, WebService and the simulator call these. A caller decides who may act
//! (roles, ownership answers of its own protocol); an operation applies the domain's
//! rules and does the write, scoped to the project it is given, so that an object of
//! another project reads as NotFound.

pub mod api_keys;
pub mod applications;
pub mod pipeds;
pub mod projects;

/// What replaces a secret (a key hash, a password hash) in objects handed to clients
/// (upstream's text).
pub const REDACTED: &str = "redacted";

/// Records a revocation, so that verifiers that cached the credential (here at once,
/// on other instances within their refresh) stop trusting it. The datastore change is
/// already made: if the shared list cannot be written, other instances still stop
/// within the verifiers' TTL, and the failure is logged rather than failing the call.
pub(crate) async fn revoke(
    stores: &wisp_store::stores::Stores,
    what: wisp_store::revocations::Revoked<'_>,
    until: i64,
) {
    if let Err(e) = stores.revocations.revoke(what, until).await {
        tracing::warn!(error = %e, ?what, "revocation not shared with other instances");
    }
}

/// How long a credential revocation must be remembered: past the verifiers' cache TTL.
pub(crate) fn credential_revocation_until() -> i64 {
    wisp_store::collection::now_unix()
        + i64::try_from(wisp_auth::VERIFIED_TTL.as_secs()).unwrap_or(i64::MAX / 2)
        + 60
}
