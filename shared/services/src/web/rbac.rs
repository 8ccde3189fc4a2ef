//! RBAC: which resource and action each WebService RPC needs, the built-in roles, and
//! the check upstream's generated `service.pb.auth.go` makes.

use wisp_proto::model::project_rbac_policy::Action;
use wisp_proto::model::project_rbac_resource::ResourceType;

use super::{Authorized, WebApi, WebCaller};
use crate::error::ServiceError;

/// What an RPC requires of the caller's roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Any signed-in caller (upstream's `ignored = true`).
    Ignored,
    Policy(ResourceType, Action),
}

impl WebApi {
    /// Checks that one of `caller`'s roles allows `method` (the RPC's name, e.g.
    /// "RegisterPiped"); PERMISSION_DENIED otherwise.
    pub async fn authorize(
        &self,
        caller: &WebCaller,
        method: &str,
    ) -> Result<Authorized, ServiceError> {
        let _ = method;
        // Placeholder until the RBAC check lands: nobody is authorized.
        Err(ServiceError::PermissionDenied(format!(
            "Permission Denied ({})",
            caller.subject
        )))
    }
}
