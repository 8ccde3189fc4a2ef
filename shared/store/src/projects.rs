//! The projects that exist: those the control-plane configuration file defines and those
//! in the datastore, merged in this one place for everyone who asks (the piped and API
//! key verifiers, the console, the jobs, the admin CLI, the quickstart project).
//!
//! A configuration project is never stored: it is read-only, with its static admin only
//! (upstream's "debug project"). When an id is in both, the configuration's wins, as
//! upstream's `ProjectStore` does.

use std::collections::BTreeMap;
use std::sync::Arc;

use wisp_proto::model;

use crate::collection::Collection;
use crate::entities::{pk, slot};
use crate::error::{Result, StoreError};

/// A project defined in the control-plane config, as the console sees it: read-only,
/// static admin only.
pub fn config_project(
    id: &str,
    desc: &str,
    admin_username: &str,
    admin_password_hash: &str,
) -> model::Project {
    model::Project {
        id: id.to_string(),
        desc: desc.to_string(),
        static_admin: Some(model::ProjectStaticUser {
            username: admin_username.to_string(),
            password_hash: admin_password_hash.to_string(),
        }),
        ..Default::default()
    }
}

/// Where a project is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProjectSource {
    /// The configuration file (read-only).
    Config,
    /// The datastore.
    Datastore,
}

/// The configuration's projects over the datastore's. Cheap to clone.
#[derive(Clone)]
pub struct ProjectDirectory {
    stored: Collection<model::Project>,
    config: Arc<BTreeMap<String, model::Project>>,
}

impl std::fmt::Debug for ProjectDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectDirectory")
            .field("config", &self.config.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ProjectDirectory {
    /// The datastore's projects and `config`, the configuration file's (see
    /// [`config_project`]).
    pub fn new(
        stored: Collection<model::Project>,
        config: impl IntoIterator<Item = model::Project>,
    ) -> Self {
        ProjectDirectory {
            stored,
            config: Arc::new(config.into_iter().map(|p| (p.id.clone(), p)).collect()),
        }
    }

    /// For callers that know only the configuration projects' ids.
    pub fn with_config_ids(
        stored: Collection<model::Project>,
        ids: impl IntoIterator<Item = String>,
    ) -> Self {
        ProjectDirectory::new(
            stored,
            ids.into_iter().map(|id| model::Project {
                id,
                ..Default::default()
            }),
        )
    }

    /// The configuration file's project `id`, if it defines one.
    pub fn config_project(&self, id: &str) -> Option<&model::Project> {
        self.config.get(id)
    }

    /// Whether the configuration file defines project `id`.
    pub fn is_config_project(&self, id: &str) -> bool {
        self.config.contains_key(id)
    }

    /// The configuration file's projects, by id.
    pub fn config_projects(&self) -> impl Iterator<Item = &model::Project> {
        self.config.values()
    }

    /// Project `id` and where it is defined: the configuration's if it defines one, else
    /// the datastore's; `None` when neither has it.
    pub async fn find(&self, id: &str) -> Result<Option<(model::Project, ProjectSource)>> {
        if let Some(project) = self.config.get(id) {
            return Ok(Some((project.clone(), ProjectSource::Config)));
        }
        match self.stored.get_any(id).await {
            Ok(project) => Ok(Some((project, ProjectSource::Datastore))),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether project `id` exists, in the configuration or in the datastore.
    pub async fn exists(&self, id: &str) -> Result<bool> {
        Ok(self.find(id).await?.is_some())
    }

    /// Every project of both, in id order; a stored project that the configuration also
    /// defines is listed twice (configuration first), so that listings can show it.
    pub async fn list(&self) -> Result<Vec<(model::Project, ProjectSource)>> {
        let stored = self
            .stored
            .list_all(slot::PROJECT_ALL, pk::PROJECT_ALL, None)
            .await?;
        let mut all: Vec<(model::Project, ProjectSource)> = self
            .config
            .values()
            .map(|p| (p.clone(), ProjectSource::Config))
            .chain(stored.into_iter().map(|p| (p, ProjectSource::Datastore)))
            .collect();
        all.sort_by(|(a, sa), (b, sb)| (&a.id, sa).cmp(&(&b.id, sb)));
        Ok(all)
    }

    /// The id of every project, sorted, each once.
    pub async fn ids(&self) -> Result<Vec<String>> {
        let mut ids: Vec<String> = self.list().await?.into_iter().map(|(p, _)| p.id).collect();
        ids.dedup();
        Ok(ids)
    }
}
