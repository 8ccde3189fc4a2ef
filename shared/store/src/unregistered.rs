//! Application configurations found in Git but not registered, as reported per piped
//! (ReportUnregisteredApplicationConfigurations), for the web's "Add application" dialog.
//!
//! Upstream keeps them only in Redis (`HASHKEY:UNREGISTERED_APPS:<projectID>`, Go gob).
//! Here: datastore kind `UnregisteredApps`, one record per (project, piped) with id
//! `<project>/<piped>`, index slot 0 = (project, piped), data = protobuf `UnregisteredApps`.

use std::sync::Arc;

use prost::Message;
use wisp_proto::model::ApplicationInfo;

use crate::datastore::{Datastore, IndexKey, Kind, Query, Record};
use crate::error::{Result, StoreError};
use crate::optimistic::{Attempt, optimistic_write};

/// Index slot holding (project, piped).
pub const UNREGISTERED_BY_PROJECT: usize = 0;

/// The stored value: there is no upstream message for a list of applications.
#[derive(Clone, PartialEq, Message)]
pub struct UnregisteredApps {
    #[prost(message, repeated, tag = "1")]
    pub apps: Vec<ApplicationInfo>,
}

pub fn unregistered_apps_id(project_id: &str, piped_id: &str) -> String {
    format!("{project_id}/{piped_id}")
}

#[derive(Clone)]
pub struct UnregisteredAppStore {
    datastore: Arc<dyn Datastore>,
}

impl std::fmt::Debug for UnregisteredAppStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnregisteredAppStore")
            .finish_non_exhaustive()
    }
}

impl UnregisteredAppStore {
    pub fn new(datastore: Arc<dyn Datastore>) -> Self {
        UnregisteredAppStore { datastore }
    }

    /// Replaces what `piped_id` reported for `project_id`.
    pub async fn put(
        &self,
        project_id: &str,
        piped_id: &str,
        apps: Vec<ApplicationInfo>,
    ) -> Result<()> {
        if project_id.is_empty() || piped_id.is_empty() {
            return Err(StoreError::InvalidArgument(
                "empty project or piped id".into(),
            ));
        }
        let id = unregistered_apps_id(project_id, piped_id);
        let value = UnregisteredApps { apps };
        let record = |version: u64| Record {
            id: id.clone(),
            project_id: project_id.to_string(),
            version,
            data: value.encode_to_vec(),
            indexes: [Some(IndexKey::new(project_id, piped_id)), None, None],
            expires_at: None,
        };
        let (id, value, record) = (&id, &value, &record);
        optimistic_write(|| async move {
            let written = match self.datastore.get(Kind::UnregisteredApps, id).await {
                Ok(existing) => {
                    let unchanged = UnregisteredApps::decode(existing.data.as_slice())
                        .is_ok_and(|stored| stored == *value);
                    if unchanged {
                        return Ok(Attempt::Done(()));
                    }
                    self.datastore
                        .put(
                            Kind::UnregisteredApps,
                            record(existing.version),
                            existing.version,
                        )
                        .await
                }
                Err(StoreError::NotFound(_)) => {
                    self.datastore
                        .create(Kind::UnregisteredApps, record(1))
                        .await
                }
                Err(e) => return Err(e),
            };
            Ok(Attempt::Written(written))
        })
        .await
    }

    /// Everything the project's pipeds reported, sorted by path.
    pub async fn list(&self, project_id: &str) -> Result<Vec<ApplicationInfo>> {
        let mut apps = Vec::new();
        let mut query = Query::new(Kind::UnregisteredApps, UNREGISTERED_BY_PROJECT, project_id);
        loop {
            let page = self.datastore.query(&query).await?;
            for (record, _) in &page.records {
                if record.project_id != project_id {
                    continue;
                }
                let stored = UnregisteredApps::decode(record.data.as_slice()).map_err(|e| {
                    StoreError::internal_from(
                        format!("corrupt {} {}", Kind::UnregisteredApps, record.id),
                        e,
                    )
                })?;
                apps.extend(stored.apps);
            }
            match page.records.last() {
                Some((_, cursor)) if page.more => query.after = Some(cursor.clone()),
                _ => break,
            }
        }
        apps.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(apps)
    }
}
