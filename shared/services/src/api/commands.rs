//! Commands created through the API, and reading one back (pipectl waits on it).

use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{self, api_key::Role};

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;

impl ApiApi {
    /// A command and its handled status.
    ///
    /// Deviation: upstream returns any project's command; here it must be in the key's
    /// project (`InvalidArgument`, as the other getters).
    pub async fn get_command(
        &self,
        caller: &ApiKeyCaller,
        req: GetCommandRequest,
    ) -> Result<GetCommandResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let command = self.command(&req.command_id).await?;
        check_project(caller, &command.project_id, "command")?;
        Ok(GetCommandResponse {
            command: Some(command),
        })
    }

    /// Stores a new command (status NOT_HANDLED_YET), which puts it in its piped's
    /// unhandled-commands index.
    pub(super) async fn add_command(
        &self,
        cmd: model::Command,
    ) -> Result<model::Command, ServiceError> {
        self.stores.commands.create(cmd).await.map_err(|e| {
            tracing::error!(error = %wisp_store::error::chain(&e), "failed to create command");
            ServiceError::store(e, "create command")
        })
    }
}
