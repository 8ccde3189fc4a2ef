//! WebService: applications (add, update, enable/disable/delete, list, sync, sealed
//! secrets, unregistered ones, live state).

use wisp_model::event::contains_labels;
use wisp_proto::model::{self, command};
use wisp_proto::webservice::*;
use wisp_store::StoreError;
use wisp_store::collection::ListOptions;
use wisp_store::entities::slot;

use super::{Authorized, WebApi, required};
use crate::error::ServiceError;
use crate::hybrid;
use crate::ops::applications as ops;
use crate::support::{new_id, now_unix, update_checked};

impl WebApi {
    /// Adds an application on one of the project's pipeds, from a repository that piped
    /// watches; its URL is made from the repository (as upstream, whatever the client
    /// sent).
    pub async fn add_application(
        &self,
        caller: &Authorized,
        req: AddApplicationRequest,
    ) -> Result<AddApplicationResponse, ServiceError> {
        required("name", &req.name)?;
        required("piped_id", &req.piped_id)?;
        let git_path = req.git_path.unwrap_or_default();
        let repo_id = git_path.repo.map(|r| r.id).unwrap_or_default();
        required("git_path.repo.id", &repo_id)?;
        let piped = self
            .owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        let new = ops::NewApplication {
            name: req.name,
            repo_id,
            path: git_path.path,
            config_filename: git_path.config_filename,
            kind: req.kind,
            platform_provider: req.platform_provider,
            description: req.description,
            labels: req.labels,
            deploy_targets_by_plugin: req.deploy_targets_by_plugin,
        };
        let app = ops::add_application(
            &self.stores.applications,
            caller.project_id(),
            &piped,
            new,
            ops::RepositoryCheck::Reported,
        )
        .await?;
        Ok(AddApplicationResponse {
            application_id: app.id,
        })
    }

    pub async fn update_application(
        &self,
        caller: &Authorized,
        req: UpdateApplicationRequest,
    ) -> Result<UpdateApplicationResponse, ServiceError> {
        required("application_id", &req.application_id)?;
        required("piped_id", &req.piped_id)?;
        // The new piped must be the caller's too.
        self.owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        self.change_application(caller, &req.application_id, |app| {
            // As APIService (and upstream's updaters): a deleted application is frozen.
            if app.deleted {
                return Err(ServiceError::InvalidArgument(format!(
                    "Invalid argument to update application {}: cannot update a deleted application",
                    app.id
                )));
            }
            if !req.name.is_empty() {
                app.name = req.name.clone();
            }
            app.piped_id = req.piped_id.clone();
            app.kind = req.kind;
            app.platform_provider = req.platform_provider.clone();
            app.deploy_targets_by_plugin = req.deploy_targets_by_plugin.clone();
            if let Some(path) = app.git_path.as_mut() {
                path.config_filename = req.config_filename.clone();
            }
            Ok(())
        })
        .await?;
        Ok(UpdateApplicationResponse {})
    }

    pub async fn enable_application(
        &self,
        caller: &Authorized,
        req: EnableApplicationRequest,
    ) -> Result<EnableApplicationResponse, ServiceError> {
        self.set_application_disabled(caller, &req.application_id, false)
            .await?;
        Ok(EnableApplicationResponse {})
    }

    pub async fn disable_application(
        &self,
        caller: &Authorized,
        req: DisableApplicationRequest,
    ) -> Result<DisableApplicationResponse, ServiceError> {
        self.set_application_disabled(caller, &req.application_id, true)
            .await?;
        Ok(DisableApplicationResponse {})
    }

    /// Soft delete, as upstream and APIService: the application stays, deleted and
    /// disabled, stamped with the time of its deletion.
    pub async fn delete_application(
        &self,
        caller: &Authorized,
        req: DeleteApplicationRequest,
    ) -> Result<DeleteApplicationResponse, ServiceError> {
        required("application_id", &req.application_id)?;
        let now = now_unix();
        self.change_application(caller, &req.application_id, |app| {
            app.deleted = true;
            app.disabled = true;
            app.deleted_at = now;
            Ok(())
        })
        .await?;
        Ok(DeleteApplicationResponse {})
    }

