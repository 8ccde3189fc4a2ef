//! Command outputs (ReportCommandHandled's `output`, e.g. a plan-preview result), opaque
//! bytes at `command-output/<commandID>.json`. A cleanup job deletes them after a while
//! (upstream: 48 h) with `list_older_than` + `delete`.

use std::sync::Arc;

use crate::error::Result;
use crate::filestore::{Filestore, PutCondition};
use crate::support::check_segment;

const PREFIX: &str = "command-output/";
const SUFFIX: &str = ".json";

pub fn command_output_path(command_id: &str) -> String {
    format!("{PREFIX}{command_id}{SUFFIX}")
}

/// One listing page of `list_older_than`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOutputPage {
    /// Commands whose output was last written before the cutoff, in path order.
    pub command_ids: Vec<String>,
    /// Pass back as `after` for the next page; `None` when the listing is done. A page
    /// may hold fewer ids than `limit` (even none) and still have a next one.
    pub next: Option<String>,
}

#[derive(Clone)]
pub struct CommandOutputStore {
    filestore: Arc<dyn Filestore>,
}

impl std::fmt::Debug for CommandOutputStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandOutputStore").finish_non_exhaustive()
    }
}

impl CommandOutputStore {
    pub fn new(filestore: Arc<dyn Filestore>) -> Self {
        CommandOutputStore { filestore }
    }

    pub async fn put(&self, command_id: &str, data: Vec<u8>) -> Result<()> {
        check_segment("command id", command_id)?;
        self.filestore
            .put(&command_output_path(command_id), data, PutCondition::Any)
            .await?;
        Ok(())
    }

    /// `NotFound` when absent.
    pub async fn get(&self, command_id: &str) -> Result<Vec<u8>> {
        check_segment("command id", command_id)?;
        Ok(self
            .filestore
            .get(&command_output_path(command_id))
            .await?
            .data)
    }

    /// Deleting an absent output is not an error.
    pub async fn delete(&self, command_id: &str) -> Result<()> {
        check_segment("command id", command_id)?;
        self.filestore
            .delete(&command_output_path(command_id))
            .await
    }

    /// Lists up to `limit` stored outputs from `after` (a previous page's `next`) and
    /// returns those written before `cutoff_unix` (seconds).
    pub async fn list_older_than(
        &self,
        cutoff_unix: i64,
        after: Option<&str>,
        limit: usize,
    ) -> Result<CommandOutputPage> {
        let page = self.filestore.list(PREFIX, after, limit).await?;
        let command_ids = page
            .objects
            .iter()
            .filter(|o| o.updated_at < cutoff_unix)
            .filter_map(|o| o.path.strip_prefix(PREFIX)?.strip_suffix(SUFFIX))
            .filter(|id| !id.contains('/'))
            .map(str::to_string)
            .collect();
        Ok(CommandOutputPage {
            command_ids,
            next: page.next,
        })
    }
}
