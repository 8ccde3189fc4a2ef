//! Applications: register, list, sync, update, enable/disable/delete, rename config
//! files, deploy targets.

use wisp_model::event::contains_labels;
use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{self, ApplicationKind, SyncStrategy, api_key::Role, command};
use wisp_store::collection::ListOptions;
use wisp_store::entities::slot;

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;
use crate::ops::applications as ops;
use crate::support::{new_id, now_unix, update_checked};

impl ApiApi {
    /// Registers an application on one of the project's pipeds, in a repository that
    /// piped has reported.
    pub async fn add_application(
        &self,
        caller: &ApiKeyCaller,
        req: AddApplicationRequest,
    ) -> Result<AddApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let piped = self.piped(&req.piped_id).await?;
        check_project(caller, &piped.project_id, "piped")?;
        let git_path = req.git_path.unwrap_or_default();
        let new = ops::NewApplication {
            name: req.name,
            repo_id: git_path.repo.map(|r| r.id).unwrap_or_default(),
            path: git_path.path,
            config_filename: git_path.config_filename,
            kind: req.kind,
            platform_provider: req.platform_provider,
            description: req.description,
            labels: req.labels,
            deploy_targets_by_plugin: Default::default(),
        };
        let app = ops::add_application(
            &self.stores.applications,
            &caller.project_id,
            &piped,
            new,
            ops::RepositoryCheck::Reported,
        )
        .await?;
        Ok(AddApplicationResponse {
            application_id: app.id,
        })
    }

    /// Asks the application's piped to sync it (a SYNC_APPLICATION command, strategy
    /// AUTO, commanded by the key id); the piped sees it in ListUnhandledCommands.
    pub async fn sync_application(
        &self,
        caller: &ApiKeyCaller,
        req: SyncApplicationRequest,
    ) -> Result<SyncApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let app = self.application(&req.application_id).await?;
        check_project(caller, &app.project_id, "application")?;
        let cmd = model::Command {
            id: new_id(),
            piped_id: app.piped_id.clone(),
            application_id: app.id.clone(),
            project_id: app.project_id.clone(),
            commander: caller.id.clone(),
            r#type: command::Type::SyncApplication as i32,
            sync_application: Some(command::SyncApplication {
                application_id: app.id,
                sync_strategy: SyncStrategy::Auto as i32,
            }),
            ..Default::default()
        };
        let cmd = self.add_command(cmd).await?;
        Ok(SyncApplicationResponse { command_id: cmd.id })
    }

    pub async fn get_application(
        &self,
        caller: &ApiKeyCaller,
        req: GetApplicationRequest,
    ) -> Result<GetApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let app = self.application(&req.application_id).await?;
        check_project(caller, &app.project_id, "application")?;
        Ok(GetApplicationResponse {
            application: Some(app),
        })
    }

    /// The project's applications, most recently updated first, with
    /// `disabled == req.disabled` (always applied, as upstream) and the optional name,
    /// kind (enum name, e.g. `KUBERNETES`), piped and labels filters. `limit` 0 means all;
    /// the cursor is empty on the last page.
    ///
    /// Deviation: deleted applications (which upstream keeps as disabled) are left out.
    pub async fn list_applications(
        &self,
        caller: &ApiKeyCaller,
        req: ListApplicationsRequest,
    ) -> Result<ListApplicationsResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let kind = if req.kind.is_empty() {
            None
        } else {
            let kind = ApplicationKind::from_str_name(&req.kind)
                .ok_or_else(|| ServiceError::InvalidArgument("Invalid application kind".into()))?;
            Some(kind as i32)
        };
        let matches = |a: &model::Application| {
            !a.deleted
                && a.disabled == req.disabled
                && (req.name.is_empty() || a.name == req.name)
                && kind.is_none_or(|k| a.kind == k)
                && (req.piped_id.is_empty() || a.piped_id == req.piped_id)
                && contains_labels(&a.labels, &req.labels)
        };
        let mut opts = ListOptions::new(slot::APPLICATION_BY_PROJECT, caller.project_id.clone());
        opts.descending = true;
        opts.limit = usize::try_from(req.limit).unwrap_or(0);
        opts.cursor = req.cursor.clone();
        opts.filter = Some(&matches);
        let page = self
            .stores
            .applications
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, "list applications"))?;
        Ok(ListApplicationsResponse {
            applications: page.items,
            cursor: page.cursor,
        })
    }

    /// Moves the application to a piped of the project and sets its platform provider
    /// and config file name.
    ///
    /// Deviations: the application's deploy targets are kept (upstream wipes them); an
    /// unknown piped is `NotFound` (upstream answers Internal); the application must be
    /// in the key's project too (upstream checks only the piped).
    pub async fn update_application(
        &self,
        caller: &ApiKeyCaller,
        req: UpdateApplicationRequest,
    ) -> Result<UpdateApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let piped = self.piped(&req.piped_id).await?;
        check_project(caller, &piped.project_id, "piped")?;
        let app = self.application(&req.application_id).await?;
        check_project(caller, &app.project_id, "application")?;
        let config_filename = req.git_path.map(|g| g.config_filename).unwrap_or_default();
        let what = format!("update application {}", req.application_id);
        self.update_live_application(caller, &req.application_id, &what, |app| {
            app.piped_id = req.piped_id.clone();
            app.platform_provider = req.platform_provider.clone();
            app.cloud_provider = req.platform_provider.clone();
            app.git_path.get_or_insert_default().config_filename = config_filename.clone();
            Ok(())
        })
        .await?;
        Ok(UpdateApplicationResponse {
            application_id: req.application_id,
        })
    }

    /// Soft delete: the application stays, deleted and disabled.
    pub async fn delete_application(
        &self,
        caller: &ApiKeyCaller,
        req: DeleteApplicationRequest,
    ) -> Result<DeleteApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let app = self.application(&req.application_id).await?;
        check_project(caller, &app.project_id, "application")?;
        let what = format!("delete application {}", app.id);
        let now = now_unix();
        update_checked(
            &self.stores.applications,
            &caller.project_id,
            &app.id,
            &what,
            |app| {
                app.deleted = true;
                app.disabled = true;
                app.deleted_at = now;
                Ok(())
            },
        )
        .await?;
        Ok(DeleteApplicationResponse {
            application_id: app.id,
        })
    }

    pub async fn enable_application(
        &self,
        caller: &ApiKeyCaller,
        req: EnableApplicationRequest,
    ) -> Result<EnableApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let application_id = self
            .set_disabled(caller, &req.application_id, false)
            .await?;
        Ok(EnableApplicationResponse { application_id })
    }

    pub async fn disable_application(
        &self,
        caller: &ApiKeyCaller,
        req: DisableApplicationRequest,
    ) -> Result<DisableApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let application_id = self.set_disabled(caller, &req.application_id, true).await?;
        Ok(DisableApplicationResponse { application_id })
    }

    /// Sets the config file name of 1 to 50 applications.
    ///
    /// Deviation: every application is checked before any is changed, so a request naming
    /// an unknown or foreign application changes nothing (upstream updates those before it).
    pub async fn rename_application_config_file(
        &self,
        caller: &ApiKeyCaller,
        req: RenameApplicationConfigFileRequest,
    ) -> Result<RenameApplicationConfigFileResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        for app_id in &req.application_ids {
            let app = self
                .stores
                .applications
                .get_any(app_id)
                .await
                .map_err(|e| ServiceError::store(e, &format!("get application {app_id}")))?;
            if app.project_id != caller.project_id {
                return Err(ServiceError::PermissionDenied(format!(
                    "requested application {app_id} does not belong to your project"
                )));
            }
        }
        for app_id in &req.application_ids {
            let what = format!("update config file name of application {app_id}");
            self.update_live_application(caller, app_id, &what, |app| {
                app.git_path.get_or_insert_default().config_filename = req.new_filename.clone();
                Ok(())
            })
            .await?;
        }
        Ok(RenameApplicationConfigFileResponse {})
    }

    /// Replaces the application's deploy targets per plugin (`pipectl migrate database`).
    pub async fn update_application_deploy_targets(
        &self,
        caller: &ApiKeyCaller,
        req: UpdateApplicationDeployTargetsRequest,
    ) -> Result<UpdateApplicationDeployTargetsResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let app = self.application(&req.application_id).await?;
        if app.project_id != caller.project_id {
            return Err(ServiceError::PermissionDenied(format!(
                "requested application {} does not belong to your project",
                req.application_id
            )));
        }
        let what = format!("update deploy targets of application {}", app.id);
        self.update_live_application(caller, &app.id, &what, |app| {
            app.deploy_targets_by_plugin = req.deploy_targets_by_plugin.clone();
            Ok(())
        })
        .await?;
        Ok(UpdateApplicationDeployTargetsResponse {})
    }

    async fn set_disabled(
        &self,
        caller: &ApiKeyCaller,
        app_id: &str,
        disabled: bool,
    ) -> Result<String, ServiceError> {
        let app = self.application(app_id).await?;
        check_project(caller, &app.project_id, "application")?;
        let verb = if disabled { "disable" } else { "enable" };
        let what = format!("{verb} application {app_id}");
        update_checked(
            &self.stores.applications,
            &caller.project_id,
            app_id,
            &what,
            |app| {
                if app.deleted {
                    return Err(ServiceError::InvalidArgument(format!(
                        "Invalid argument to {what}: cannot {verb} a deleted application"
                    )));
                }
                app.disabled = disabled;
                Ok(())
            },
        )
        .await?;
        Ok(app.id)
    }

    /// Read-modify-write of an application of the caller's project that is not deleted
    /// (upstream refuses to update deleted applications with InvalidArgument).
    async fn update_live_application<F>(
        &self,
        caller: &ApiKeyCaller,
        app_id: &str,
        what: &str,
        mut mutate: F,
    ) -> Result<model::Application, ServiceError>
    where
        F: FnMut(&mut model::Application) -> Result<(), ServiceError> + Send,
    {
        update_checked(
            &self.stores.applications,
            &caller.project_id,
            app_id,
            what,
            |app| {
                if app.deleted {
                    return Err(ServiceError::InvalidArgument(format!(
                        "Invalid argument to {what}: cannot update a deleted application"
                    )));
                }
                mutate(app)
            },
        )
        .await
    }
}
