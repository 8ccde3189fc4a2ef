//! Domain stores against the embedded backends, with a working cache and with a cache that
//! fails every call (the cache must never be needed for correctness).

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use wisp_proto::model::{
    AnalysisResult, ApplicationInfo, ApplicationKind, ApplicationLiveStateSnapshot,
    ApplicationLiveStateVersion, KubernetesApplicationLiveState, KubernetesResourceState,
    KubernetesResourceStateEvent, LogBlock, application_live_state_snapshot,
    kubernetes_resource_state, kubernetes_resource_state_event,
};
use wisp_store::cache::Cache;
use wisp_store::collection::now_unix;
use wisp_store::filestore::PutCondition;
use wisp_store::pipedstat::{PIPED_STATS_CACHE_KEY, is_online};
use wisp_store::stagelog::{StageLog, stage_log_cache_key, stage_log_path};
use wisp_store::{StoreError, Stores};
use wisp_store_embedded::MemoryCache;

/// A cache whose every call fails, as when Redis is down.
struct FailingCache;

fn down<T>() -> Result<T, StoreError> {
    Err(StoreError::unavailable("cache is down"))
}

#[async_trait]
impl Cache for FailingCache {
    async fn get(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
        down()
    }
    async fn put(&self, _: &str, _: Vec<u8>, _: Option<Duration>) -> Result<(), StoreError> {
        down()
    }
    async fn delete(&self, _: &str) -> Result<(), StoreError> {
        down()
    }
    async fn hash_set(&self, _: &str, _: &str, _: Vec<u8>) -> Result<(), StoreError> {
        down()
    }
    async fn hash_get(&self, _: &str, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
        down()
    }
    async fn hash_get_all(&self, _: &str) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        down()
    }
    async fn hash_delete(&self, _: &str, _: &str) -> Result<(), StoreError> {
        down()
    }
}

/// A cache every instance shares, as Redis: the stores may keep piped stats in it alone.
struct Shared<C>(C);

#[async_trait]
impl<C: Cache> Cache for Shared<C> {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.get(key).await
    }
    async fn put(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.0.put(key, value, ttl).await
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.0.delete(key).await
    }
    async fn hash_set(&self, key: &str, field: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.0.hash_set(key, field, value).await
    }
    async fn hash_get(&self, key: &str, field: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.hash_get(key, field).await
    }
    async fn hash_get_all(&self, key: &str) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        self.0.hash_get_all(key).await
    }
    async fn hash_delete(&self, key: &str, field: &str) -> Result<(), StoreError> {
        self.0.hash_delete(key, field).await
    }
    fn shared(&self) -> bool {
        true
    }
}

type Env = wisp_testkit::TempStores;

fn env_with(cache: Arc<dyn Cache>) -> Env {
    wisp_testkit::TempStores::with_cache(cache)
}

fn env() -> Env {
    env_with(Arc::new(MemoryCache::default()))
}

fn failing_env() -> Env {
    env_with(Arc::new(FailingCache))
}

/// Both flavours, for tests whose outcome must not depend on the cache.
fn envs() -> Vec<(&'static str, Env)> {
    vec![("memory cache", env()), ("failing cache", failing_env())]
}

fn block(index: i64, log: &str) -> LogBlock {
    LogBlock {
        index,
        log: log.into(),
        severity: 0,
        created_at: 1_590_000_000 + index,
    }
}

fn indexes(log: &StageLog) -> Vec<i64> {
    log.blocks.iter().map(|b| b.index).collect()
}

async fn file_text(stores: &Stores, path: &str) -> String {
    let object = stores.filestore.get(path).await.expect("file exists");
    String::from_utf8(object.data).expect("utf8")
}

// ---------------------------------------------------------------- stage logs

#[tokio::test]
async fn stage_log_merges_and_dedups_by_index() {
    for (name, env) in envs() {
        let logs = &env.stores.stage_logs;
        logs.append("d1", "s1", 0, &[block(3, "three"), block(1, "one")])
            .await
            .expect(name);
        logs.append("d1", "s1", 0, &[block(2, "two"), block(3, "THREE again")])
            .await
            .expect(name);
        let log = logs.fetch("d1", "s1", 0, 0).await.expect(name);
        assert_eq!(indexes(&log), vec![1, 2, 3], "{name}");
        assert_eq!(log.blocks[2].log, "three", "{name}: existing index kept");
        assert!(!log.completed, "{name}");

        // A repeated index is a no-op: the file does not change.
        let path = stage_log_path("d1", "s1", 0);
        let before = file_text(&env.stores, &path).await;
        logs.append("d1", "s1", 0, &[block(2, "changed")])
            .await
            .expect(name);
        logs.append_from_checkpoint("d1", "s1", 0, &[block(1, "x")], false)
            .await
            .expect(name);
        assert_eq!(file_text(&env.stores, &path).await, before, "{name}");

        // Retries are separate logs.
        assert!(
            logs.fetch("d1", "s1", 1, 0)
                .await
                .is_err_and(|e| e.is_not_found()),
            "{name}"
        );
    }
}

