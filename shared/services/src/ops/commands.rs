//! Commands for a piped, made by an operator (pipectl, the console): store one, ask for
//! an application's sync, read one back.

use wisp_proto::model::{self, command};
use wisp_store::collection::Collection;

use crate::error::ServiceError;
use crate::support::new_id;

/// Stores a new command (status NOT_HANDLED_YET), which puts it in its piped's
/// unhandled-commands index: the piped sees it on its next poll.
pub async fn add_command(
    commands: &Collection<model::Command>,
    cmd: model::Command,
) -> Result<model::Command, ServiceError> {
    commands
        .create(cmd)
        .await
        .map_err(|e| ServiceError::store(e, "create command"))
}

/// Asks the application's piped to sync it with `strategy` (a `model::SyncStrategy`, as
/// the request carried it) in a SYNC_APPLICATION command commanded by `commander`.
pub async fn sync_application(
    commands: &Collection<model::Command>,
    app: &model::Application,
    commander: &str,
    strategy: i32,
) -> Result<model::Command, ServiceError> {
    let cmd = model::Command {
        id: new_id(),
        piped_id: app.piped_id.clone(),
        application_id: app.id.clone(),
        project_id: app.project_id.clone(),
        commander: commander.to_string(),
        r#type: command::Type::SyncApplication as i32,
        sync_application: Some(command::SyncApplication {
            application_id: app.id.clone(),
            sync_strategy: strategy,
        }),
        ..Default::default()
    };
    add_command(commands, cmd).await
}

/// A command of any project (the caller checks whose it is).
pub async fn get_command(
    commands: &Collection<model::Command>,
    id: &str,
) -> Result<model::Command, ServiceError> {
    super::find(commands, id, "command").await
}
