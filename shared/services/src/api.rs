//! APIService: the 23 RPCs pipectl (and any API-key client) calls, transport-free.
//!
//! Every method takes the authenticated [`ApiKeyCaller`] and the typed request, validates
//! the request first, checks the key's role, and then follows upstream's
//! `pkg/app/server/grpcapi/api.go`:
//!
//! - the project always comes from the key. An object of another project is refused with
//!   upstream's code for that RPC: `InvalidArgument` for most, `PermissionDenied` for
//!   RenameApplicationConfigFile, UpdateApplicationDeployTargets, GetPlanPreviewResults
//!   and the piped updates. Writes are scoped to the key's project as well, so a check
//!   and the write that follows it can never cross projects;
//! - a READ_ONLY key may call only the read RPCs (`PermissionDenied` otherwise);
//! - store failures map through [`ServiceError::store`] (upstream's `gRPCStoreError`).
//!
//! Deviations from upstream are marked `Deviation:` where they happen.

mod applications;
mod commands;
mod deployments;
mod encrypt;
mod events;
mod key_usage;
mod pipeds;
mod plan_preview;

use std::time::Duration;

use wisp_proto::model;
use wisp_proto::model::api_key::Role;
use wisp_store::StoreError;
use wisp_store::stores::Stores;

pub use wisp_auth::ApiKeyCaller;

use crate::error::ServiceError;
use encrypt::PublicKeyCache;
use key_usage::KeyUsage;

/// How often, at most, one instance records that an API key was used (per key).
pub const KEY_USE_RECORD_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The APIService implementation over a set of stores.
pub struct ApiApi {
    stores: Stores,
    /// Upstream's config `address`: the console's base URL, for plan-preview links.
    web_base_url: String,
    key_usage: KeyUsage,
    public_keys: PublicKeyCache,
}

impl std::fmt::Debug for ApiApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiApi").finish_non_exhaustive()
    }
}

impl ApiApi {
    pub fn new(stores: Stores, web_base_url: impl Into<String>) -> Self {
        ApiApi {
            stores,
            web_base_url: web_base_url.into(),
            key_usage: KeyUsage::new(KEY_USE_RECORD_INTERVAL),
            public_keys: PublicKeyCache::new(),
        }
    }

    /// Records key use at most once per `interval` per key on this instance (tests use
    /// zero to record every call).
    pub fn with_key_use_interval(mut self, interval: Duration) -> Self {
        self.key_usage = KeyUsage::new(interval);
        self
    }

    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// Notes that `caller` was just used: sets `APIKey.last_used_at`, at most once per
    /// [`KEY_USE_RECORD_INTERVAL`] per key on this instance. Best effort: a failure is
    /// logged and never fails the request (upstream refuses every call when its Redis
    /// write fails).
    pub async fn record_key_use(&self, caller: &ApiKeyCaller) {
        self.key_usage.record(&self.stores, caller).await;
    }

    async fn piped(&self, piped_id: &str) -> Result<model::Piped, ServiceError> {
        self.stores
            .pipeds
            .get_any(piped_id)
            .await
            .map_err(|e| get_error(e, "Piped", "piped"))
    }

    async fn application(&self, app_id: &str) -> Result<model::Application, ServiceError> {
        self.stores
            .applications
            .get_any(app_id)
            .await
            .map_err(|e| get_error(e, "Application", "application"))
    }

    async fn deployment(&self, deployment_id: &str) -> Result<model::Deployment, ServiceError> {
        self.stores
            .deployments
            .get_any(deployment_id)
            .await
            .map_err(|e| get_error(e, "Deployment", "deployment"))
    }

    async fn command(&self, command_id: &str) -> Result<model::Command, ServiceError> {
        self.stores
            .commands
            .get_any(command_id)
            .await
            .map_err(|e| get_error(e, "Command", "command"))
    }
}

/// Upstream's `requireAPIKey`: READ_WRITE may call everything, READ_ONLY only the RPCs
/// that require READ_ONLY.
fn require(caller: &ApiKeyCaller, needed: Role) -> Result<(), ServiceError> {
    match Role::try_from(caller.role) {
        Ok(Role::ReadWrite) => Ok(()),
        Ok(Role::ReadOnly) if needed == Role::ReadOnly => Ok(()),
        Ok(Role::ReadOnly) => {
            tracing::warn!(key = %caller.id, "API key has insufficient permissions");
            Err(ServiceError::PermissionDenied("Permission denied".into()))
        }
        Err(_) => {
            tracing::warn!(key = %caller.id, role = caller.role, "API key has an invalid role");
            Err(ServiceError::PermissionDenied("Invalid role".into()))
        }
    }
}

/// Upstream's `getPiped`/`getApplication`/...: `NotFound "<X> is not found"` or
/// `Internal "Failed to get <x>"`.
fn get_error(err: StoreError, title: &str, lower: &str) -> ServiceError {
    match err {
        StoreError::NotFound(_) => ServiceError::NotFound(format!("{title} is not found")),
        err @ StoreError::Unavailable { .. } => {
            ServiceError::unavailable(format!("Failed to get {lower}: store unavailable"), err)
        }
        other => ServiceError::internal(format!("Failed to get {lower}"), other),
    }
}

/// The object is in the caller's project, or `InvalidArgument` as upstream.
fn check_project(caller: &ApiKeyCaller, project_id: &str, what: &str) -> Result<(), ServiceError> {
    if project_id != caller.project_id {
        return Err(ServiceError::InvalidArgument(format!(
            "Requested {what} does not belong to your project"
        )));
    }
    Ok(())
}
