//! Store operations, measured. Each backend is wrapped once, where the stores are opened
//! (`wisp_app::stores::open`), so that every operation of every entry point is counted by
//! store, backend, kind, operation and outcome, and timed; cache reads are also counted as
//! hits and misses. Names and labels: `wisp_telemetry`.
//!
//! [`time_store_waits`] also adds up, for one request, how long it awaited the stores
//! (all but the in-process cache), so that a request's own time can be told from its
//! stores' (the Lambda adapter logs both per invocation at debug level: issue 34).

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::cache::Cache;
use crate::datastore::{Datastore, Kind, Page, Query, Record};
use crate::error::{Result, StoreError};
use crate::filestore::{Filestore, ListPage, Object, ObjectMeta, PresignedGet, PutCondition};

tokio::task_local! {
    /// Time the current request spent awaiting stores (not the in-process cache).
    static STORE_WAIT: Cell<Duration>;
}

/// Runs `work` and returns its output with the time its store operations took (every
/// backend but the in-process cache, whose time is the caller's own; operations awaited
/// in this task, one after another as a request makes them).
pub async fn time_store_waits<F: Future>(work: F) -> (F::Output, Duration) {
    STORE_WAIT
        .scope(Cell::new(Duration::ZERO), async move {
            let output = work.await;
            (output, STORE_WAIT.with(Cell::get))
        })
        .await
}

/// The outcome label of a store error.
fn outcome(error: &StoreError) -> &'static str {
    match error {
        StoreError::NotFound(_) => "not_found",
        StoreError::AlreadyExists(_) => "already_exists",
        StoreError::Conflict(_) => "conflict",
        StoreError::InvalidArgument(_) | StoreError::InvalidCursor => "invalid_argument",
        StoreError::FailedPrecondition(_) => "failed_precondition",
        StoreError::Unavailable { .. } => "unavailable",
        StoreError::Internal { .. } => "internal",
    }
}

/// Which store and backend an operation ran on.
#[derive(Debug, Clone, Copy)]
struct Labels {
    store: &'static str,
    backend: &'static str,
}

impl Labels {
    async fn timed<T>(
        self,
        kind: &'static str,
        op: &'static str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        // A span of its own, so that an exported trace shows where a call's time went.
        let span = tracing::debug_span!(
            "store",
            store = self.store,
            backend = self.backend,
            kind,
            op,
            outcome = tracing::field::Empty
        );
        let started = Instant::now();
        let result = tracing::Instrument::instrument(work, span.clone()).await;
        let took = started.elapsed();
        let outcome = result.as_ref().map_or_else(outcome, |_| "ok");
        span.record("outcome", outcome);
        if self.backend != "memory" {
            // Outside a timed request (jobs, `wisp serve`'s calls): nothing to add to.
            let _ = STORE_WAIT.try_with(|wait| wait.set(wait.get() + took));
        }
        wisp_telemetry::record_store_operation(self.store, self.backend, kind, op, outcome, took);
        result
    }
}

/// A store whose operations are measured: `Metered<dyn Datastore>`, `Metered<dyn
/// Filestore>`, `Metered<dyn Cache>`.
pub struct Metered<S: ?Sized> {
    inner: Arc<S>,
    labels: Labels,
}

impl<S: ?Sized> std::fmt::Debug for Metered<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered")
            .field("store", &self.labels.store)
            .field("backend", &self.labels.backend)
            .finish_non_exhaustive()
    }
}

impl<S: ?Sized> Metered<S> {
    fn new(inner: Arc<S>, store: &'static str, backend: &'static str) -> Self {
        Metered {
            inner,
            labels: Labels { store, backend },
        }
    }
}

/// Measures `datastore`; `backend` is `sqlite`, `dynamodb`, … (a label from a fixed list).
pub fn datastore(datastore: Arc<dyn Datastore>, backend: &'static str) -> Arc<dyn Datastore> {
    Arc::new(Metered::new(datastore, "datastore", backend))
}

/// Measures `filestore`; `backend` is `local`, `s3`, ….
pub fn filestore(filestore: Arc<dyn Filestore>, backend: &'static str) -> Arc<dyn Filestore> {
    Arc::new(Metered::new(filestore, "filestore", backend))
}

/// Measures `cache`, its reads also as hits and misses; `backend` is `memory` or `redis`.
pub fn cache(cache: Arc<dyn Cache>, backend: &'static str) -> Arc<dyn Cache> {
    Arc::new(Metered::new(cache, "cache", backend))
}

