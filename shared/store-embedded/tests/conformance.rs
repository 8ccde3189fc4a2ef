//! The shared conformance suite against the embedded backends, one fresh directory per
//! test, plus what only a file-backed store can show (reopening, two handles).

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use tempfile::TempDir;
use wisp_store::conformance as cf;
use wisp_store::{Cache, Datastore, Filestore, IndexKey, Kind, Query, Record, StoreError};
use wisp_store_embedded::{LocalFilestore, MemoryCache, SqliteDatastore};

fn sqlite() -> (TempDir, Arc<dyn Datastore>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ds = SqliteDatastore::open(dir.path().join("wisp.db")).expect("open sqlite");
    (dir, Arc::new(ds))
}

fn local_fs() -> (TempDir, Arc<dyn Filestore>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = LocalFilestore::open(dir.path().join("objects")).expect("open filestore");
    (dir, Arc::new(fs))
}

fn memory_cache() -> Arc<dyn Cache> {
    Arc::new(MemoryCache::default())
}

/// One test per case, each on a fresh backend, so a failure names its case.
macro_rules! cases {
    ($make:ident, $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let (_dir, store) = $make();
                cf::$case(&*store).await;
            }
        )*
    };
}

cases!(
    sqlite,
    datastore_get_missing,
    datastore_create_then_get,
    datastore_create_twice,
    datastore_put_versions,
    datastore_delete,
    datastore_query_order,
    datastore_query_ranges,
    datastore_query_ties,
    datastore_sparse_index,
    datastore_pagination,
    datastore_invalid_cursor,
    datastore_invalid_slot,
    datastore_isolation,
    datastore_expiry,
    datastore_scan,
);

