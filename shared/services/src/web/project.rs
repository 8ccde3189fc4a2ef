//! WebService: project.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn get_project(
        &self,
        _caller: &Authorized,
        _req: GetProjectRequest,
    ) -> Result<GetProjectResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetProject is not implemented yet".into(),
        ))
    }

    pub async fn update_project_static_admin(
        &self,
        _caller: &Authorized,
        _req: UpdateProjectStaticAdminRequest,
    ) -> Result<UpdateProjectStaticAdminResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdateProjectStaticAdmin is not implemented yet".into(),
        ))
    }

    pub async fn enable_static_admin(
        &self,
        _caller: &Authorized,
        _req: EnableStaticAdminRequest,
    ) -> Result<EnableStaticAdminResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "EnableStaticAdmin is not implemented yet".into(),
        ))
    }

    pub async fn disable_static_admin(
        &self,
        _caller: &Authorized,
        _req: DisableStaticAdminRequest,
    ) -> Result<DisableStaticAdminResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DisableStaticAdmin is not implemented yet".into(),
        ))
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

    pub async fn get_me(
        &self,
        _caller: &Authorized,
        _req: GetMeRequest,
    ) -> Result<GetMeResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetMe is not implemented yet".into(),
        ))
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
}