#[tokio::test]
async fn stage_log_fetch_offset_and_not_found() {
    for (name, env) in envs() {
        let logs = &env.stores.stage_logs;
        let err = logs.fetch("d", "s", 0, 0).await.expect_err(name);
        assert!(matches!(err, StoreError::NotFound(_)), "{name}: {err}");
        let blocks: Vec<_> = (1..=5).map(|i| block(i, "x")).collect();
        logs.append("d", "s", 0, &blocks).await.expect(name);
        assert_eq!(
            indexes(&logs.fetch("d", "s", 0, 3).await.expect(name)),
            vec![3, 4, 5],
            "{name}"
        );
        assert_eq!(
            indexes(&logs.fetch("d", "s", 0, 6).await.expect(name)),
            Vec::<i64>::new()
        );
        assert_eq!(
            indexes(&logs.fetch("d", "s", 0, -1).await.expect(name)).len(),
            5
        );
    }
}

#[tokio::test]
async fn stage_log_completion_is_final() {
    for (name, env) in envs() {
        let logs = &env.stores.stage_logs;
        logs.append("d", "s", 0, &[block(1, "a")])
            .await
            .expect(name);
        logs.append_from_checkpoint("d", "s", 0, &[block(2, "b")], true)
            .await
            .expect(name);
        let log = logs.fetch("d", "s", 0, 0).await.expect(name);
        assert!(log.completed, "{name}");
        assert_eq!(indexes(&log), vec![1, 2], "{name}");

        let err = logs
            .append("d", "s", 0, &[block(3, "c")])
            .await
            .expect_err(name);
        assert!(
            matches!(err, StoreError::FailedPrecondition(_)),
            "{name}: {err}"
        );
        let err = logs
            .append_from_checkpoint("d", "s", 0, &[], true)
            .await
            .expect_err(name);
        assert!(
            matches!(err, StoreError::FailedPrecondition(_)),
            "{name}: {err}"
        );
        assert_eq!(
            indexes(&logs.fetch("d", "s", 0, 0).await.expect(name)),
            vec![1, 2]
        );

        // Completing a log that had no blocks yet still records the completion.
        logs.append_from_checkpoint("d", "empty", 0, &[], true)
            .await
            .expect(name);
        let log = logs.fetch("d", "empty", 0, 0).await.expect(name);
        assert!(log.completed && log.blocks.is_empty(), "{name}");
    }
}

#[tokio::test]
async fn stage_log_file_is_upstream_ndjson_with_eol() {
    let env = env();
    let logs = &env.stores.stage_logs;
    let path = stage_log_path("dep-1", "stage-0", 2);
    assert_eq!(path, "log/dep-1/stage-0/2.txt");
    let multi = LogBlock {
        index: 2,
        log: "Hello 2\nPiped,\n\"quoted\" \t tab".into(),
        severity: 2,
        created_at: 1_590_499_432,
    };
    let first = LogBlock {
        index: 1,
        log: "Hello 1".into(),
        severity: 1,
        created_at: 1_590_499_431,
    };
    logs.append("dep-1", "stage-0", 2, &[multi.clone(), first.clone()])
        .await
        .expect("append");
    assert_eq!(
        file_text(&env.stores, &path).await,
        "{\"index\":1,\"log\":\"Hello 1\",\"severity\":1,\"created_at\":1590499431}\n\
         {\"index\":2,\"log\":\"Hello 2\\nPiped,\\n\\\"quoted\\\" \\t tab\",\"severity\":2,\"created_at\":1590499432}\n"
    );
    logs.append_from_checkpoint("dep-1", "stage-0", 2, &[], true)
        .await
        .expect("complete");
    let text = file_text(&env.stores, &path).await;
    assert!(
        text.ends_with("\"created_at\":1590499432}\nEOL"),
        "{text:?}"
    );
    assert_eq!(text.lines().count(), 3);

    // A fresh store without cache reads it back from the file.
    let cold = env_with(Arc::new(FailingCache));
    let data = env.stores.filestore.get(&path).await.expect("file").data;
    cold.stores
        .filestore
        .put(&path, data, PutCondition::Any)
        .await
        .expect("copy");
    let log = cold
        .stores
        .stage_logs
        .fetch("dep-1", "stage-0", 2, 0)
        .await
        .expect("fetch");
    assert_eq!(log.blocks, vec![first, multi]);
    assert!(log.completed);
}

