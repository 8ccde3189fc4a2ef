//! Plan previews (`pipectl plan-preview`): one BUILD_PLAN_PREVIEW command per piped that
//! watches the repository, then the results the pipeds report as command outputs.

use std::collections::HashMap;
use std::time::Duration;

use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{self, CommandStatus, api_key::Role, command};
use wisp_store::entities::slot;
use wisp_store::pipedstat::is_online;

use super::{ApiApi, ApiKeyCaller, require};
use crate::error::ServiceError;
use crate::support::{new_id, now_unix};

/// Who plan-preview commands are from (upstream's constant).
const PLAN_PREVIEW_COMMANDER: &str = "pipectl";
/// How long a piped may take to handle a command when the request does not say.
pub const DEFAULT_COMMAND_HANDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Outputs of commands handled longer ago than this are refused.
pub const PLAN_PREVIEW_OUTPUT_FRESHNESS: Duration = Duration::from_secs(24 * 3600);

impl ApiApi {
    /// Asks every enabled piped of the project that watches `repo_remote_url` at
    /// `base_branch` to build a plan preview of `head_commit`; returns the command ids
    /// (none when no piped watches the repository).
    pub async fn request_plan_preview(
        &self,
        caller: &ApiKeyCaller,
        req: RequestPlanPreviewRequest,
    ) -> Result<RequestPlanPreviewResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let enabled = |p: &model::Piped| !p.disabled;
        let pipeds = self
            .stores
            .pipeds
            .list_all(
                slot::PIPED_BY_PROJECT,
                caller.project_id.clone(),
                Some(&enabled),
            )
            .await
            .map_err(|e| ServiceError::store(e, "list pipeds"))?;
        let mut commands = Vec::new();
        for piped in pipeds {
            let Some(repo) = piped
                .repositories
                .iter()
                .find(|r| r.remote == req.repo_remote_url && r.branch == req.base_branch)
            else {
                continue;
            };
            let cmd = model::Command {
                id: new_id(),
                piped_id: piped.id.clone(),
                project_id: caller.project_id.clone(),
                commander: PLAN_PREVIEW_COMMANDER.to_string(),
                r#type: command::Type::BuildPlanPreview as i32,
                build_plan_preview: Some(command::BuildPlanPreview {
                    repository_id: repo.id.clone(),
                    head_branch: req.head_branch.clone(),
                    head_commit: req.head_commit.clone(),
                    base_branch: req.base_branch.clone(),
                    timeout: req.timeout,
                }),
                ..Default::default()
            };
            commands.push(self.add_command(cmd).await?.id);
        }
        Ok(RequestPlanPreviewResponse { commands })
    }

    /// The results of plan-preview commands, with upstream's timing rules per command:
    ///
    /// - not handled and its piped not ONLINE: a result carrying
    ///   "Maybe Piped is offline currently.";
    /// - not handled, created within `command_handle_timeout` seconds (default 5 min):
    ///   the whole call is `NotFound`, so the client polls again;
    /// - not handled and older: a result carrying a timeout error;
    /// - handled more than 24 h ago: `FailedPrecondition`;
    /// - handled: the output the piped reported (JSON `PlanPreviewCommandResult`).
    ///
    /// URLs are filled from the console's base URL. Unlike every other read, this needs
    /// a READ_WRITE key (as upstream).
    pub async fn get_plan_preview_results(
        &self,
        caller: &ApiKeyCaller,
        req: GetPlanPreviewResultsRequest,
    ) -> Result<GetPlanPreviewResultsResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let handle_timeout = match u64::try_from(req.command_handle_timeout) {
            Ok(secs) if secs > 0 => Duration::from_secs(secs),
            _ => DEFAULT_COMMAND_HANDLE_TIMEOUT,
        };
        let now = now_unix();
        let mut piped_names: HashMap<String, String> = HashMap::new();
        let mut results = Vec::new();
        let mut handled = Vec::new();

        for command_id in &req.commands {
            let cmd = self.command(command_id).await?;
            if cmd.project_id != caller.project_id {
                tracing::warn!(command = %command_id, project = %caller.project_id, "plan-preview result of another project's command requested");
                return Err(ServiceError::PermissionDenied(format!(
                    "The requested command {command_id} does not belong to your project"
                )));
            }
            if cmd.r#type != command::Type::BuildPlanPreview as i32 {
                return Err(ServiceError::FailedPrecondition(format!(
                    "Command {command_id} is not a plan preview command"
                )));
            }
            if !piped_names.contains_key(&cmd.piped_id) {
                let piped = self.piped(&cmd.piped_id).await?;
                piped_names.insert(piped.id, piped.name);
            }
            let piped_name = piped_names.get(&cmd.piped_id).cloned().unwrap_or_default();

            if cmd.status == CommandStatus::CommandNotHandledYet as i32 {
                if !self.piped_online(&cmd.piped_id, now).await {
                    results.push(model::PlanPreviewCommandResult {
                        command_id: cmd.id,
                        piped_id: cmd.piped_id,
                        piped_name,
                        error: "Maybe Piped is offline currently.".into(),
                        ..Default::default()
                    });
                    continue;
                }
                if elapsed_secs(now, cmd.created_at) <= handle_timeout.as_secs() {
                    return Err(ServiceError::NotFound(format!(
                        "Waiting for result of command {command_id} from piped {}",
                        cmd.piped_id
                    )));
                }
                results.push(model::PlanPreviewCommandResult {
                    command_id: cmd.id,
                    piped_id: cmd.piped_id,
                    piped_name,
                    error: "Timed out, maybe the Piped is offline currently.".into(),
                    ..Default::default()
                });
                continue;
            }
            if elapsed_secs(now, cmd.handled_at) > PLAN_PREVIEW_OUTPUT_FRESHNESS.as_secs() {
                return Err(ServiceError::FailedPrecondition(format!(
                    "The output data for command {command_id} is too old for access"
                )));
            }
            handled.push(cmd.id);
        }

        for command_id in handled {
            let data = self
                .stores
                .command_outputs
                .get(&command_id)
                .await
                .map_err(|e| {
                    ServiceError::internal(
                        format!("Failed to retrieve output data of command {command_id}"),
                        e,
                    )
                })?;
            let mut result: model::PlanPreviewCommandResult = serde_json::from_slice(&data)
                .map_err(|e| {
                    ServiceError::internal(
                        format!("Failed to decode output data of command {command_id}"),
                        e,
                    )
                })?;
            result.piped_name = piped_names
                .get(&result.piped_id)
                .cloned()
                .unwrap_or_default();
            results.push(result);
        }

        for result in &mut results {
            fill_urls(result, &self.web_base_url);
        }
        Ok(GetPlanPreviewResultsResponse { results })
    }

    /// ONLINE from the piped's last ReportStat; an unreadable stat counts as not online.
    async fn piped_online(&self, piped_id: &str, now: i64) -> bool {
        match self.stores.piped_stats.get(piped_id).await {
            Ok(Some(stat)) => is_online(&stat, now),
            Ok(None) => false,
            Err(e) => {
                tracing::error!(error = %wisp_store::error::chain(&e), piped = %piped_id, "failed to read piped stat");
                false
            }
        }
    }
}

/// Seconds from `then` to `now`, 0 if `then` is in the future.
fn elapsed_secs(now: i64, then: i64) -> u64 {
    u64::try_from(now.saturating_sub(then)).unwrap_or(0)
}

/// Upstream's `FillURLs`: the console's piped settings page and application pages.
fn fill_urls(result: &mut model::PlanPreviewCommandResult, base_url: &str) {
    let base = base_url.trim_end_matches('/');
    result.piped_url = format!("{base}/settings/piped");
    for app in &mut result.results {
        app.application_url = format!("{base}/applications/{}", app.application_id);
    }
}
