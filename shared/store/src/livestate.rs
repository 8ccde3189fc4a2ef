//! Application live state: the latest snapshot per application, JSON at
//! `application-live-state/<appID>.json`, read from the filestore every time (pipeds of any
//! instance write it, so no per-instance copy could be trusted without a read).
//!
//! Kubernetes resource events (ReportApplicationLiveStateEvents) are merged into the
//! stored snapshot and persisted to the filestore too (upstream only patches the cache,
//! so its patches vanish with Redis).

use std::collections::BTreeMap;
use std::sync::Arc;

use wisp_proto::model::{
    ApplicationKind, ApplicationLiveStateSnapshot, ApplicationLiveStateVersion,
    KubernetesApplicationLiveState, KubernetesResourceStateEvent, application_live_state_snapshot,
    kubernetes_resource_state, kubernetes_resource_state_event,
};

use crate::error::{Result, StoreError};
use crate::filestore::{Filestore, PutCondition};
use crate::optimistic::{Attempt, optimistic_write};
use crate::support::{check_segment, from_json, to_json};

pub fn live_state_path(application_id: &str) -> String {
    format!("application-live-state/{application_id}.json")
}

#[derive(Clone)]
pub struct LiveStateStore {
    filestore: Arc<dyn Filestore>,
}

impl std::fmt::Debug for LiveStateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveStateStore").finish_non_exhaustive()
    }
}

impl LiveStateStore {
    pub fn new(filestore: Arc<dyn Filestore>) -> Self {
        LiveStateStore { filestore }
    }

    /// Replaces the snapshot of `snapshot.application_id`.
    pub async fn put(&self, snapshot: &ApplicationLiveStateSnapshot) -> Result<()> {
        let app_id = snapshot.application_id.as_str();
        check_segment("application id", app_id)?;
        let data = to_json("live state snapshot", snapshot)?;
        // A piped re-sends every application's whole state every few minutes, nearly
        // always unchanged. When only the version moved, the object is not rewritten (an
        // S3 PUT costs twelve GETs). Events older than
        // the stored version are still skipped by `patch`, and an event between the two
        // versions can only repeat what both snapshots already hold.
        // Compared with the stored object, not a cached copy: a copy that another
        // instance's write made stale would skip a write that is needed.
        let unchanged = match self.read_stored(app_id).await {
            Ok(stored) => same_state(&stored, snapshot),
            Err(_) => false,
        };
        if !unchanged {
            self.filestore
                .put(&live_state_path(app_id), data, PutCondition::Any)
                .await?;
        }
        Ok(())
    }

    /// `NotFound` when the application has no snapshot. Always read from the filestore:
    /// pipeds of other instances update snapshots, and a cached copy could only be
    /// trusted after a request that costs as much as the read.
    pub async fn get(&self, app_id: &str) -> Result<ApplicationLiveStateSnapshot> {
        check_segment("application id", app_id)?;
        self.read_stored(app_id).await
    }

    async fn read_stored(&self, app_id: &str) -> Result<ApplicationLiveStateSnapshot> {
        let path = live_state_path(app_id);
        let object = self.filestore.get(&path).await?;
        from_json(&format!("live state {path}"), &object.data)
    }

