//! Insight data for the console's Insights page, in upstream's filestore layout and JSON
//! (`pkg/insight/insightstore`), written by the insight-collection job and read by the
//! web API:
//!
//! | path | what |
//! |---|---|
//! | `insights/<project>/applications/applications.json` | the project's applications (kind, status, labels) |
//! | `insights/<project>/completed-deployments/block_<year>/block_meta.json` | the year's chunks |
//! | `insights/<project>/completed-deployments/block_<year>/chunk_<i>.json` | up to `chunk_max_count` completed deployments |
//! | `insights/milestone.json` | deployments completed before this are collected |
//!
//! Years are UTC years of the completion time.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wisp_proto::model::{
    Application, ApplicationActiveStatus, ApplicationKind, Deployment, DeploymentStatus,
};

use crate::error::{Result, StoreError};
use crate::filestore::{Filestore, PutCondition};
use crate::support::{check_segment, from_json, to_json};

pub const MILESTONE_PATH: &str = "insights/milestone.json";

/// Stage names whose creation marks the start of a rollback (upstream's
/// `FindRollbackStage`).
const ROLLBACK_STAGES: [&str; 2] = ["ROLLBACK", "CUSTOM_SYNC_ROLLBACK"];

/// One application, as the Insights page counts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplicationData {
    pub id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    /// `ApplicationKind` name, e.g. `KUBERNETES`.
    pub kind: String,
    /// `ApplicationActiveStatus` name: `ENABLED`, `DISABLED` or `DELETED`.
    pub status: String,
}

