//! PipedService: the 36 RPCs a piped calls, transport-free.
//!
//! Every method takes the authenticated [`PipedCaller`] and the typed request, validates
//! the request first, and then follows upstream's `pkg/app/server/grpcapi/piped_api.go`:
//!
//! - the project always comes from the caller, and every read is scoped by it (another
//!   project's object is `NotFound`, never visible);
//! - an application or deployment of another piped of the same project is
//!   `PermissionDenied`. Where the RPC updates the object anyway, the check runs inside the
//!   optimistic update, so it costs no extra read; elsewhere a small per-instance cache of
//!   owners saves the read on the hot paths (stage logs every 5 s, live state every minute);
//! - store failures map through [`ServiceError::store`] (upstream's `gRPCStoreError`).
//!
//! Deviations from upstream are marked `Deviation:` where they happen.

mod applications;
mod chains;
mod commands;
mod deployments;
mod events;
mod objects;
mod owners;
mod pipeds;

use wisp_proto::model;
use wisp_store::stores::Stores;

pub use wisp_auth::PipedCaller;

use crate::error::ServiceError;
use crate::support::{now_unix, update_checked};
use owners::OwnerCache;

/// The PipedService implementation over a set of stores.
pub struct PipedApi {
    stores: Stores,
    /// Upstream's config `address`: the console's base URL, handed to pipeds.
    web_base_url: String,
    owners: OwnerCache,
}

impl std::fmt::Debug for PipedApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipedApi").finish_non_exhaustive()
    }
}

impl PipedApi {
    pub fn new(stores: Stores, web_base_url: impl Into<String>) -> Self {
        PipedApi {
            stores,
            web_base_url: web_base_url.into(),
            owners: OwnerCache::new(),
        }
    }

    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The application, if it exists in the caller's project and belongs to the caller's
    /// piped (upstream's `validateAppBelongsToPiped`, which returns the object too).
    async fn owned_application(
        &self,
        caller: &PipedCaller,
        app_id: &str,
    ) -> Result<model::Application, ServiceError> {
        let app = self
            .stores
            .applications
            .get(&caller.project_id, app_id)
            .await
            .map_err(|e| ServiceError::store(e, &format!("get application {app_id}")))?;
        if app.piped_id != caller.piped_id {
            return Err(app_not_owned(app_id));
        }
        Ok(app)
    }

    /// Checks that the application belongs to the caller's piped, reading it every time:
    /// applications move between pipeds, and a piped that lost one must stop writing to
    /// it at once, on every instance. (None of these calls is on the steady poll path.)
    async fn check_application(
        &self,
        caller: &PipedCaller,
        app_id: &str,
    ) -> Result<(), ServiceError> {
        self.owned_application(caller, app_id).await.map(|_| ())
    }

    /// The deployment, if it exists in the caller's project and belongs to the caller's piped.
    async fn owned_deployment(
        &self,
        caller: &PipedCaller,
        deployment_id: &str,
    ) -> Result<model::Deployment, ServiceError> {
        let dep = self
            .stores
            .deployments
            .get(&caller.project_id, deployment_id)
            .await
            .map_err(|e| ServiceError::store(e, &format!("get deployment {deployment_id}")))?;
        self.owners.remember(
            owners::DEPLOYMENT,
            &caller.project_id,
            deployment_id,
            &dep.piped_id,
        );
        if dep.piped_id != caller.piped_id {
            return Err(deployment_not_owned(deployment_id));
        }
        Ok(dep)
    }

    /// Checks that the deployment belongs to the caller's piped, from the owner cache when
    /// possible (a deployment never changes piped).
    async fn check_deployment(
        &self,
        caller: &PipedCaller,
        deployment_id: &str,
    ) -> Result<(), ServiceError> {
        if self.owners.owned_by(
            owners::DEPLOYMENT,
            &caller.project_id,
            deployment_id,
            &caller.piped_id,
        ) {
            return Ok(());
        }
        self.owned_deployment(caller, deployment_id)
            .await
            .map(|_| ())
    }

    /// Read-modify-write of one of the caller's applications. `mutate` runs after the
    /// ownership check, on an application that is not deleted (upstream refuses to update
    /// deleted applications with InvalidArgument); it may run more than once.
    async fn update_application<F>(
        &self,
        caller: &PipedCaller,
        app_id: &str,
        what: &str,
        mut mutate: F,
    ) -> Result<model::Application, ServiceError>
    where
        F: FnMut(&mut model::Application) -> Result<(), ServiceError> + Send,
    {
        let piped = caller.piped_id.as_str();
        update_checked(
            &self.stores.applications,
            &caller.project_id,
            app_id,
            what,
            |app| {
                if app.piped_id != piped {
                    return Err(app_not_owned(app_id));
                }
                crate::ops::applications::refuse_deleted(app, "update")?;
                mutate(app)
            },
        )
        .await
    }

    /// Read-modify-write of one of the caller's deployments; `mutate` runs after the
    /// ownership check and may run more than once.
    async fn update_deployment<F>(
        &self,
        caller: &PipedCaller,
        deployment_id: &str,
        what: &str,
        mut mutate: F,
    ) -> Result<model::Deployment, ServiceError>
    where
        F: FnMut(&mut model::Deployment) -> Result<(), ServiceError> + Send,
    {
        let piped = caller.piped_id.as_str();
        update_checked(
            &self.stores.deployments,
            &caller.project_id,
            deployment_id,
            what,
            |dep| {
                if dep.piped_id != piped {
                    return Err(deployment_not_owned(deployment_id));
                }
                mutate(dep)
            },
        )
        .await
    }
}

fn app_not_owned(app_id: &str) -> ServiceError {
    ServiceError::PermissionDenied(format!(
        "requested application {app_id} does not belong to your piped"
    ))
}

fn deployment_not_owned(deployment_id: &str) -> ServiceError {
    ServiceError::PermissionDenied(format!(
        "requested deployment {deployment_id} does not belong to your piped"
    ))
}
