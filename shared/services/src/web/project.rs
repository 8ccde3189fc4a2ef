//! WebService: project.

use wisp_proto::webservice::*;

use wisp_proto::model;

use super::{Authorized, WebApi, required};
use crate::support::{hash_secret, update_checked};

/// Shortest static admin password accepted.
const MIN_PASSWORD_LEN: usize = 8;

/// What a secret reads as when it is shown.
const REDACTED: &str = "redacted";
use crate::error::ServiceError;

impl WebApi {
    /// The caller's project with its secrets redacted: the static admin's password hash
    /// and the SSO client secrets never leave the server.
    pub async fn get_project(
        &self,
        caller: &Authorized,
        _req: GetProjectRequest,
    ) -> Result<GetProjectResponse, ServiceError> {
        let mut project = self.load_project(caller.project_id()).await?;
        if let Some(admin) = project.static_admin.as_mut() {
            admin.password_hash = REDACTED.into();
        }
        if let Some(sso) = project.sso.as_mut() {
            if let Some(github) = sso.github.as_mut() {
                github.client_id = REDACTED.into();
                github.client_secret = REDACTED.into();
            }
            if let Some(google) = sso.google.as_mut() {
                google.client_id = REDACTED.into();
                google.client_secret = REDACTED.into();
            }
            if let Some(oidc) = sso.oidc.as_mut() {
                oidc.client_id = REDACTED.into();
                oidc.client_secret = REDACTED.into();
            }
        }
        project.rbac_roles = self.project_roles(&project);
        Ok(GetProjectResponse {
            project: Some(project),
        })
    }

    /// Changes the static admin's name and password (stored as a bcrypt hash).
    pub async fn update_project_static_admin(
        &self,
        caller: &Authorized,
        req: UpdateProjectStaticAdminRequest,
    ) -> Result<UpdateProjectStaticAdminResponse, ServiceError> {
        self.check_project_writable(caller)?;
        required("username", &req.username)?;
        if req.password.len() < MIN_PASSWORD_LEN {
            return Err(ServiceError::InvalidArgument(format!(
                "invalid request: password must be at least {MIN_PASSWORD_LEN} characters"
            )));
        }
        let hash = hash_secret(req.password.clone(), "password").await?;
        self.change_project(caller, |p| {
            p.static_admin = Some(model::ProjectStaticUser {
                username: req.username.clone(),
                password_hash: hash.clone(),
            });
            Ok(())
        })
        .await?;
        Ok(UpdateProjectStaticAdminResponse {})
    }

    pub async fn enable_static_admin(
        &self,
        caller: &Authorized,
        _req: EnableStaticAdminRequest,
    ) -> Result<EnableStaticAdminResponse, ServiceError> {
        self.check_project_writable(caller)?;
        self.change_project(caller, |p| {
            p.static_admin_disabled = false;
            Ok(())
        })
        .await?;
        Ok(EnableStaticAdminResponse {})
    }

    pub async fn disable_static_admin(
        &self,
        caller: &Authorized,
        _req: DisableStaticAdminRequest,
    ) -> Result<DisableStaticAdminResponse, ServiceError> {
        self.check_project_writable(caller)?;
        self.change_project(caller, |p| {
            p.static_admin_disabled = true;
            Ok(())
        })
        .await?;
        Ok(DisableStaticAdminResponse {})
    }

    pub async fn update_project_sso_config(
        &self,
        _caller: &Authorized,
        _req: UpdateProjectSsoConfigRequest,
    ) -> Result<UpdateProjectSsoConfigResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdateProjectSSOConfig is not implemented yet".into(),
        ))
    }

    pub async fn update_project_rbac_config(
        &self,
        _caller: &Authorized,
        _req: UpdateProjectRbacConfigRequest,
    ) -> Result<UpdateProjectRbacConfigResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdateProjectRBACConfig is not implemented yet".into(),
        ))
    }

    /// Who the session belongs to (the console asks on every page load).
    pub async fn get_me(
        &self,
        caller: &Authorized,
        _req: GetMeRequest,
    ) -> Result<GetMeResponse, ServiceError> {
        let me = caller.caller();
        Ok(GetMeResponse {
            subject: me.subject.clone(),
            avatar_url: me.avatar_url.clone(),
            project_id: me.project_id.clone(),
        })
    }

    pub async fn add_project_rbac_role(
        &self,
        _caller: &Authorized,
        _req: AddProjectRbacRoleRequest,
    ) -> Result<AddProjectRbacRoleResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "AddProjectRBACRole is not implemented yet".into(),
        ))
    }

    pub async fn update_project_rbac_role(
        &self,
        _caller: &Authorized,
        _req: UpdateProjectRbacRoleRequest,
    ) -> Result<UpdateProjectRbacRoleResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdateProjectRBACRole is not implemented yet".into(),
        ))
    }

    pub async fn delete_project_rbac_role(
        &self,
        _caller: &Authorized,
        _req: DeleteProjectRbacRoleRequest,
    ) -> Result<DeleteProjectRbacRoleResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DeleteProjectRBACRole is not implemented yet".into(),
        ))
    }

    pub async fn add_project_user_group(
        &self,
        _caller: &Authorized,
        _req: AddProjectUserGroupRequest,
    ) -> Result<AddProjectUserGroupResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "AddProjectUserGroup is not implemented yet".into(),
        ))
    }

    pub async fn delete_project_user_group(
        &self,
        _caller: &Authorized,
        _req: DeleteProjectUserGroupRequest,
    ) -> Result<DeleteProjectUserGroupResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DeleteProjectUserGroup is not implemented yet".into(),
        ))
    }

    /// Read-modify-write of the caller's (stored) project.
    async fn change_project<F>(
        &self,
        caller: &Authorized,
        mutate: F,
    ) -> Result<model::Project, ServiceError>
    where
        F: FnMut(&mut model::Project) -> Result<(), ServiceError> + Send,
    {
        let id = caller.project_id().to_string();
        update_checked(
            &self.stores.projects,
            &id,
            &id,
            &format!("update project {id}"),
            mutate,
        )
        .await
    }
}