#[tokio::test]
async fn stage_log_reads_files_written_by_upstream() {
    let env = failing_env();
    // Go omits zero-valued fields; lines may carry whitespace; blank lines are skipped.
    let upstream = "\n\t{\"index\":1,\"log\":\"Hello 1\\nWorld\",\"created_at\":1590499431}\n\n\
                    {\"index\":2,\"log\":\"Hello 2\",\"severity\":1,\"created_at\":1590499432}\nEOL";
    let path = stage_log_path("d", "s", 0);
    env.stores
        .filestore
        .put(&path, upstream.as_bytes().to_vec(), PutCondition::Any)
        .await
        .expect("put");
    let log = env
        .stores
        .stage_logs
        .fetch("d", "s", 0, 0)
        .await
        .expect("fetch");
    assert!(log.completed);
    assert_eq!(log.blocks[0].log, "Hello 1\nWorld");
    assert_eq!(log.blocks[0].severity, 0);
    assert_eq!(indexes(&log), vec![1, 2]);
}

#[tokio::test]
async fn stage_log_corrupt_file_is_internal_error() {
    for (name, env) in envs() {
        let path = stage_log_path("d", "s", 0);
        let data = b"{\"index\":1,\"log\":\"ok\"}\n{not json\n".to_vec();
        env.stores
            .filestore
            .put(&path, data, PutCondition::Any)
            .await
            .expect("put");
        let err = env
            .stores
            .stage_logs
            .fetch("d", "s", 0, 0)
            .await
            .expect_err(name);
        assert!(
            matches!(&err, StoreError::Internal { context, .. } if context.contains(&path)),
            "{name}: {err}"
        );
        let err = env
            .stores
            .stage_logs
            .append("d", "s", 0, &[block(5, "x")])
            .await
            .expect_err(name);
        assert!(matches!(&err, StoreError::Internal { .. }), "{name}: {err}");
    }
}

