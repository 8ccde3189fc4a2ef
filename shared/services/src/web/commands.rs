//! WebService: reading a command back (the console polls it after an action until the
//! piped reports it handled).

use wisp_proto::webservice::*;

use super::{Authorized, WebApi, required};
use crate::error::ServiceError;

impl WebApi {
    /// Any signed-in user may read a command of their own project (upstream's RBAC
    /// ignores this RPC; the project check is the handler's).
    pub async fn get_command(
        &self,
        caller: &Authorized,
        req: GetCommandRequest,
    ) -> Result<GetCommandResponse, ServiceError> {
        required("command_id", &req.command_id)?;
        let command = self
            .owned(&self.stores.commands, &req.command_id, caller, "command")
            .await?;
        Ok(GetCommandResponse {
            command: Some(command),
        })
    }
}