impl ApplicationData {
    pub fn from_application(app: &Application) -> ApplicationData {
        let status = if app.deleted {
            ApplicationActiveStatus::Deleted
        } else if app.disabled {
            ApplicationActiveStatus::Disabled
        } else {
            ApplicationActiveStatus::Enabled
        };
        ApplicationData {
            id: app.id.clone(),
            labels: app.labels.clone().into_iter().collect(),
            kind: ApplicationKind::try_from(app.kind)
                .map(|k| k.as_str_name().to_string())
                .unwrap_or_else(|_| app.kind.to_string()),
            status: status.as_str_name().to_string(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectApplicationData {
    #[serde(default, deserialize_with = "null_as_default")]
    pub applications: Vec<ApplicationData>,
    #[serde(default)]
    pub updated_at: i64,
}

/// One completed deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentData {
    pub id: String,
    pub app_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    pub started_at: i64,
    pub completed_at: i64,
    /// `DeploymentStatus` name, e.g. `DEPLOYMENT_SUCCESS`.
    pub complete_status: String,
    #[serde(default)]
    pub rollback_started_at: i64,
}

impl DeploymentData {
    pub fn from_deployment(d: &Deployment) -> DeploymentData {
        let rollback_started_at = d
            .stages
            .iter()
            .rev()
            .find(|s| ROLLBACK_STAGES.contains(&s.name.as_str()))
            .map_or(0, |s| s.created_at);
        DeploymentData {
            id: d.id.clone(),
            app_id: d.application_id.clone(),
            labels: d.labels.clone().into_iter().collect(),
            started_at: d.created_at,
            completed_at: d.completed_at,
            complete_status: DeploymentStatus::try_from(d.status)
                .map(|s| s.as_str_name().to_string())
                .unwrap_or_else(|_| d.status.to_string()),
            rollback_started_at,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentBlockMetadata {
    pub block_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub chunk_metadata: Vec<DeploymentChunkMetadata>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentChunkMetadata {
    pub chunk_id: String,
    pub chunk_index: usize,
    pub min_timestamp: i64,
    pub max_timestamp: i64,
    pub count: usize,
    pub completed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentChunk {
    pub chunk_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub deployments: Vec<DeploymentData>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Milestone {
    /// Every deployment completed before this (unix seconds) has been collected.
    pub deployment_completed_at_milestone: i64,
}

/// Go writes `null` for an empty slice or map.
fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn applications_path(project: &str) -> String {
    format!("insights/{project}/applications/applications.json")
}

fn block_id(year: i64) -> String {
    format!("block_{year}")
}

fn chunk_id(index: usize) -> String {
    format!("chunk_{index}")
}

fn block_meta_path(project: &str, block: &str) -> String {
    format!("insights/{project}/completed-deployments/{block}/block_meta.json")
}

fn chunk_path(project: &str, block: &str, chunk: &str) -> String {
    format!("insights/{project}/completed-deployments/{block}/{chunk}.json")
}

/// The UTC calendar year of a unix time (proleptic Gregorian).
pub fn utc_year(unix: i64) -> i64 {
    // Howard Hinnant's civil_from_days.
    let days = unix.div_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    yoe + era * 400 + i64::from(month <= 2)
}

#[derive(Clone)]
pub struct InsightStore {
    filestore: Arc<dyn Filestore>,
}

impl std::fmt::Debug for InsightStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InsightStore").finish_non_exhaustive()
    }
}

impl InsightStore {
    pub fn new(filestore: Arc<dyn Filestore>) -> Self {
        InsightStore { filestore }
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
    ) -> Result<Option<T>> {
        match self.filestore.get(path).await {
            Ok(object) => Ok(Some(from_json(what, &object.data)?)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn put_json<T: Serialize>(&self, what: &str, path: &str, value: &T) -> Result<()> {
        self.filestore
            .put(path, to_json(what, value)?, PutCondition::Any)
            .await
            .map(|_| ())
    }

    /// `None` until the collector has run for the project.
    pub async fn get_applications(&self, project: &str) -> Result<Option<ProjectApplicationData>> {
        check_segment("project id", project)?;
        self.get_json("insight applications", &applications_path(project))
            .await
    }

    pub async fn put_applications(
        &self,
        project: &str,
        data: &ProjectApplicationData,
    ) -> Result<()> {
        check_segment("project id", project)?;
        self.put_json("insight applications", &applications_path(project), data)
            .await
    }

    pub async fn get_milestone(&self) -> Result<Option<Milestone>> {
        self.get_json("insight milestone", MILESTONE_PATH).await
    }

    pub async fn put_milestone(&self, milestone: &Milestone) -> Result<()> {
        self.put_json("insight milestone", MILESTONE_PATH, milestone)
            .await
    }

    /// Appends completed deployments to the project's chunks (upstream's
    /// `PutCompletedDeployments`): grouped by the UTC year they completed in, appended to
    /// the year's first chunk that is not full (`chunk_max_count` deployments), skipping
    /// ids the chunk already holds, so a repeated run adds nothing twice.
    pub async fn put_completed_deployments(
        &self,
        project: &str,
        mut deployments: Vec<DeploymentData>,
        chunk_max_count: usize,
    ) -> Result<()> {
        check_segment("project id", project)?;
        let chunk_max_count = chunk_max_count.max(1);
        deployments.sort_by_key(|d| d.completed_at);
        let mut start = 0;
        while start < deployments.len() {
            let year = utc_year(deployments[start].completed_at);
            let end = deployments[start..]
                .iter()
                .position(|d| utc_year(d.completed_at) != year)
                .map_or(deployments.len(), |n| start + n);
            self.put_block(
                project,
                &block_id(year),
                &deployments[start..end],
                chunk_max_count,
            )
            .await?;
            start = end;
        }
        Ok(())
    }

    async fn put_block(
        &self,
        project: &str,
        block: &str,
        deployments: &[DeploymentData],
        chunk_max_count: usize,
    ) -> Result<()> {
        let meta_path = block_meta_path(project, block);
        let mut meta: DeploymentBlockMetadata = self
            .get_json("insight block metadata", &meta_path)
            .await?
            .unwrap_or_else(|| DeploymentBlockMetadata {
                block_id: block.to_string(),
                chunk_metadata: Vec::new(),
            });
        let mut index = 0;
        let mut chunk_index = 0;
        while index < deployments.len() {
            if chunk_index >= meta.chunk_metadata.len() {
                meta.chunk_metadata.push(DeploymentChunkMetadata {
                    chunk_id: chunk_id(chunk_index),
                    chunk_index,
                    min_timestamp: deployments[index].completed_at,
                    ..Default::default()
                });
            }
            let chunk_meta = &mut meta.chunk_metadata[chunk_index];
            chunk_index += 1;
            if chunk_meta.completed {
                continue;
            }
            if chunk_meta.count >= chunk_max_count {
                chunk_meta.completed = true;
                continue;
            }
            let take = (deployments.len() - index).min(chunk_max_count - chunk_meta.count);
            let adds = &deployments[index..index + take];
            index += take;
            let added = self
                .append_to_chunk(project, block, &chunk_meta.chunk_id, adds)
                .await?;
            chunk_meta.count += added;
            if chunk_meta.count >= chunk_max_count {
                chunk_meta.completed = true;
            }
            if let Some(first) = adds.first() {
                chunk_meta.min_timestamp = chunk_meta.min_timestamp.min(first.completed_at);
            }
            if let Some(last) = adds.last() {
                chunk_meta.max_timestamp = chunk_meta.max_timestamp.max(last.completed_at);
            }
        }
        self.put_json("insight block metadata", &meta_path, &meta)
            .await
    }

    /// Adds the deployments the chunk does not hold yet; returns how many it added.
    async fn append_to_chunk(
        &self,
        project: &str,
        block: &str,
        chunk: &str,
        adds: &[DeploymentData],
    ) -> Result<usize> {
        let path = chunk_path(project, block, chunk);
        let mut stored: DeploymentChunk = self
            .get_json("insight chunk", &path)
            .await?
            .unwrap_or_else(|| DeploymentChunk {
                chunk_id: chunk.to_string(),
                deployments: Vec::new(),
            });
        let mut known: HashSet<String> = stored.deployments.iter().map(|d| d.id.clone()).collect();
        let before = stored.deployments.len();
        for d in adds {
            if known.insert(d.id.clone()) {
                stored.deployments.push(d.clone());
            }
        }
        let added = stored.deployments.len() - before;
        if added > 0 {
            self.put_json("insight chunk", &path, &stored).await?;
        }
        Ok(added)
    }

    /// The project's deployments completed in `[from, to]` (upstream's
    /// `ListCompletedDeployments`, for the web API).
    pub async fn list_completed_deployments(
        &self,
        project: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<DeploymentData>> {
        check_segment("project id", project)?;
        if from > to {
            return Err(StoreError::InvalidArgument(format!(
                "from {from} is after to {to}"
            )));
        }
        let mut out = Vec::new();
        for year in utc_year(from)..=utc_year(to) {
            let block = block_id(year);
            let Some(meta) = self
                .get_json::<DeploymentBlockMetadata>(
                    "insight block metadata",
                    &block_meta_path(project, &block),
                )
                .await?
            else {
                continue;
            };
            for chunk_meta in &meta.chunk_metadata {
                if chunk_meta.max_timestamp < from || chunk_meta.min_timestamp > to {
                    continue;
                }
                let Some(chunk) = self
                    .get_json::<DeploymentChunk>(
                        "insight chunk",
                        &chunk_path(project, &block, &chunk_meta.chunk_id),
                    )
                    .await?
                else {
                    continue;
                };
                out.extend(
                    chunk
                        .deployments
                        .into_iter()
                        .filter(|d| from <= d.completed_at && d.completed_at <= to),
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_years() {
        assert_eq!(utc_year(0), 1970);
        assert_eq!(utc_year(946_684_799), 1999);
        assert_eq!(utc_year(946_684_800), 2000);
        assert_eq!(utc_year(1_704_067_199), 2023);
        assert_eq!(utc_year(1_704_067_200), 2024);
        assert_eq!(utc_year(1_709_251_200), 2024); // 2024-03-01
        assert_eq!(utc_year(-1), 1969);
    }

    #[test]
    fn upstream_json_shapes() {
        let data: ProjectApplicationData = serde_json::from_str(
            r#"{"applications":[{"id":"a","labels":null,"kind":"KUBERNETES","status":"ENABLED"}],"updated_at":7}"#,
        )
        .unwrap();
        assert_eq!(data.applications[0].labels, BTreeMap::new());
        let meta = DeploymentBlockMetadata {
            block_id: "block_2024".into(),
            chunk_metadata: vec![DeploymentChunkMetadata {
                chunk_id: "chunk_0".into(),
                ..Default::default()
            }],
        };
        assert_eq!(
            serde_json::to_string(&meta).unwrap(),
            r#"{"block_id":"block_2024","chunk_metadata":[{"chunk_id":"chunk_0","chunk_index":0,"min_timestamp":0,"max_timestamp":0,"count":0,"completed":false}]}"#
        );
    }
}
