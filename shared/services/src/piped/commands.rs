//! Commands: the 5-second poll and the acknowledgement.

use wisp_model::validate::Validate;
use wisp_proto::model;
use wisp_proto::pipedservice::*;
use wisp_store::entities::{pk, slot};

use super::{PipedApi, PipedCaller, update_checked};
use crate::error::ServiceError;

impl PipedApi {
    /// The piped's commands not handled yet. The hot path (every 5 s per piped): at most
    /// one read, of a sparse index that holds only unhandled commands; with a shared cache
    /// none while the piped's commands have not changed (`wisp_store::polls`).
    pub async fn list_unhandled_commands(
        &self,
        caller: &PipedCaller,
        req: ListUnhandledCommandsRequest,
    ) -> Result<ListUnhandledCommandsResponse, ServiceError> {
        req.validate()?;
        let commands = self
            .stores
            .commands
            .list_polled(
                slot::COMMAND_UNHANDLED_BY_PIPED,
                pk::project_piped(&caller.project_id, &caller.piped_id),
            )
            .await
            .map_err(|e| {
                ServiceError::store(
                    e,
                    &format!("list unhandled commands of piped {}", caller.piped_id),
                )
            })?;
        Ok(ListUnhandledCommandsResponse { commands })
    }

    /// Marks a command handled: its output (plan previews) is stored first, so that
    /// whoever sees the new status can read it; then status, metadata and handled_at.
    pub async fn report_command_handled(
        &self,
        caller: &PipedCaller,
        req: ReportCommandHandledRequest,
    ) -> Result<ReportCommandHandledResponse, ServiceError> {
        req.validate()?;
        let command_id = req.command_id.as_str();
        if !req.output.is_empty() {
            // The output is keyed by command id alone: check ownership before writing it.
            let command = self
                .stores
                .commands
                .get(&caller.project_id, command_id)
                .await
                .map_err(|e| ServiceError::store(e, &format!("get command {command_id}")))?;
            check_command_owner(&command, caller)?;
            self.stores
                .command_outputs
                .put(command_id, req.output.clone())
                .await
                .map_err(|e| ServiceError::internal("Failed to store output of command", e))?;
        }
        let what = format!("update command {command_id} as handled");
        update_checked(
            &self.stores.commands,
            &caller.project_id,
            command_id,
            &what,
            |cmd| {
                check_command_owner(cmd, caller)?;
                cmd.status = req.status;
                cmd.metadata = req.metadata.clone();
                cmd.handled_at = req.handled_at;
                Ok(())
            },
        )
        .await?;
        Ok(ReportCommandHandledResponse {})
    }
}

fn check_command_owner(command: &model::Command, caller: &PipedCaller) -> Result<(), ServiceError> {
    if command.piped_id != caller.piped_id {
        return Err(ServiceError::PermissionDenied(format!(
            "requested command {} does not belong to your piped",
            command.id
        )));
    }
    Ok(())
}
