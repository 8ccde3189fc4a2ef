//! WebService: project.

use wisp_proto::webservice::*;

use wisp_proto::model;

use super::rbac::is_builtin_role;
use super::{Authorized, WebApi, required, seal};

use crate::error::ServiceError;
use crate::ops::REDACTED;

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
        crate::ops::projects::set_static_admin(
            &self.stores.projects,
            caller.project_id(),
            Some(&req.username),
            &req.password,
        )
        .await?;
        Ok(UpdateProjectStaticAdminResponse {})
    }

    pub async fn enable_static_admin(
        &self,
        caller: &Authorized,
        _req: EnableStaticAdminRequest,
    ) -> Result<EnableStaticAdminResponse, ServiceError> {
        self.check_project_writable(caller)?;
        self.set_static_admin_disabled(caller, false).await?;
        Ok(EnableStaticAdminResponse {})
    }

    pub async fn disable_static_admin(
        &self,
        caller: &Authorized,
        _req: DisableStaticAdminRequest,
    ) -> Result<DisableStaticAdminResponse, ServiceError> {
        self.check_project_writable(caller)?;
        self.set_static_admin_disabled(caller, true).await?;
        Ok(DisableStaticAdminResponse {})
    }

    /// Stores the project's SSO settings; the client id and secret are kept encrypted
    /// with the control plane's key and never shown again (GetProject redacts them).
    /// The addresses in SSO settings must be ones the control plane may reach
    /// ([`super::sso_policy`]); checked before anything is saved.
    fn check_sso_addresses(&self, sso: &model::ProjectSsoConfig) -> Result<(), ServiceError> {
        let mut addresses: Vec<(&str, &str)> = Vec::new();
        if let Some(oidc) = &sso.oidc {
            addresses.push(("OIDC issuer", &oidc.issuer));
            addresses.push(("OIDC authorization endpoint", &oidc.authorization_endpoint));
            addresses.push(("OIDC token endpoint", &oidc.token_endpoint));
            addresses.push(("OIDC user info endpoint", &oidc.user_info_endpoint));
        }
        if let Some(github) = &sso.github {
            addresses.push(("GitHub base URL", &github.base_url));
        }
        for (what, url) in addresses {
            if url.trim().is_empty() {
                continue;
            }
            self.sso_policy.check_url(url).map_err(|why| {
                ServiceError::InvalidArgument(format!("invalid SSO settings: the {what}: {why}"))
            })?;
        }
        Ok(())
    }

    pub async fn update_project_sso_config(
        &self,
        caller: &Authorized,
        req: UpdateProjectSsoConfigRequest,
    ) -> Result<UpdateProjectSsoConfigResponse, ServiceError> {
        self.check_project_writable(caller)?;
        let Some(mut sso) = req.sso else {
            return Err(ServiceError::InvalidArgument(
                "invalid request: sso must be set".into(),
            ));
        };
        self.check_sso_addresses(&sso)?;
        let key = self.sso_key().ok_or_else(|| {
            ServiceError::FailedPrecondition(
                "the control plane has no encryption key to protect SSO secrets".into(),
            )
        })?;
        let seal = |value: &mut String| -> Result<(), ServiceError> {
            if !value.is_empty() {
                *value = seal(key, value)?;
            }
            Ok(())
        };
        if let Some(github) = sso.github.as_mut() {
            seal(&mut github.client_id)?;
            seal(&mut github.client_secret)?;
        }
        if let Some(google) = sso.google.as_mut() {
            seal(&mut google.client_id)?;
            seal(&mut google.client_secret)?;
        }
        if let Some(oidc) = sso.oidc.as_mut() {
            seal(&mut oidc.client_id)?;
            seal(&mut oidc.client_secret)?;
        }
        self.change_project(caller, |p| {
            p.sso = Some(sso.clone());
            Ok(())
        })
        .await?;
        Ok(UpdateProjectSsoConfigResponse {})
    }

    /// The legacy team → built-in role mapping (admin, editor, viewer team names).
    pub async fn update_project_rbac_config(
        &self,
        caller: &Authorized,
        req: UpdateProjectRbacConfigRequest,
    ) -> Result<UpdateProjectRbacConfigResponse, ServiceError> {
        self.check_project_writable(caller)?;
        let rbac = req.rbac.unwrap_or_default();
        self.change_project(caller, |p| {
            p.rbac = Some(rbac.clone());
            Ok(())
        })
        .await?;
        Ok(UpdateProjectRbacConfigResponse {})
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

    /// Adds a custom role; built-in names and names in use are refused.
    pub async fn add_project_rbac_role(
        &self,
        caller: &Authorized,
        req: AddProjectRbacRoleRequest,
    ) -> Result<AddProjectRbacRoleResponse, ServiceError> {
        self.check_project_writable(caller)?;
        required("name", &req.name)?;
        if is_builtin_role(&req.name) {
            return Err(ServiceError::InvalidArgument(format!(
                "the name of a built-in role ({}) cannot be used",
                req.name
            )));
        }
        self.change_project(caller, |p| {
            if p.rbac_roles.iter().any(|r| r.name == req.name) {
                return Err(ServiceError::AlreadyExists(format!(
                    "the role {} already exists",
                    req.name
                )));
            }
            p.rbac_roles.push(model::ProjectRbacRole {
                name: req.name.clone(),
                policies: req.policies.clone(),
                is_builtin: false,
            });
            Ok(())
        })
        .await?;
        Ok(AddProjectRbacRoleResponse {})
    }

    /// Replaces a custom role's policies; built-in roles cannot change.
    pub async fn update_project_rbac_role(
        &self,
        caller: &Authorized,
        req: UpdateProjectRbacRoleRequest,
    ) -> Result<UpdateProjectRbacRoleResponse, ServiceError> {
        self.check_project_writable(caller)?;
        required("name", &req.name)?;
        if is_builtin_role(&req.name) {
            return Err(ServiceError::InvalidArgument(
                "a built-in role cannot be updated".into(),
            ));
        }
        self.change_project(caller, |p| {
            let role = p
                .rbac_roles
                .iter_mut()
                .find(|r| r.name == req.name)
                .ok_or_else(|| {
                    ServiceError::NotFound(format!("role {} does not exist", req.name))
                })?;
            role.policies = req.policies.clone();
            Ok(())
        })
        .await?;
        Ok(UpdateProjectRbacRoleResponse {})
    }

    /// Deletes a custom role.
    ///
    /// Deviation: a role a user group still maps to is refused (FAILED_PRECONDITION);
    /// upstream deletes it and leaves the group pointing at nothing.
    pub async fn delete_project_rbac_role(
        &self,
        caller: &Authorized,
        req: DeleteProjectRbacRoleRequest,
    ) -> Result<DeleteProjectRbacRoleResponse, ServiceError> {
        self.check_project_writable(caller)?;
        required("name", &req.name)?;
        if is_builtin_role(&req.name) {
            return Err(ServiceError::InvalidArgument(
                "a built-in role cannot be deleted".into(),
            ));
        }
        self.change_project(caller, |p| {
            if let Some(group) = p.user_groups.iter().find(|g| g.role == req.name) {
                return Err(ServiceError::FailedPrecondition(format!(
                    "the role {} is used by the user group {}: delete the group first",
                    req.name, group.sso_group
                )));
            }
            let before = p.rbac_roles.len();
            p.rbac_roles.retain(|r| r.name != req.name);
            if p.rbac_roles.len() == before {
                return Err(ServiceError::NotFound(format!(
                    "role {} does not exist",
                    req.name
                )));
            }
            Ok(())
        })
        .await?;
        Ok(DeleteProjectRbacRoleResponse {})
    }

    /// Maps an SSO group (GitHub `org/team`, an OIDC group) to a role.
    pub async fn add_project_user_group(
        &self,
        caller: &Authorized,
        req: AddProjectUserGroupRequest,
    ) -> Result<AddProjectUserGroupResponse, ServiceError> {
        self.check_project_writable(caller)?;
        required("sso_group", &req.sso_group)?;
        required("role", &req.role)?;
        self.change_project(caller, |p| {
            if p.user_groups.iter().any(|g| g.sso_group == req.sso_group) {
                return Err(ServiceError::AlreadyExists(format!(
                    "{} is already being used; the SSO group must be unique",
                    req.sso_group
                )));
            }
            if !is_builtin_role(&req.role) && !p.rbac_roles.iter().any(|r| r.name == req.role) {
                return Err(ServiceError::InvalidArgument(format!(
                    "role {} does not exist",
                    req.role
                )));
            }
            p.user_groups.push(model::ProjectUserGroup {
                sso_group: req.sso_group.clone(),
                role: req.role.clone(),
            });
            Ok(())
        })
        .await?;
        Ok(AddProjectUserGroupResponse {})
    }

    pub async fn delete_project_user_group(
        &self,
        caller: &Authorized,
        req: DeleteProjectUserGroupRequest,
    ) -> Result<DeleteProjectUserGroupResponse, ServiceError> {
        self.check_project_writable(caller)?;
        required("sso_group", &req.sso_group)?;
        self.change_project(caller, |p| {
            let before = p.user_groups.len();
            p.user_groups.retain(|g| g.sso_group != req.sso_group);
            if p.user_groups.len() < before {
                return Ok(());
            }
            // The legacy team settings are user groups too.
            let mut deleted = false;
            if let Some(rbac) = p.rbac.as_mut() {
                for team in [&mut rbac.admin, &mut rbac.editor, &mut rbac.viewer] {
                    if *team == req.sso_group {
                        team.clear();
                        deleted = true;
                    }
                }
            }
            if deleted {
                Ok(())
            } else {
                Err(ServiceError::NotFound(format!(
                    "user group {} does not exist",
                    req.sso_group
                )))
            }
        })
        .await?;
        Ok(DeleteProjectUserGroupResponse {})
    }

    /// Read-modify-write of the caller's (stored) project.
    async fn set_static_admin_disabled(
        &self,
        caller: &Authorized,
        disabled: bool,
    ) -> Result<model::Project, ServiceError> {
        crate::ops::projects::update_settings(
            &self.stores.projects,
            caller.project_id(),
            crate::ops::projects::ProjectSettings {
                static_admin_disabled: Some(disabled),
                ..Default::default()
            },
        )
        .await
    }

    async fn change_project<F>(
        &self,
        caller: &Authorized,
        mutate: F,
    ) -> Result<model::Project, ServiceError>
    where
        F: FnMut(&mut model::Project) -> Result<(), ServiceError> + Send,
    {
        crate::ops::projects::change(&self.stores.projects, caller.project_id(), mutate).await
    }
}