#[tokio::test]
async fn stage_log_rejects_ids_that_escape_the_prefix() {
    let env = env();
    for (dep, stage) in [("..", "s"), ("d", "a/b"), ("", "s"), ("d", "")] {
        let err = env
            .stores
            .stage_logs
            .append(dep, stage, 0, &[block(1, "x")])
            .await
            .expect_err("bad");
        assert!(
            matches!(err, StoreError::InvalidArgument(_)),
            "{dep:?} {stage:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stage_log_concurrent_appends_lose_nothing() {
    for (name, env) in envs() {
        let mut tasks = Vec::new();
        for i in 0..20 {
            let logs = env.stores.stage_logs.clone();
            tasks.push(tokio::spawn(async move {
                logs.append("d", "s", 0, &[block(i, &format!("block {i}"))])
                    .await
            }));
        }
        for task in tasks {
            task.await.expect("task").expect(name);
        }
        let expected: Vec<i64> = (0..20).collect();
        // The file is complete...
        let path = stage_log_path("d", "s", 0);
        let text = file_text(&env.stores, &path).await;
        assert_eq!(text.lines().count(), 20, "{name}");
        // ...and so is what readers get.
        let log = env
            .stores
            .stage_logs
            .fetch("d", "s", 0, 0)
            .await
            .expect(name);
        assert_eq!(indexes(&log), expected, "{name}");
    }
}

#[tokio::test]
async fn stage_log_survives_a_stale_cache() {
    let env = env();
    let logs = &env.stores.stage_logs;
    logs.append("d", "s", 0, &[block(1, "a")])
        .await
        .expect("append");
    let key = stage_log_cache_key("d", "s", 0);
    assert_eq!(key, "piped-stage-log:d:s:0");
    let stale = env
        .stores
        .cache
        .get(&key)
        .await
        .expect("cache")
        .expect("cached");
    logs.append("d", "s", 0, &[block(2, "b")])
        .await
        .expect("append");
    // Another instance left an older entry behind (e.g. a lost race): the next append
    // notices the etag mismatch, merges with the file and refreshes the cache.
    env.stores
        .cache
        .put(&key, stale, None)
        .await
        .expect("cache");
    logs.append("d", "s", 0, &[block(3, "c")])
        .await
        .expect("append");
    assert_eq!(
        indexes(&logs.fetch("d", "s", 0, 0).await.expect("fetch")),
        vec![1, 2, 3]
    );
    let text = file_text(&env.stores, &stage_log_path("d", "s", 0)).await;
    assert_eq!(text.lines().count(), 3);

    // Unreadable cache entries are ignored.
    env.stores
        .cache
        .put(&key, b"garbage".to_vec(), None)
        .await
        .expect("cache");
    assert_eq!(
        indexes(&logs.fetch("d", "s", 0, 0).await.expect("fetch")),
        vec![1, 2, 3]
    );
    logs.append("d", "s", 0, &[block(4, "d")])
        .await
        .expect("append");
    assert_eq!(
        indexes(&logs.fetch("d", "s", 0, 2).await.expect("fetch")),
        vec![2, 3, 4]
    );
}

#[tokio::test]
async fn stage_log_cache_holds_upstream_shape() {
    let env = env();
    env.stores
        .stage_logs
        .append("d", "s", 0, &[block(1, "a")])
        .await
        .expect("append");
    let raw = env
        .stores
        .cache
        .get("piped-stage-log:d:s:0")
        .await
        .expect("cache")
        .expect("cached");
    let value: serde_json::Value = serde_json::from_slice(&raw).expect("json");
    assert_eq!(value["Completed"], serde_json::json!(false));
    assert_eq!(value["Blocks"][0]["index"], serde_json::json!(1));
}

// ---------------------------------------------------------------- live state

fn resource(id: &str, health: kubernetes_resource_state::HealthStatus) -> KubernetesResourceState {
    KubernetesResourceState {
        id: id.into(),
        name: id.into(),
        kind: "Deployment".into(),
        health_status: health as i32,
        ..Default::default()
    }
}

fn event(
    id: &str,
    app: &str,
    kind: kubernetes_resource_state_event::Type,
    state: KubernetesResourceState,
    version: (i64, i64),
) -> KubernetesResourceStateEvent {
    KubernetesResourceStateEvent {
        id: id.into(),
        application_id: app.into(),
        r#type: kind as i32,
        state: Some(state),
        snapshot_version: Some(ApplicationLiveStateVersion {
            timestamp: version.0,
            index: version.1,
        }),
        created_at: 0,
    }
}

fn snapshot(app: &str) -> ApplicationLiveStateSnapshot {
    use kubernetes_resource_state::HealthStatus::Healthy;
    ApplicationLiveStateSnapshot {
        application_id: app.into(),
        piped_id: "piped-1".into(),
        project_id: "proj".into(),
        kind: ApplicationKind::Kubernetes as i32,
        health_status: application_live_state_snapshot::Status::Healthy as i32,
        kubernetes: Some(KubernetesApplicationLiveState {
            resources: vec![resource("r1", Healthy), resource("r2", Healthy)],
        }),
        version: Some(ApplicationLiveStateVersion {
            timestamp: 100,
            index: 1,
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn live_state_round_trip() {
    for (name, env) in envs() {
        let live = &env.stores.live_states;
        assert!(
            live.get("app-1").await.is_err_and(|e| e.is_not_found()),
            "{name}"
        );
        let snap = snapshot("app-1");
        live.put(&snap).await.expect(name);
        assert_eq!(live.get("app-1").await.expect(name), snap, "{name}");
        // Stored as JSON with snake_case keys at upstream's path.
        let raw = env
            .stores
            .filestore
            .get("application-live-state/app-1.json")
            .await
            .expect(name);
        let value: serde_json::Value = serde_json::from_slice(&raw.data).expect("json");
        assert_eq!(value["application_id"], serde_json::json!("app-1"));
        assert_eq!(
            value["kubernetes"]["resources"][1]["id"],
            serde_json::json!("r2")
        );

        // The same state again under a newer version: the object is not rewritten, and
        // readers see the same state (under the stored version: no instance keeps a copy
        // of its own that others could not see).
        let mut again = snap.clone();
        again.version = Some(ApplicationLiveStateVersion {
            timestamp: snap.version.map_or(0, |v| v.timestamp) + 600,
            index: 0,
        });
        live.put(&again).await.expect(name);
        let after = env
            .stores
            .filestore
            .get("application-live-state/app-1.json")
            .await
            .expect(name);
        assert_eq!(
            after.etag, raw.etag,
            "{name}: an unchanged state is not rewritten"
        );
        let read = live.get("app-1").await.expect(name);
        assert_eq!(
            ApplicationLiveStateSnapshot {
                version: again.version,
                ..read.clone()
            },
            again,
            "{name}"
        );
        assert_eq!(read.version, snap.version, "{name}");

        // A changed state is written.
        let mut changed = again.clone();
        changed.health_status = application_live_state_snapshot::Status::Unhealthy as i32;
        live.put(&changed).await.expect(name);
        assert_eq!(
            LiveStateCheck(&env.stores).file("app-1").await,
            changed,
            "{name}"
        );
    }
}

#[tokio::test]
async fn live_state_patch_merges_kubernetes_events() {
    use kubernetes_resource_state::HealthStatus::{Healthy, Other};
    use kubernetes_resource_state_event::Type::{AddOrUpdated, Deleted};
    for (name, env) in envs() {
        let live = &env.stores.live_states;
        live.put(&snapshot("app-1")).await.expect(name);
        live.put(&snapshot("app-2")).await.expect(name);
        let events = vec![
            event(
                "e1",
                "app-1",
                AddOrUpdated,
                resource("r3", Healthy),
                (100, 2),
            ),
            event("e2", "app-1", AddOrUpdated, resource("r1", Other), (101, 0)),
            event("e3", "app-1", Deleted, resource("r2", Healthy), (101, 1)),
            // Older than the snapshot: skipped.
            event("e4", "app-1", Deleted, resource("r3", Healthy), (100, 0)),
            event("e5", "app-2", Deleted, resource("r1", Healthy), (200, 0)),
            // No snapshot: ignored.
            event(
                "e6",
                "app-missing",
                AddOrUpdated,
                resource("x", Healthy),
                (200, 0),
            ),
        ];
        live.patch_events(&events).await.expect(name);

        // Read through a cache-less store: the patch reached the filestore.
        let cold = LiveStateCheck(&env.stores);
        let app1 = cold.file("app-1").await;
        let ids: Vec<_> = app1
            .kubernetes
            .as_ref()
            .expect("k8s")
            .resources
            .iter()
            .map(|r| r.id.clone())
            .collect();
        assert_eq!(ids, vec!["r1", "r3"], "{name}");
        assert_eq!(
            app1.kubernetes.as_ref().expect("k8s").resources[0].health_status,
            Other as i32
        );
        assert_eq!(
            app1.health_status,
            application_live_state_snapshot::Status::Other as i32,
            "{name}"
        );
        assert_eq!(
            live.get("app-1").await.expect(name),
            app1,
            "{name}: cache agrees"
        );

        let app2 = cold.file("app-2").await;
        let ids: Vec<_> = app2
            .kubernetes
            .as_ref()
            .expect("k8s")
            .resources
            .iter()
            .map(|r| r.id.clone())
            .collect();
        assert_eq!(ids, vec!["r2"], "{name}");

        assert!(
            live.get("app-missing")
                .await
                .is_err_and(|e| e.is_not_found()),
            "{name}"
        );
        live.patch("app-missing", &events[5..]).await.expect(name);
        assert!(
            live.get("app-missing")
                .await
                .is_err_and(|e| e.is_not_found()),
            "{name}"
        );
    }
}

struct LiveStateCheck<'a>(&'a Stores);

impl LiveStateCheck<'_> {
    async fn file(&self, app: &str) -> ApplicationLiveStateSnapshot {
        let object = self
            .0
            .filestore
            .get(&format!("application-live-state/{app}.json"))
            .await
            .expect("file");
        serde_json::from_slice(&object.data).expect("json")
    }
}

// ---------------------------------------------------------------- shared objects, analysis, command outputs

#[tokio::test]
async fn shared_objects() {
    let env = failing_env();
    let so = &env.stores.shared_objects;
    assert!(
        so.get("app", "analysis", "k")
            .await
            .is_err_and(|e| e.is_not_found())
    );
    so.put("app", "analysis", "k", b"\x00opaque".to_vec())
        .await
        .expect("put");
    assert_eq!(
        so.get("app", "analysis", "k").await.expect("get"),
        b"\x00opaque"
    );
    let raw = env
        .stores
        .filestore
        .get("application-shared-objects/app/analysis/k.json")
        .await
        .expect("path");
    assert_eq!(raw.data, b"\x00opaque");
    assert!(
        so.get("app", "other", "k")
            .await
            .is_err_and(|e| e.is_not_found())
    );
    for (plugin, key) in [
        ("", "k"),
        ("p", ""),
        ("a/b", "k"),
        ("p", "../x"),
        ("..", "k"),
        ("p", "x//y"),
        ("p", "/x"),
        ("p", "x/"),
    ] {
        let err = so
            .put("app", plugin, key, vec![1])
            .await
            .expect_err("rejected");
        assert!(
            matches!(err, StoreError::InvalidArgument(_)),
            "{plugin:?} {key:?}"
        );
        let err = so.get("app", plugin, key).await.expect_err("rejected");
        assert!(
            matches!(err, StoreError::InvalidArgument(_)),
            "{plugin:?} {key:?}"
        );
    }
    // Nested keys are plain path segments, as upstream allows.
    so.put("app", "p", "x/y", b"nested".to_vec())
        .await
        .expect("nested put");
    assert_eq!(
        so.get("app", "p", "x/y").await.expect("nested get"),
        b"nested"
    );
}

#[tokio::test]
async fn analysis_results() {
    let env = failing_env();
    let ar = &env.stores.analysis_results;
    assert!(ar.get("app").await.is_err_and(|e| e.is_not_found()));
    ar.put("app", &AnalysisResult { start_time: 42 })
        .await
        .expect("put");
    assert_eq!(
        ar.get("app").await.expect("get"),
        AnalysisResult { start_time: 42 }
    );
    let raw = env
        .stores
        .filestore
        .get("latest-analysis-result/app.json")
        .await
        .expect("path");
    assert_eq!(raw.data, b"{\"start_time\":42}");
}

#[tokio::test]
async fn command_outputs() {
    let env = failing_env();
    let co = &env.stores.command_outputs;
    assert!(co.get("c1").await.is_err_and(|e| e.is_not_found()));
    co.put("c1", b"{\"x\":1}".to_vec()).await.expect("put");
    co.put("c2", b"two".to_vec()).await.expect("put");
    assert_eq!(co.get("c1").await.expect("get"), b"{\"x\":1}");
    assert!(
        env.stores
            .filestore
            .get("command-output/c2.json")
            .await
            .is_ok()
    );

    let future = now_unix() + 10;
    let page = co.list_older_than(future, None, 1).await.expect("list");
    assert_eq!(page.command_ids, vec!["c1"]);
    let next = page.next.expect("more");
    let page = co
        .list_older_than(future, Some(&next), 1)
        .await
        .expect("list");
    assert_eq!(page.command_ids, vec!["c2"]);
    let page = co
        .list_older_than(now_unix() - 3600, None, 10)
        .await
        .expect("list");
    assert!(page.command_ids.is_empty() && page.next.is_none());

    co.delete("c1").await.expect("delete");
    co.delete("c1").await.expect("delete absent");
    assert!(co.get("c1").await.is_err_and(|e| e.is_not_found()));
    assert!(matches!(
        co.put("../x", vec![]).await,
        Err(StoreError::InvalidArgument(_))
    ));
}

// ---------------------------------------------------------------- piped stats

#[tokio::test]
async fn piped_stat_online_offline() {
    for (name, env) in envs() {
        let ps = &env.stores.piped_stats;
        assert!(ps.get("p1").await.expect(name).is_none(), "{name}");
        let now = now_unix();
        ps.put("proj", "p1", b"metrics 1".to_vec(), now)
            .await
            .expect(name);
        let stat = ps.get("p1").await.expect(name).expect("stat");
        assert_eq!(
            (
                stat.piped_id.as_str(),
                stat.metrics.as_slice(),
                stat.timestamp
            ),
            ("p1", &b"metrics 1"[..], now)
        );
        assert!(is_online(&stat, now + 119), "{name}");
        assert!(!is_online(&stat, now + 120), "{name}");

        // An older report does not move the stat back.
        ps.put("proj", "p1", b"old".to_vec(), now - 500)
            .await
            .expect(name);
        assert_eq!(
            ps.get("p1").await.expect(name).expect("stat").timestamp,
            now
        );

        // A stale stat reads as offline.
        ps.put("proj", "p2", vec![], now - 121).await.expect(name);
        let stat = ps.get("p2").await.expect(name).expect("stat");
        assert!(!is_online(&stat, now_unix()), "{name}");

        // Stored in the datastore, expiring after a day.
        let record = env
            .stores
            .datastore
            .get(wisp_store::Kind::PipedStat, "p1")
            .await
            .expect(name);
        assert_eq!(record.project_id, "proj");
        assert_eq!(record.expires_at, Some(now + 24 * 3600));
    }
}

#[tokio::test]
async fn piped_stat_stale_cache_does_not_hide_a_fresh_report() {
    let env = env();
    let ps = &env.stores.piped_stats;
    let cached = || async {
        env.stores
            .cache
            .hash_get(PIPED_STATS_CACHE_KEY, "p1")
            .await
            .expect("cache")
            .expect("cached")
    };
    let now = now_unix();
    ps.put("proj", "p1", b"old".to_vec(), now - 600)
        .await
        .expect("put");
    let old = cached().await;
    ps.put("proj", "p1", b"m".to_vec(), now).await.expect("put");
    let fresh = cached().await;
    assert_ne!(old, fresh);
    // The cache holds the old value (e.g. a cache write failed after the datastore write).
    env.stores
        .cache
        .hash_set(PIPED_STATS_CACHE_KEY, "p1", old)
        .await
        .expect("cache");
    let stat = ps.get("p1").await.expect("get").expect("stat");
    assert_eq!(stat.timestamp, now);
    assert_eq!(stat.metrics, b"m");
    // ...and the cache was refreshed.
    assert_eq!(cached().await, fresh);
}

/// With a shared cache (Redis) a report goes to the cache alone, as upstream keeps it:
/// no datastore read or write per heartbeat. The stat reads back, an older report still
/// does not move it back, and a report the cache refuses lands in the datastore.
#[tokio::test]
async fn piped_stat_lives_in_a_shared_cache_alone() {
    let env = env_with(Arc::new(Shared(MemoryCache::default())));
    let ps = &env.stores.piped_stats;
    let now = now_unix();
    ps.put("proj", "p1", b"m1".to_vec(), now)
        .await
        .expect("put");
    let stat = ps.get("p1").await.expect("get").expect("stat");
    assert_eq!((stat.metrics.as_slice(), stat.timestamp), (&b"m1"[..], now));
    assert!(is_online(&stat, now));
    // In upstream's JSON shape, as its control plane keeps it in Redis.
    let raw = env
        .stores
        .cache
        .hash_get(PIPED_STATS_CACHE_KEY, "p1")
        .await
        .expect("cache")
        .expect("cached");
    let value: serde_json::Value = serde_json::from_slice(&raw).expect("json");
    assert_eq!(value["piped_id"], serde_json::json!("p1"));
    assert_eq!(value["timestamp"], serde_json::json!(now));
    assert_eq!(value["metrics"], serde_json::json!("bTE="));
    assert!(matches!(
        env.stores
            .datastore
            .get(wisp_store::Kind::PipedStat, "p1")
            .await,
        Err(StoreError::NotFound(_))
    ));
    ps.put("proj", "p1", b"old".to_vec(), now - 500)
        .await
        .expect("put");
    let stat = ps.get("p1").await.expect("get").expect("stat");
    assert_eq!((stat.metrics.as_slice(), stat.timestamp), (&b"m1"[..], now));

    // Redis down: the report is kept in the datastore, and reads back from it.
    let env = env_with(Arc::new(Shared(FailingCache)));
    let ps = &env.stores.piped_stats;
    ps.put("proj", "p2", b"m2".to_vec(), now)
        .await
        .expect("put");
    let record = env
        .stores
        .datastore
        .get(wisp_store::Kind::PipedStat, "p2")
        .await
        .expect("stored in the datastore");
    assert_eq!(record.project_id, "proj");
    let stat = ps.get("p2").await.expect("get").expect("stat");
    assert_eq!((stat.metrics.as_slice(), stat.timestamp), (&b"m2"[..], now));
}

// ---------------------------------------------------------------- unregistered apps

fn info(path: &str, piped: &str) -> ApplicationInfo {
    ApplicationInfo {
        name: path.replace('/', "-"),
        path: path.into(),
        config_filename: "app.pipecd.yaml".into(),
        piped_id: piped.into(),
        repo_id: "repo".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn unregistered_apps_per_project() {
    for (name, env) in envs() {
        let ua = &env.stores.unregistered_apps;
        assert!(ua.list("proj-a").await.expect(name).is_empty(), "{name}");
        ua.put(
            "proj-a",
            "p1",
            vec![info("z/app", "p1"), info("b/app", "p1")],
        )
        .await
        .expect(name);
        ua.put("proj-a", "p2", vec![info("a/app", "p2")])
            .await
            .expect(name);
        ua.put("proj-b", "p3", vec![info("c/app", "p3")])
            .await
            .expect(name);
        let paths =
            |apps: Vec<ApplicationInfo>| apps.into_iter().map(|a| a.path).collect::<Vec<_>>();
        assert_eq!(
            paths(ua.list("proj-a").await.expect(name)),
            vec!["a/app", "b/app", "z/app"]
        );
        assert_eq!(paths(ua.list("proj-b").await.expect(name)), vec!["c/app"]);
        assert!(
            ua.list("proj").await.expect(name).is_empty(),
            "{name}: no prefix leak"
        );

        // A new report replaces the piped's previous one; an empty one clears it.
        ua.put("proj-a", "p1", vec![info("y/app", "p1")])
            .await
            .expect(name);
        ua.put("proj-a", "p1", vec![info("y/app", "p1")])
            .await
            .expect(name);
        assert_eq!(
            paths(ua.list("proj-a").await.expect(name)),
            vec!["a/app", "y/app"]
        );
        ua.put("proj-a", "p2", vec![]).await.expect(name);
        let apps = ua.list("proj-a").await.expect(name);
        assert_eq!(apps, vec![info("y/app", "p1")], "{name}");
    }
}

#[tokio::test]
async fn unregistered_apps_concurrent_reports() {
    let env = env();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let ua = env.stores.unregistered_apps.clone();
        tasks.push(tokio::spawn(async move {
            ua.put(
                "proj",
                &format!("p{i}"),
                vec![info(&format!("app/{i}"), &format!("p{i}"))],
            )
            .await
        }));
    }
    for task in tasks {
        task.await.expect("task").expect("put");
    }
    assert_eq!(
        env.stores
            .unregistered_apps
            .list("proj")
            .await
            .expect("list")
            .len(),
        10
    );
}

// ---------------------------------------------------------------- poll answers

fn unhandled(id: &str, piped: &str) -> wisp_proto::model::Command {
    wisp_proto::model::Command {
        id: id.into(),
        project_id: "proj".into(),
        piped_id: piped.into(),
        application_id: "app-1".into(),
        commander: "alice".into(),
        r#type: wisp_proto::model::command::Type::SyncApplication as i32,
        status: wisp_proto::model::CommandStatus::CommandNotHandledYet as i32,
        ..Default::default()
    }
}

/// Two instances (two `Stores` on one datastore and one shared cache): a piped's poll on
/// the first is answered from its memory while nothing changed, and a command created or
/// handled through the second reaches it at the next poll.
#[tokio::test]
async fn poll_answers_follow_writes_of_another_instance() {
    use wisp_store::entities::{pk, slot};
    use wisp_store::polls::PollAnswers;

    let cache: Arc<dyn Cache> = Arc::new(Shared(MemoryCache::default()));
    let env = env_with(cache.clone());
    let settle =
        |stores: Stores| stores.with_poll_answers(PollAnswers::new(cache.clone(), Duration::ZERO));
    let a = settle(env.stores.clone());
    let b = settle(Stores::new(
        env.stores.datastore.clone(),
        env.stores.filestore.clone(),
        cache.clone(),
    ));
    let range = || pk::project_piped("proj", "p1");
    let poll = |stores: &Stores| {
        let stores = stores.clone();
        async move {
            let mut ids: Vec<String> = stores
                .commands
                .list_polled(slot::COMMAND_UNHANDLED_BY_PIPED, range())
                .await
                .expect("poll")
                .into_iter()
                .map(|c| c.id)
                .collect();
            ids.sort();
            ids
        }
    };
    assert!(poll(&a).await.is_empty());

    // Created through the other instance: seen at the next poll.
    b.commands
        .create(unhandled("c1", "p1"))
        .await
        .expect("create");
    assert_eq!(poll(&a).await, vec!["c1"]);

    // Unchanged range: the answer comes from memory. A record written behind the stores'
    // back (no token renewed) proves it: the poll does not see it.
    let sneaked = wisp_store::collection::record_of(&unhandled("c2", "p1"), 1);
    env.stores
        .datastore
        .create(wisp_store::Kind::Command, sneaked)
        .await
        .expect("raw create");
    assert_eq!(poll(&a).await, vec!["c1"]);

    // Handled through the other instance: gone at the next poll (and c2 shows up, since
    // the range was read again).
    b.commands
        .update("proj", "c1", |c| {
            c.status = wisp_proto::model::CommandStatus::CommandSucceeded as i32;
            Ok(())
        })
        .await
        .expect("handled");
    assert_eq!(poll(&a).await, vec!["c2"]);

    // Another piped's range is another token: its writes leave p1's answer alone.
    b.commands
        .create(unhandled("c3", "p2"))
        .await
        .expect("create");
    assert_eq!(poll(&a).await, vec!["c2"]);

    // Without a shared cache nothing is kept: every poll reads the datastore.
    assert!(PollAnswers::new(Arc::new(MemoryCache::default()), Duration::ZERO).is_none());
}
