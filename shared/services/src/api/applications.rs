//! Applications: register, list, sync, update, enable/disable/delete, rename config
//! files, deploy targets.

use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{ApplicationKind, SyncStrategy, api_key::Role};

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;
use crate::ops;
use crate::ops::applications::{self as apps, ApplicationQuery, ApplicationUpdate};

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
        let new = apps::NewApplication {
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
        let app = apps::add_application(
            &self.stores.applications,
            &caller.project_id,
            &piped,
            new,
            apps::RepositoryCheck::Reported,
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
        let cmd = ops::commands::sync_application(
            &self.stores.commands,
            &app,
            &caller.id,
            SyncStrategy::Auto as i32,
        )
        .await?;
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
        let query = ApplicationQuery {
            disabled: Some(req.disabled),
            kinds: kind.into_iter().collect(),
            name: req.name,
            piped_id: req.piped_id,
            labels: req.labels,
            limit: usize::try_from(req.limit).unwrap_or(0),
            cursor: req.cursor,
            ..Default::default()
        };
        let page =
            apps::list_applications(&self.stores.applications, &caller.project_id, query).await?;
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
        let update = ApplicationUpdate {
            piped_id: req.piped_id,
            platform_provider: req.platform_provider,
            config_filename: req.git_path.map(|g| g.config_filename).unwrap_or_default(),
            ..Default::default()
        };
        apps::update_application(
            &self.stores.applications,
            &caller.project_id,
            &req.application_id,
            update,
        )
        .await?;
        Ok(UpdateApplicationResponse {
            application_id: req.application_id,
        })
    }

    /// Soft delete: the application stays, deleted and disabled, stamped with the time.
    pub async fn delete_application(
        &self,
        caller: &ApiKeyCaller,
        req: DeleteApplicationRequest,
    ) -> Result<DeleteApplicationResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let app = self.application(&req.application_id).await?;
        check_project(caller, &app.project_id, "application")?;
        apps::delete_application(&self.stores.applications, &caller.project_id, &app.id).await?;
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
            apps::change_application(
                &self.stores.applications,
                &caller.project_id,
                app_id,
                "update",
                |app| {
                    app.git_path.get_or_insert_default().config_filename = req.new_filename.clone();
                    Ok(())
                },
            )
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
        apps::change_application(
            &self.stores.applications,
            &caller.project_id,
            &app.id,
            "update",
            |app| {
                app.deploy_targets_by_plugin = req.deploy_targets_by_plugin.clone();
                Ok(())
            },
        )
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
        apps::set_application_disabled(
            &self.stores.applications,
            &caller.project_id,
            app_id,
            disabled,
        )
        .await?;
        Ok(app.id)
    }
}