    /// Applies Kubernetes resource events to `app_id`'s snapshot (all of `events`, whatever
    /// their `application_id`; see `patch_events` to group them). Events older than the
    /// snapshot's version are skipped. Without a stored snapshot this does nothing.
    pub async fn patch(&self, app_id: &str, events: &[KubernetesResourceStateEvent]) -> Result<()> {
        check_segment("application id", app_id)?;
        if events.is_empty() {
            return Ok(());
        }
        let path = &live_state_path(app_id);
        optimistic_write(|| async move {
            let object = match self.filestore.get(path).await {
                Ok(object) => object,
                Err(StoreError::NotFound(_)) => {
                    tracing::debug!(app_id, "no live state snapshot to patch; events ignored");
                    return Ok(Attempt::Done(()));
                }
                Err(e) => return Err(e),
            };
            let mut snapshot: ApplicationLiveStateSnapshot =
                from_json(&format!("live state {path}"), &object.data)?;
            let before = snapshot.clone();
            apply_kubernetes_events(&mut snapshot, events);
            if snapshot == before {
                return Ok(Attempt::Done(()));
            }
            let data = to_json("live state snapshot", &snapshot)?;
            // Deleted meanwhile (NotFound): the next read decides.
            let written = self
                .filestore
                .put(path, data, PutCondition::Matches(object.etag))
                .await;
            Ok(Attempt::Written(written.map(|_| ())))
        })
        .await
    }

    /// ReportApplicationLiveStateEvents: groups `events` by application and patches each
    /// snapshot. Stops at the first error.
    pub async fn patch_events(&self, events: &[KubernetesResourceStateEvent]) -> Result<()> {
        let mut by_app: BTreeMap<&str, Vec<KubernetesResourceStateEvent>> = BTreeMap::new();
        for event in events {
            by_app
                .entry(event.application_id.as_str())
                .or_default()
                .push(event.clone());
        }
        for (app_id, events) in by_app {
            self.patch(app_id, &events).await?;
        }
        Ok(())
    }
}

/// Whether two snapshots hold the same state, whatever their versions.
fn same_state(a: &ApplicationLiveStateSnapshot, b: &ApplicationLiveStateSnapshot) -> bool {
    a.version.is_some()
        && b.version.is_some()
        && ApplicationLiveStateSnapshot {
            version: b.version,
            ..a.clone()
        } == *b
}

fn is_before(a: &ApplicationLiveStateVersion, b: &ApplicationLiveStateVersion) -> bool {
    (a.timestamp, a.index) < (b.timestamp, b.index)
}

/// Upstream's merge: an add-or-update replaces the resource with the same id (in place)
/// or appends it; a delete removes it. Events older than the snapshot are skipped, and so
/// are events without a state or of an unknown type. The application's health is then recomputed from the
/// patched resources (upstream recomputes it from the resources before the patch).
pub fn apply_kubernetes_events(
    snapshot: &mut ApplicationLiveStateSnapshot,
    events: &[KubernetesResourceStateEvent],
) {
    let version = snapshot.version.unwrap_or_default();
    for event in events {
        let Some(state) = &event.state else { continue };
        if is_before(&event.snapshot_version.unwrap_or_default(), &version) {
            continue;
        }
        let upsert = event.r#type == kubernetes_resource_state_event::Type::AddOrUpdated as i32;
        let delete = event.r#type == kubernetes_resource_state_event::Type::Deleted as i32;
        if !upsert && !delete {
            continue;
        }
        let resources = &mut snapshot
            .kubernetes
            .get_or_insert_with(KubernetesApplicationLiveState::default)
            .resources;
        if delete {
            resources.retain(|r| r.id != state.id);
        } else if let Some(existing) = resources.iter_mut().find(|r| r.id == state.id) {
            *existing = state.clone();
        } else {
            resources.push(state.clone());
        }
    }
    determine_kubernetes_health(snapshot);
}

/// Healthy unless some resource is OTHER (upstream's rule for Kubernetes applications).
fn determine_kubernetes_health(snapshot: &mut ApplicationLiveStateSnapshot) {
    if snapshot.kind != ApplicationKind::Kubernetes as i32 {
        return;
    }
    let Some(app) = &snapshot.kubernetes else {
        return;
    };
    let other = app
        .resources
        .iter()
        .any(|r| r.health_status == kubernetes_resource_state::HealthStatus::Other as i32);
    snapshot.health_status = if other {
        application_live_state_snapshot::Status::Other as i32
    } else {
        application_live_state_snapshot::Status::Healthy as i32
    };
}
