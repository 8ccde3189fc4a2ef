//! What the admin commands (`project`, `piped`, `application`, `api-key`) share: they act
//! directly on the configured stores with the operator's own access (no admin server to
//! expose), through the domain operations of `wisp_services::ops`.

use wisp_store::StoreError;

use crate::error::CliError;
use wisp_app::App;

/// Who the CLI records as the creator of keys it makes.
pub(crate) const CLI_CREATOR: &str = "wisp-cli";

pub(crate) fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

pub(crate) fn store_failure(err: StoreError, what: &str) -> CliError {
    match err {
        StoreError::NotFound(_) => usage(format!("{what}: not found")),
        StoreError::AlreadyExists(_) => usage(format!("{what}: already exists")),
        StoreError::InvalidArgument(m) => usage(format!("{what}: {m}")),
        other => CliError::Failure(anyhow::anyhow!("{what}: {other}")),
    }
}

pub(crate) fn print_json(value: serde_json::Value) {
    println!("{value}");
}

pub(crate) async fn require_project(opened: &App, project: &str) -> Result<(), CliError> {
    if opened
        .project_exists(project)
        .await
        .map_err(|e| store_failure(e, "look up project"))?
    {
        Ok(())
    } else {
        Err(usage(format!(
            "unknown project {project:?} (see `wisp project list`, create one with `wisp project add`)"
        )))
    }
}