    /// The project's applications, most recently updated first. Filters as upstream's
    /// console query; a request without `options` lists everything (upstream crashes).
    ///
    /// Deviation: every given kind and sync status is matched (upstream uses only the
    /// first of each), and deleted applications are left out.
    pub async fn list_applications(
        &self,
        caller: &Authorized,
        req: ListApplicationsRequest,
    ) -> Result<ListApplicationsResponse, ServiceError> {
        let options = req.options.unwrap_or_default();
        let matches = |a: &model::Application| {
            let sync_status = a.sync_state.as_ref().map(|s| s.status).unwrap_or_default();
            !a.deleted
                && options.enabled.is_none_or(|e| a.disabled != e)
                && (options.kinds.is_empty() || options.kinds.contains(&a.kind))
                && (options.sync_statuses.is_empty()
                    || options.sync_statuses.contains(&sync_status))
                && (options.name.is_empty() || a.name == options.name)
                && (options.piped_id.is_empty() || a.piped_id == options.piped_id)
                && contains_labels(&a.labels, &options.labels)
        };
        let mut opts = ListOptions::new(
            slot::APPLICATION_BY_PROJECT,
            caller.project_id().to_string(),
        );
        opts.descending = true;
        opts.filter = Some(&matches);
        let page = self
            .stores
            .applications
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, "list applications"))?;
        Ok(ListApplicationsResponse {
            applications: page.items,
        })
    }

    /// Asks the application's piped to sync it now.
    pub async fn sync_application(
        &self,
        caller: &Authorized,
        req: SyncApplicationRequest,
    ) -> Result<SyncApplicationResponse, ServiceError> {
        required("application_id", &req.application_id)?;
        let app = self
            .owned(
                &self.stores.applications,
                &req.application_id,
                caller,
                "application",
            )
            .await?;
        let cmd = model::Command {
            id: new_id(),
            piped_id: app.piped_id.clone(),
            application_id: app.id.clone(),
            project_id: app.project_id.clone(),
            commander: caller.subject().to_string(),
            r#type: command::Type::SyncApplication as i32,
            sync_application: Some(command::SyncApplication {
                application_id: app.id,
                sync_strategy: req.sync_strategy,
            }),
            ..Default::default()
        };
        let cmd = self.add_command(cmd).await?;
        Ok(SyncApplicationResponse { command_id: cmd.id })
    }

    pub async fn get_application(
        &self,
        caller: &Authorized,
        req: GetApplicationRequest,
    ) -> Result<GetApplicationResponse, ServiceError> {
        required("application_id", &req.application_id)?;
        let app = self
            .owned(
                &self.stores.applications,
                &req.application_id,
                caller,
                "application",
            )
            .await?;
        Ok(GetApplicationResponse {
            application: Some(app),
        })
    }

    /// `data` (base64-encoded first if asked) sealed with the piped's public key, for an
    /// application's config: only that piped can open it.
    pub async fn generate_application_sealed_secret(
        &self,
        caller: &Authorized,
        req: GenerateApplicationSealedSecretRequest,
    ) -> Result<GenerateApplicationSealedSecretResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        required("data", &req.data)?;
        let piped = self
            .owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        let pem = hybrid::public_key_pem(piped.secret_encryption.as_ref())?;
        let key = hybrid::parse_public_key_pem(pem).map_err(|e| {
            tracing::error!(error = %wisp_store::error::chain(&e), piped = %piped.id, "the piped's public key is unreadable");
            ServiceError::FailedPrecondition("The piped's public key is invalid".into())
        })?;
        let plaintext = if req.base64_encoding {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(req.data.as_bytes())
        } else {
            req.data
        };
        let data = hybrid::encrypt(&key, plaintext.as_bytes())
            .map_err(|e| ServiceError::internal("Failed to encrypt the secret", e))?;
        Ok(GenerateApplicationSealedSecretResponse { data })
    }

    /// Applications the project's pipeds found in their repositories but nobody added,
    /// sorted by path.
    pub async fn list_unregistered_applications(
        &self,
        caller: &Authorized,
        _req: ListUnregisteredApplicationsRequest,
    ) -> Result<ListUnregisteredApplicationsResponse, ServiceError> {
        let mut applications = self
            .stores
            .unregistered_apps
            .list(caller.project_id())
            .await
            .map_err(|e| ServiceError::store(e, "list unregistered applications"))?;
        applications.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(ListUnregisteredApplicationsResponse { applications })
    }

    /// The application's live state as its piped last reported it.
    pub async fn get_application_live_state(
        &self,
        caller: &Authorized,
        req: GetApplicationLiveStateRequest,
    ) -> Result<GetApplicationLiveStateResponse, ServiceError> {
        required("application_id", &req.application_id)?;
        let app = self
            .owned(
                &self.stores.applications,
                &req.application_id,
                caller,
                "application",
            )
            .await?;
        match self.stores.live_states.get(&app.id).await {
            Ok(snapshot) => Ok(GetApplicationLiveStateResponse {
                snapshot: Some(merged_live_state(snapshot, &app)),
            }),
            Err(StoreError::NotFound(_)) => Err(ServiceError::NotFound(format!(
                "Application live state of {} is not found",
                app.id
            ))),
            Err(e) => Err(ServiceError::store(e, "get application live state")),
        }
    }

    async fn set_application_disabled(
        &self,
        caller: &Authorized,
        application_id: &str,
        disabled: bool,
    ) -> Result<(), ServiceError> {
        required("application_id", application_id)?;
        self.change_application(caller, application_id, |app| {
            if app.deleted {
                return Err(ServiceError::InvalidArgument(format!(
                    "application {} is deleted",
                    app.id
                )));
            }
            app.disabled = disabled;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn change_application<F>(
        &self,
        caller: &Authorized,
        application_id: &str,
        mutate: F,
    ) -> Result<model::Application, ServiceError>
    where
        F: FnMut(&mut model::Application) -> Result<(), ServiceError> + Send,
    {
        self.owned(
            &self.stores.applications,
            application_id,
            caller,
            "application",
        )
        .await?;
        update_checked(
            &self.stores.applications,
            caller.project_id(),
            application_id,
            &format!("update application {application_id}"),
            mutate,
        )
        .await
    }
}

/// A plugin application's live state as one view across its deploy targets. The piped
/// reports every plugin's resources for every deploy target in one snapshot; here they
/// are grouped by plugin and then by deploy target in the application's order (targets
/// it no longer names last), keeping the piped's order within a group. Health the piped
/// left unknown is derived from the resources: the snapshot's as upstream's
/// `DetermineApplicationHealthStatus` (any unhealthy resource makes it UNHEALTHY, else
/// any unknown one UNKNOWN), the live state's HEALTHY only when every resource is.
/// Snapshots of classic (kind-specific) applications pass through unchanged.
pub(crate) fn merged_live_state(
    mut snapshot: model::ApplicationLiveStateSnapshot,
    app: &model::Application,
) -> model::ApplicationLiveStateSnapshot {
    use model::application_live_state::Status as LiveStatus;
    use model::application_live_state_snapshot::Status as SnapshotStatus;
    use model::resource_state::HealthStatus;
    let Some(live) = snapshot.application_live_state.as_mut() else {
        return snapshot;
    };
    let position = |r: &model::ResourceState| {
        app.deploy_targets_by_plugin
            .get(&r.plugin_name)
            .and_then(|t| t.deploy_targets.iter().position(|d| d == &r.deploy_target))
            .unwrap_or(usize::MAX)
    };
    live.resources.sort_by(|a, b| {
        (
            a.plugin_name.as_str(),
            position(a),
            a.deploy_target.as_str(),
        )
            .cmp(&(
                b.plugin_name.as_str(),
                position(b),
                b.deploy_target.as_str(),
            ))
    });
    if live.resources.is_empty() {
        return snapshot;
    }
    let health = |r: &model::ResourceState| HealthStatus::try_from(r.health_status).ok();
    let all_healthy = live
        .resources
        .iter()
        .all(|r| health(r) == Some(HealthStatus::Healthy));
    if live.health_status == LiveStatus::Unknown as i32 {
        live.health_status = if all_healthy {
            LiveStatus::Healthy
        } else {
            LiveStatus::Other
        } as i32;
    }
    if snapshot.health_status == SnapshotStatus::Unknown as i32 {
        let any = |h: HealthStatus| live.resources.iter().any(|r| health(r) == Some(h));
        snapshot.health_status = if any(HealthStatus::Unhealthy) {
            SnapshotStatus::Unhealthy
        } else if all_healthy {
            SnapshotStatus::Healthy
        } else {
            SnapshotStatus::Unknown
        } as i32;
    }
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resource_state::HealthStatus;

    fn resource(
        id: &str,
        plugin: &str,
        target: &str,
        health: HealthStatus,
    ) -> model::ResourceState {
        model::ResourceState {
            id: id.into(),
            plugin_name: plugin.into(),
            deploy_target: target.into(),
            health_status: health as i32,
            ..Default::default()
        }
    }

    fn app() -> model::Application {
        let targets = |t: &[&str]| model::DeployTargets {
            deploy_targets: t.iter().map(|s| s.to_string()).collect(),
        };
        model::Application {
            id: "app".into(),
            deploy_targets_by_plugin: [
                ("kubernetes".to_string(), targets(&["prod-b", "prod-a"])),
                ("terraform".to_string(), targets(&["tf"])),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        }
    }

    fn snapshot(resources: Vec<model::ResourceState>) -> model::ApplicationLiveStateSnapshot {
        model::ApplicationLiveStateSnapshot {
            application_id: "app".into(),
            application_live_state: Some(model::ApplicationLiveState {
                resources,
                health_status: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn resources_group_by_plugin_and_the_applications_target_order() {
        use HealthStatus::Healthy;
        let merged = merged_live_state(
            snapshot(vec![
                resource("tf-1", "terraform", "tf", Healthy),
                resource("a-1", "kubernetes", "prod-a", Healthy),
                resource("gone-1", "kubernetes", "old", Healthy),
                resource("b-1", "kubernetes", "prod-b", Healthy),
                resource("a-2", "kubernetes", "prod-a", Healthy),
            ]),
            &app(),
        );
        let live = merged.application_live_state.expect("live state");
        let ids: Vec<&str> = live.resources.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["b-1", "a-1", "a-2", "gone-1", "tf-1"]);
        assert_eq!(
            live.health_status,
            model::application_live_state::Status::Healthy as i32
        );
        assert_eq!(
            merged.health_status,
            model::application_live_state_snapshot::Status::Healthy as i32
        );
    }

    #[test]
    fn health_spans_every_deploy_target() {
        use model::application_live_state_snapshot::Status;
        let unhealthy = merged_live_state(
            snapshot(vec![
                resource("a", "kubernetes", "prod-a", HealthStatus::Healthy),
                resource("b", "kubernetes", "prod-b", HealthStatus::Unknown),
                resource("t", "terraform", "tf", HealthStatus::Unhealthy),
            ]),
            &app(),
        );
        assert_eq!(unhealthy.health_status, Status::Unhealthy as i32);
        assert_eq!(
            unhealthy.application_live_state.map(|l| l.health_status),
            Some(model::application_live_state::Status::Other as i32)
        );
        let unknown = merged_live_state(
            snapshot(vec![
                resource("a", "kubernetes", "prod-a", HealthStatus::Healthy),
                resource("b", "kubernetes", "prod-b", HealthStatus::Unknown),
            ]),
            &app(),
        );
        assert_eq!(unknown.health_status, Status::Unknown as i32);

        // What the piped decided is kept.
        let mut reported = snapshot(vec![resource(
            "a",
            "kubernetes",
            "prod-a",
            HealthStatus::Unhealthy,
        )]);
        reported.health_status = Status::Other as i32;
        assert_eq!(
            merged_live_state(reported, &app()).health_status,
            Status::Other as i32
        );
    }

    #[test]
    fn classic_snapshots_pass_through() {
        let classic = model::ApplicationLiveStateSnapshot {
            application_id: "app".into(),
            kubernetes: Some(model::KubernetesApplicationLiveState::default()),
            ..Default::default()
        };
        assert_eq!(merged_live_state(classic.clone(), &app()), classic);
    }
}