#[async_trait]
impl Datastore for Metered<dyn Datastore> {
    async fn get(&self, kind: Kind, id: &str) -> Result<Record> {
        self.labels
            .timed(kind.as_str(), "get", self.inner.get(kind, id))
            .await
    }
    async fn create(&self, kind: Kind, record: Record) -> Result<()> {
        self.labels
            .timed(kind.as_str(), "create", self.inner.create(kind, record))
            .await
    }
    async fn put(&self, kind: Kind, record: Record, expected_version: u64) -> Result<()> {
        self.labels
            .timed(
                kind.as_str(),
                "put",
                self.inner.put(kind, record, expected_version),
            )
            .await
    }
    async fn delete(&self, kind: Kind, id: &str, expected_version: u64) -> Result<()> {
        self.labels
            .timed(
                kind.as_str(),
                "delete",
                self.inner.delete(kind, id, expected_version),
            )
            .await
    }
    async fn query(&self, query: &Query) -> Result<Page> {
        self.labels
            .timed(query.kind.as_str(), "query", self.inner.query(query))
            .await
    }
    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> Result<Page> {
        self.labels
            .timed(
                kind.as_str(),
                "scan",
                self.inner.scan(kind, after, page_size),
            )
            .await
    }
}

/// Objects are not labelled by path (paths hold ids).
const OBJECT: &str = "object";

#[async_trait]
impl Filestore for Metered<dyn Filestore> {
    async fn get(&self, path: &str) -> Result<Object> {
        self.labels.timed(OBJECT, "get", self.inner.get(path)).await
    }
    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String> {
        self.labels
            .timed(OBJECT, "put", self.inner.put(path, data, condition))
            .await
    }
    async fn put_with_meta(
        &self,
        path: &str,
        data: Vec<u8>,
        condition: PutCondition,
        meta: &ObjectMeta,
    ) -> Result<String> {
        self.labels
            .timed(
                OBJECT,
                "put",
                self.inner.put_with_meta(path, data, condition, meta),
            )
            .await
    }
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage> {
        self.labels
            .timed(OBJECT, "list", self.inner.list(prefix, after, limit))
            .await
    }
    async fn delete(&self, path: &str) -> Result<()> {
        self.labels
            .timed(OBJECT, "delete", self.inner.delete(path))
            .await
    }
    async fn presigned_get(&self, path: &str, request: &PresignedGet) -> Result<Option<String>> {
        self.labels
            .timed(OBJECT, "presign", self.inner.presigned_get(path, request))
            .await
    }
}

impl Metered<dyn Cache> {
    fn read<T>(&self, result: &Result<Option<T>>) {
        let outcome = match result {
            Ok(Some(_)) => "hit",
            Ok(None) => "miss",
            Err(_) => "error",
        };
        wisp_telemetry::record_cache_read(self.labels.backend, outcome);
    }
}

const ENTRY: &str = "entry";

#[async_trait]
impl Cache for Metered<dyn Cache> {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let result = self.labels.timed(ENTRY, "get", self.inner.get(key)).await;
        self.read(&result);
        result
    }
    async fn put(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<()> {
        self.labels
            .timed(ENTRY, "put", self.inner.put(key, value, ttl))
            .await
    }
    async fn delete(&self, key: &str) -> Result<()> {
        self.labels
            .timed(ENTRY, "delete", self.inner.delete(key))
            .await
    }
    async fn hash_set(&self, key: &str, field: &str, value: Vec<u8>) -> Result<()> {
        self.labels
            .timed(ENTRY, "hash_set", self.inner.hash_set(key, field, value))
            .await
    }
    async fn hash_get(&self, key: &str, field: &str) -> Result<Option<Vec<u8>>> {
        let result = self
            .labels
            .timed(ENTRY, "hash_get", self.inner.hash_get(key, field))
            .await;
        self.read(&result);
        result
    }
    async fn hash_get_all(&self, key: &str) -> Result<HashMap<String, Vec<u8>>> {
        self.labels
            .timed(ENTRY, "hash_get_all", self.inner.hash_get_all(key))
            .await
    }
    async fn hash_delete(&self, key: &str, field: &str) -> Result<()> {
        self.labels
            .timed(ENTRY, "hash_delete", self.inner.hash_delete(key, field))
            .await
    }
    fn shared(&self) -> bool {
        self.inner.shared()
    }
}