cases!(
    local_fs,
    filestore_get_missing,
    filestore_round_trip,
    filestore_absent,
    filestore_matches,
    filestore_list,
    filestore_delete,
    filestore_invalid_paths,
    filestore_presigned_get,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn audit_log() {
    let (_dir, ds) = sqlite();
    cf::audit_log(ds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn datastore_concurrent_updates() {
    let (_dir, ds) = sqlite();
    cf::datastore_concurrent_updates(ds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn filestore_concurrent_appends() {
    let (_dir, fs) = local_fs();
    cf::filestore_concurrent_appends(fs).await;
}

#[tokio::test]
async fn cache_get_put_delete() {
    cf::cache_get_put_delete(&*memory_cache()).await;
}

#[tokio::test]
async fn cache_ttl() {
    cf::cache_ttl(&*memory_cache()).await;
}

#[tokio::test]
async fn cache_hash() {
    cf::cache_hash(&*memory_cache()).await;
}

/// The whole suites on one shared instance each, as the AWS backends will run them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suites_share_one_instance() {
    let (_dir, ds) = sqlite();
    cf::datastore_suite(ds.clone()).await;
    cf::datastore_suite(ds).await;
    let (_dir, fs) = local_fs();
    cf::filestore_suite(fs.clone()).await;
    cf::filestore_suite(fs).await;
    let cache = memory_cache();
    cf::cache_suite(cache.clone()).await;
    cf::cache_suite(cache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_sqlite_passes_the_suite() {
    let ds: Arc<dyn Datastore> = Arc::new(SqliteDatastore::open_in_memory().expect("open"));
    cf::datastore_suite(ds).await;
}

fn sample(id: &str) -> Record {
    Record {
        id: id.into(),
        project_id: "p".into(),
        version: 0,
        data: b"payload".to_vec(),
        indexes: [Some(IndexKey::new("pk", "sk")), None, None],
        expires_at: None,
    }
}

#[tokio::test]
async fn data_survives_reopening() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state/wisp.db");
    {
        let ds = SqliteDatastore::open(&path).expect("open");
        ds.create(Kind::Project, sample("kept"))
            .await
            .expect("create");
        ds.put(Kind::Project, sample("kept"), 1).await.expect("put");
    }
    let ds = SqliteDatastore::open(&path).expect("reopen");
    let got = ds
        .get(Kind::Project, "kept")
        .await
        .expect("get after reopen");
    assert_eq!(
        got,
        Record {
            version: 2,
            ..sample("kept")
        }
    );
    let page = ds
        .query(&Query::new(Kind::Project, 0, "pk"))
        .await
        .expect("query");
    assert_eq!(page.records.len(), 1);
}

/// Like `wisp serve` and the admin CLI: two handles on one file see each other's
/// writes, and their optimistic concurrency checks apply across handles.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_handles_share_one_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wisp.db");
    let server = SqliteDatastore::open(&path).expect("server");
    let cli = SqliteDatastore::open(&path).expect("cli");

    cli.create(Kind::Piped, sample("from-cli"))
        .await
        .expect("cli create");
    assert_eq!(
        server
            .get(Kind::Piped, "from-cli")
            .await
            .expect("server sees it")
            .version,
        1
    );
    server
        .put(Kind::Piped, sample("from-cli"), 1)
        .await
        .expect("server put");
    assert_err_conflict(cli.put(Kind::Piped, sample("from-cli"), 1).await);
    assert_eq!(
        cli.get(Kind::Piped, "from-cli")
            .await
            .expect("cli sees it")
            .version,
        2
    );
    assert!(matches!(
        server.create(Kind::Piped, sample("from-cli")).await,
        Err(StoreError::AlreadyExists(_))
    ));

    // Concurrent writers through both handles lose nothing.
    let handles: [Arc<dyn Datastore>; 2] = [Arc::new(server), Arc::new(cli)];
    handles[0]
        .create(Kind::Piped, sample("shared"))
        .await
        .expect("create");
    let mut tasks = Vec::new();
    for n in 0..20u64 {
        let ds = handles[(n % 2) as usize].clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let mut r = ds.get(Kind::Piped, "shared").await.expect("get");
                r.data.extend_from_slice(format!("{n},").as_bytes());
                let v = r.version;
                match ds.put(Kind::Piped, r, v).await {
                    Ok(()) => return,
                    Err(StoreError::Conflict(_)) => tokio::task::yield_now().await,
                    Err(e) => panic!("writer {n}: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let got = handles[1].get(Kind::Piped, "shared").await.expect("get");
    assert_eq!(got.version, 21);
    let text = String::from_utf8(got.data).expect("utf-8");
    let mut seen: Vec<u64> = text
        .trim_start_matches("payload")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("number"))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
}

/// Writes arriving together are committed together (the writer thread's groups): each
/// still gets its own answer, a write refused among them changes nothing, and the others
/// are kept, visible to another handle once answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_committed_together_keep_their_own_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wisp.db");
    let ds: Arc<dyn Datastore> = Arc::new(SqliteDatastore::open(&path).expect("open"));
    let other = SqliteDatastore::open(&path).expect("second handle");
    for n in 0..200 {
        ds.create(Kind::Piped, sample(&format!("r{n}")))
            .await
            .expect("create");
    }
    let mut tasks = Vec::new();
    for n in 0..200u64 {
        let ds = ds.clone();
        tasks.push(tokio::spawn(async move {
            let mut record = sample(&format!("r{n}"));
            record.data = format!("written {n}").into_bytes();
            match n % 4 {
                // A stale version: refused.
                0 => ds.put(Kind::Piped, record, 7).await,
                // An id that exists: refused.
                1 => ds.create(Kind::Piped, record).await,
                // Kept.
                2 => ds.put(Kind::Piped, record, 1).await,
                _ => ds.delete(Kind::Piped, &record.id, 1).await,
            }
        }));
    }
    for (n, task) in tasks.into_iter().enumerate() {
        let result = task.await.expect("writer");
        let id = format!("r{n}");
        match n % 4 {
            0 => assert_err_conflict(result),
            1 => assert!(
                matches!(result, Err(StoreError::AlreadyExists(_))),
                "{id}: {result:?}"
            ),
            2 => {
                result.expect("put");
                let got = other.get(Kind::Piped, &id).await.expect("get");
                assert_eq!(
                    (got.version, got.data),
                    (2, format!("written {n}").into_bytes())
                );
            }
            _ => {
                result.expect("delete");
                assert!(matches!(
                    other.get(Kind::Piped, &id).await,
                    Err(StoreError::NotFound(_))
                ));
            }
        }
        if n % 4 < 2 {
            let got = other.get(Kind::Piped, &id).await.expect("unchanged");
            assert_eq!((got.version, got.data), (1, b"payload".to_vec()), "{id}");
        }
    }
}

fn assert_err_conflict(result: Result<(), StoreError>) {
    assert!(
        matches!(result, Err(StoreError::Conflict(_))),
        "expected Conflict, got {result:?}"
    );
}

#[tokio::test]
async fn purge_removes_only_expired_records() {
    let ds = SqliteDatastore::open_in_memory().expect("open");
    let mut old = sample("old");
    old.expires_at = Some(1);
    ds.create(Kind::Event, old).await.expect("create");
    ds.create(Kind::Event, sample("new")).await.expect("create");
    assert_eq!(ds.purge_expired().await.expect("purge"), 1);
    assert_eq!(ds.get(Kind::Event, "new").await.expect("kept").id, "new");
}

/// The filestore keeps its objects across reopening, each in the directory's database.
#[tokio::test]
async fn filestore_survives_reopening() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etag = {
        let fs = LocalFilestore::open(dir.path()).expect("open");
        fs.put(
            "log/d/s/0.txt",
            b"hello".to_vec(),
            wisp_store::PutCondition::Absent,
        )
        .await
        .expect("put")
    };
    let fs = LocalFilestore::open(dir.path()).expect("reopen");
    let obj = fs.get("log/d/s/0.txt").await.expect("get");
    assert_eq!((obj.data.as_slice(), obj.etag), (&b"hello"[..], etag));
    assert_eq!(fs.imported_files(), 0);
    assert!(
        dir.path()
            .join(wisp_store_embedded::filestore::DATABASE_FILE)
            .is_file()
    );
    assert!(!dir.path().join("log").exists(), "an object became a file");
    let page = fs.list("log/", None, 10).await.expect("list");
    assert_eq!(page.objects.len(), 1);
}
