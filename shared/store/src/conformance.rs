//! The backend-agnostic conformance suite (feature `conformance`).
//!
//! Every backend crate runs these against its own implementations:
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
//! async fn datastore() {
//!     wisp_store::conformance::datastore_suite(Arc::new(my_backend())).await;
//! }
//! ```
//!
//! Each case is a `pub async fn` that panics on failure, so a backend may also run the
//! cases one by one. Every case uses ids, partition values and paths of its own
//! ([`unique`]), so all cases (and repeated runs) can share one backend instance — a
//! DynamoDB table, an S3 bucket, a Redis database — without seeing each other's data.
//! Cases that spawn tasks take an `Arc` and need a multi-threaded runtime to exercise
//! real parallelism (they also pass on a current-thread runtime).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::cache::Cache;
use crate::datastore::{Datastore, INDEX_SLOTS, IndexKey, Kind, Page, Query, Record};
use crate::error::StoreError;
use crate::filestore::{Filestore, PutCondition};

macro_rules! assert_err {
    ($result:expr, $pattern:pat) => {
        match $result {
            Err($pattern) => {}
            other => panic!(
                "{}: expected Err({}), got {:?}",
                stringify!($result),
                stringify!($pattern),
                other
            ),
        }
    };
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name no other case or run uses: `<tag>-<time>-<n>-<random>`.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{tag}-{nanos:x}-{n}-{:04x}", rand::random::<u16>())
}

use crate::collection::now_unix;

/// `(pk, sk)` per index slot.
pub type Slots<'a> = [Option<(&'a str, &'a str)>; INDEX_SLOTS];

/// Builds a record.
pub fn record(id: &str, data: &[u8], indexes: Slots<'_>) -> Record {
    Record {
        id: id.to_string(),
        project_id: format!("project-of-{id}"),
        version: 0,
        data: data.to_vec(),
        indexes: indexes.map(|k| k.map(|(pk, sk)| IndexKey::new(pk, sk))),
        expires_at: None,
    }
}

/// Reads a whole query range page by page, checking the paging contract on the way.
pub async fn query_all(ds: &dyn Datastore, query: &Query) -> Vec<Record> {
    let mut query = query.clone();
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let page: Page = query_ok(ds, &query).await;
        assert!(
            page.records.len() <= query.page_size,
            "page of {} records exceeds page_size {}",
            page.records.len(),
            query.page_size
        );
        let last_cursor = page.records.last().map(|(_, c)| c.clone());
        out.extend(page.records.into_iter().map(|(r, _)| r));
        if !page.more {
            return out;
        }
        // A page that says "more" must let the caller resume.
        query.after = Some(last_cursor.expect("page with more=true but no records to resume from"));
    }
    panic!("query did not finish in 10000 pages");
}

async fn query_ok(ds: &dyn Datastore, query: &Query) -> Page {
    match ds.query(query).await {
        Ok(page) => page,
        Err(e) => panic!("query {query:?}: {e}"),
    }
}

fn ids(records: &[Record]) -> Vec<String> {
    records.iter().map(|r| r.id.clone()).collect()
}

/// Ids of `records` sorted by the `(sk, id)` of `slot`, as a query must return them.
fn sorted_ids(records: &[Record], slot: usize, descending: bool) -> Vec<String> {
    let mut keyed: Vec<(String, String)> = records
        .iter()
        .filter_map(|r| {
            r.indexes[slot]
                .as_ref()
                .map(|k| (k.sk.clone(), r.id.clone()))
        })
        .collect();
    keyed.sort();
    if descending {
        keyed.reverse();
    }
    keyed.into_iter().map(|(_, id)| id).collect()
}

async fn create_all(ds: &dyn Datastore, kind: Kind, records: &[Record]) {
    for r in records {
        ds.create(kind, r.clone())
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", r.id));
    }
}

// ---------------------------------------------------------------------------------------
// Datastore
// ---------------------------------------------------------------------------------------

/// Every datastore case, in sequence, against one backend instance.
pub async fn datastore_suite(ds: Arc<dyn Datastore>) {
    datastore_get_missing(&*ds).await;
    datastore_create_then_get(&*ds).await;
    datastore_create_twice(&*ds).await;
    datastore_put_versions(&*ds).await;
    datastore_delete(&*ds).await;
    datastore_query_order(&*ds).await;
    datastore_query_ranges(&*ds).await;
    datastore_query_ties(&*ds).await;
    datastore_sparse_index(&*ds).await;
    datastore_pagination(&*ds).await;
    datastore_invalid_cursor(&*ds).await;
    datastore_invalid_slot(&*ds).await;
    datastore_isolation(&*ds).await;
    datastore_expiry(&*ds).await;
    datastore_scan(&*ds).await;
    datastore_concurrent_updates(ds.clone()).await;
    audit_log(ds.clone()).await;
}

/// The audit log over the backend: entries listed newest first per project, filtered
/// by time, actor and method, other projects' never seen, and an entry past its
/// retention gone.
pub async fn audit_log(ds: Arc<dyn Datastore>) {
    use crate::audit::{AuditEntry, AuditFilter, AuditStore};
    let store = AuditStore::new(ds.clone());
    let project = unique("audit");
    let other = unique("audit-other");
    let entry = |project: &str, at_ms: i64, actor: &str, method: &str| AuditEntry {
        id: unique("audit-entry"),
        at_ms,
        project_id: project.to_string(),
        actor: actor.to_string(),
        method: method.to_string(),
        targets: vec!["piped-1".into()],
        source: "192.0.2.7".into(),
        code: "OK".into(),
    };
    let now_ms = now_unix() * 1000;
    let first = entry(
        &project,
        now_ms - 3000,
        "user:alice",
        "WebService/DisablePiped",
    );
    let second = entry(
        &project,
        now_ms - 2000,
        "api-key:k1",
        "APIService/SyncApplication",
    );
    let third = entry(
        &project,
        now_ms - 1000,
        "user:alice",
        "WebService/EnablePiped",
    );
    for e in [
        &first,
        &second,
        &third,
        &entry(&other, now_ms, "user:bob", "WebService/DisablePiped"),
    ] {
        store.record(e).await.expect("record");
    }
    let all = store
        .list(&project, &AuditFilter::default())
        .await
        .expect("list");
    assert_eq!(all, vec![third.clone(), second.clone(), first.clone()]);
    let by = |filter: AuditFilter| {
        let store = store.clone();
        let project = project.clone();
        async move {
            store
                .list(&project, &filter)
                .await
                .expect("list")
                .into_iter()
                .map(|e| e.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        by(AuditFilter {
            actor: Some("alice".into()),
            ..Default::default()
        })
        .await,
        vec![third.id.clone(), first.id.clone()]
    );
    assert_eq!(
        by(AuditFilter {
            method: Some("SyncApplication".into()),
            ..Default::default()
        })
        .await,
        vec![second.id.clone()]
    );
    assert_eq!(
        by(AuditFilter {
            since_ms: Some(now_ms - 2000),
            limit: 1,
            ..Default::default()
        })
        .await,
        vec![third.id.clone()]
    );
    // Past its retention an entry is gone.
    let short = AuditStore::new(ds).with_retention(std::time::Duration::ZERO);
    let expired = entry(
        &project,
        now_ms - 120_000,
        "user:carol",
        "WebService/DeleteApplication",
    );
    short.record(&expired).await.expect("record");
    assert!(
        !by(AuditFilter::default()).await.contains(&expired.id),
        "an expired entry was listed"
    );
}

pub async fn datastore_get_missing(ds: &dyn Datastore) {
    assert_err!(
        ds.get(Kind::Application, &unique("missing")).await,
        StoreError::NotFound(_)
    );
}

pub async fn datastore_create_then_get(ds: &dyn Datastore) {
    let id = unique("create");
    let later = now_unix() + 3600;
    let mut r = record(
        &id,
        b"\x00\x01binary\xff",
        [Some(("p0", "s0")), None, Some(("p2", "s2"))],
    );
    r.version = 7; // ignored: create always stores version 1
    r.expires_at = Some(later);
    ds.create(Kind::Application, r.clone())
        .await
        .expect("create");
    let got = ds.get(Kind::Application, &id).await.expect("get");
    assert_eq!(got, Record { version: 1, ..r });
    // Same id, other kind: a different record.
    assert_err!(ds.get(Kind::Deployment, &id).await, StoreError::NotFound(_));
}

pub async fn datastore_create_twice(ds: &dyn Datastore) {
    let id = unique("twice");
    ds.create(Kind::Piped, record(&id, b"first", [None, None, None]))
        .await
        .expect("create");
    assert_err!(
        ds.create(Kind::Piped, record(&id, b"second", [None, None, None]))
            .await,
        StoreError::AlreadyExists(_)
    );
    let got = ds.get(Kind::Piped, &id).await.expect("get");
    assert_eq!((got.data.as_slice(), got.version), (&b"first"[..], 1));
    // The same id in another kind is free.
    ds.create(Kind::Project, record(&id, b"other", [None, None, None]))
        .await
        .expect("other kind");
}

pub async fn datastore_put_versions(ds: &dyn Datastore) {
    let kind = Kind::Deployment;
    let id = unique("put");
    let pk = unique("put-pk");
    ds.create(kind, record(&id, b"v1", [Some((&pk, "a")), None, None]))
        .await
        .expect("create");

    let mut v2 = record(&id, b"v2", [None, Some((&pk, "b")), None]);
    v2.version = 99; // ignored: the backend sets expected + 1
    v2.project_id = "moved".into();
    v2.expires_at = Some(now_unix() + 3600);
    ds.put(kind, v2.clone(), 1)
        .await
        .expect("put with the right version");
    let got = ds.get(kind, &id).await.expect("get");
    assert_eq!(
        got,
        Record {
            version: 2,
            ..v2.clone()
        }
    );
    // Indexes follow the new record.
    assert!(query_all(ds, &Query::new(kind, 0, &pk)).await.is_empty());
    assert_eq!(
        ids(&query_all(ds, &Query::new(kind, 1, &pk)).await),
        vec![id.clone()]
    );

    for stale in [0, 1, 3, u64::MAX] {
        assert_err!(
            ds.put(kind, record(&id, b"lost", [None, None, None]), stale)
                .await,
            StoreError::Conflict(_)
        );
    }
    assert_eq!(
        ds.get(kind, &id).await.expect("get"),
        Record { version: 2, ..v2 }
    );

    ds.put(kind, record(&id, b"v3", [None, None, None]), 2)
        .await
        .expect("put again");
    assert_eq!(ds.get(kind, &id).await.expect("get").version, 3);

    assert_err!(
        ds.put(
            kind,
            record(&unique("put-missing"), b"x", [None, None, None]),
            1
        )
        .await,
        StoreError::NotFound(_)
    );
}

pub async fn datastore_delete(ds: &dyn Datastore) {
    let kind = Kind::Command;
    let id = unique("delete");
    let pk = unique("delete-pk");
    assert_err!(ds.delete(kind, &id, 1).await, StoreError::NotFound(_));
    ds.create(kind, record(&id, b"x", [Some((&pk, "s")), None, None]))
        .await
        .expect("create");
    ds.put(kind, record(&id, b"y", [Some((&pk, "s")), None, None]), 1)
        .await
        .expect("put");
    for wrong in [1, 3] {
        assert_err!(ds.delete(kind, &id, wrong).await, StoreError::Conflict(_));
    }
    assert_eq!(ds.get(kind, &id).await.expect("still there").version, 2);
    ds.delete(kind, &id, 2).await.expect("delete");
    assert_err!(ds.get(kind, &id).await, StoreError::NotFound(_));
    assert!(
        query_all(ds, &Query::new(kind, 0, &pk)).await.is_empty(),
        "deleted but indexed"
    );
    assert_err!(ds.delete(kind, &id, 2).await, StoreError::NotFound(_));
    // The id can be reused, starting over at version 1.
    ds.create(kind, record(&id, b"z", [None, None, None]))
        .await
        .expect("re-create");
    assert_eq!(ds.get(kind, &id).await.expect("get").version, 1);
}

/// 50 tasks each append their number to a list in one record by optimistic
/// read-modify-write; none of the appends may be lost.
pub async fn datastore_concurrent_updates(ds: Arc<dyn Datastore>) {
    const WRITERS: u64 = 50;
    let kind = Kind::DeploymentChain;
    let id = unique("counter");
    ds.create(kind, record(&id, b"[]", [None, None, None]))
        .await
        .expect("create");
    let mut tasks = Vec::new();
    for n in 0..WRITERS {
        let ds = ds.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            for attempt in 0..10_000u32 {
                let mut current = ds.get(kind, &id).await.expect("get");
                let mut list: Vec<u64> =
                    serde_json::from_slice(&current.data).expect("list in data");
                list.push(n);
                current.data = serde_json::to_vec(&list).expect("encode");
                let version = current.version;
                match ds.put(kind, current, version).await {
                    Ok(()) => return,
                    Err(StoreError::Conflict(_)) => {
                        if attempt % 4 == 3 {
                            let ms = rand::random::<u64>() % 3;
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        } else {
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => panic!("writer {n}: {e}"),
                }
            }
            panic!("writer {n} never won a race");
        }));
    }
    for task in tasks {
        task.await.expect("writer task");
    }
    let got = ds.get(kind, &id).await.expect("get");
    let mut list: Vec<u64> = serde_json::from_slice(&got.data).expect("list");
    list.sort_unstable();
    assert_eq!(
        list,
        (0..WRITERS).collect::<Vec<_>>(),
        "lost or duplicated writes"
    );
    assert_eq!(got.version, WRITERS + 1);
}

pub async fn datastore_query_order(ds: &dyn Datastore) {
    let kind = Kind::Event;
    let pk = unique("order");
    let records: Vec<Record> = ["m", "a", "z", "b", "y"]
        .iter()
        .map(|sk| {
            record(
                &unique("order-r"),
                sk.as_bytes(),
                [Some((&pk, sk)), None, None],
            )
        })
        .collect();
    create_all(ds, kind, &records).await;
    for descending in [false, true] {
        let mut q = Query::new(kind, 0, &pk);
        q.descending = descending;
        let got = query_all(ds, &q).await;
        let sks: Vec<&[u8]> = got.iter().map(|r| r.data.as_slice()).collect();
        let want: Vec<&[u8]> = if descending {
            vec![b"z", b"y", b"m", b"b", b"a"]
        } else {
            vec![b"a", b"b", b"m", b"y", b"z"]
        };
        assert_eq!(sks, want, "descending={descending}");
        // Records come back whole.
        for r in &got {
            let original = records.iter().find(|o| o.id == r.id).expect("known id");
            assert_eq!(
                r,
                &Record {
                    version: 1,
                    ..original.clone()
                }
            );
        }
    }
}

pub async fn datastore_query_ranges(ds: &dyn Datastore) {
    let kind = Kind::Deployment;
    let pk = unique("range");
    // Zero-padded timestamps, as the typed layer writes them.
    let sks: Vec<String> = (1..=9).map(|t| format!("{:020}", t * 10)).collect();
    let records: Vec<Record> = sks
        .iter()
        .map(|sk| record(&unique("range-r"), b"", [None, None, Some((&pk, sk))]))
        .collect();
    create_all(ds, kind, &records).await;
    let ts = |t: i64| format!("{t:020}");
    let cases: [(Option<String>, Option<String>, Vec<i64>); 6] = [
        (Some(ts(30)), None, vec![30, 40, 50, 60, 70, 80, 90]),
        (None, Some(ts(30)), vec![10, 20]),
        (Some(ts(30)), Some(ts(60)), vec![30, 40, 50]),
        (Some(ts(25)), Some(ts(61)), vec![30, 40, 50, 60]),
        (Some(ts(50)), Some(ts(50)), vec![]),
        (Some(ts(95)), None, vec![]),
    ];
    for (from, to, want) in cases {
        for descending in [false, true] {
            let mut q = Query::new(kind, 2, &pk);
            q.sk_from = from.clone();
            q.sk_to = to.clone();
            q.descending = descending;
            q.page_size = 2;
            let got: Vec<String> = query_all(ds, &q)
                .await
                .iter()
                .map(|r| r.indexes[2].as_ref().expect("slot 2").sk.clone())
                .collect();
            let mut want: Vec<String> = want.iter().map(|t| ts(*t)).collect();
            if descending {
                want.reverse();
            }
            assert_eq!(got, want, "from={from:?} to={to:?} descending={descending}");
        }
    }
}

pub async fn datastore_query_ties(ds: &dyn Datastore) {
    let kind = Kind::Command;
    let pk = unique("ties");
    let base = unique("tie");
    let records: Vec<Record> = ["c", "a", "e", "b", "d"]
        .iter()
        .map(|s| {
            record(
                &format!("{base}-{s}"),
                b"",
                [None, Some((&pk, "same")), None],
            )
        })
        .chain([record(
            &format!("{base}-0"),
            b"",
            [None, Some((&pk, "earlier")), None],
        )])
        .collect();
    create_all(ds, kind, &records).await;
    for descending in [false, true] {
        for page_size in [1, 2, 100] {
            let mut q = Query::new(kind, 1, &pk);
            q.descending = descending;
            q.page_size = page_size;
            let got = ids(&query_all(ds, &q).await);
            let mut want: Vec<String> = std::iter::once("0")
                .chain(["a", "b", "c", "d", "e"])
                .map(|s| format!("{base}-{s}"))
                .collect();
            if descending {
                want.reverse();
            }
            assert_eq!(got, want, "descending={descending} page_size={page_size}");
        }
    }
}

pub async fn datastore_sparse_index(ds: &dyn Datastore) {
    let kind = Kind::Command;
    let (pk, other_pk) = (unique("sparse"), unique("sparse-other"));
    let open = unique("sparse-open");
    let closed = unique("sparse-closed");
    let q = |slot: usize, pk: &str| Query::new(kind, slot, pk);
    ds.create(
        kind,
        record(&open, b"", [Some((&pk, "1")), Some((&pk, "1")), None]),
    )
    .await
    .expect("create");
    ds.create(kind, record(&closed, b"", [Some((&pk, "2")), None, None]))
        .await
        .expect("create");

    assert_eq!(
        ids(&query_all(ds, &q(0, &pk)).await),
        vec![open.clone(), closed.clone()]
    );
    assert_eq!(ids(&query_all(ds, &q(1, &pk)).await), vec![open.clone()]);
    assert!(query_all(ds, &q(2, &pk)).await.is_empty());

    // Clearing a slot takes the record out of that index only.
    ds.put(kind, record(&open, b"", [Some((&pk, "1")), None, None]), 1)
        .await
        .expect("put");
    assert!(
        query_all(ds, &q(1, &pk)).await.is_empty(),
        "cleared slot still indexed"
    );
    assert_eq!(query_all(ds, &q(0, &pk)).await.len(), 2);

    // Setting it puts the record (back) in.
    ds.put(
        kind,
        record(&closed, b"", [Some((&pk, "2")), Some((&pk, "9")), None]),
        1,
    )
    .await
    .expect("put");
    assert_eq!(ids(&query_all(ds, &q(1, &pk)).await), vec![closed.clone()]);

    // Changing a slot's pk moves the record between partitions.
    ds.put(
        kind,
        record(
            &closed,
            b"",
            [Some((&pk, "2")), Some((&other_pk, "9")), None],
        ),
        2,
    )
    .await
    .expect("put");
    assert!(query_all(ds, &q(1, &pk)).await.is_empty());
    assert_eq!(
        ids(&query_all(ds, &q(1, &other_pk)).await),
        vec![closed.clone()]
    );

    // Changing a slot's sk reorders it.
    ds.put(kind, record(&open, b"", [Some((&pk, "3")), None, None]), 2)
        .await
        .expect("put");
    assert_eq!(ids(&query_all(ds, &q(0, &pk)).await), vec![closed, open]);
}

pub async fn datastore_pagination(ds: &dyn Datastore) {
    const N: usize = 25;
    let kind = Kind::Deployment;
    let pk = unique("pages");
    let base = unique("page");
    // Pairs of records share a sort key, so page boundaries fall inside ties; ids are
    // not in insertion order.
    let records: Vec<Record> = (0..N)
        .map(|i| {
            let id = format!("{base}-{:02}", (i * 7) % N);
            let sk = format!("{:02}", i / 2);
            record(&id, b"", [None, Some((&pk, &sk)), None])
        })
        .collect();
    create_all(ds, kind, &records).await;

    for descending in [false, true] {
        for (from, to) in [(None, None), (Some("03"), Some("09"))] {
            let in_range: Vec<Record> = records
                .iter()
                .filter(|r| {
                    let sk = r.indexes[1]
                        .as_ref()
                        .map(|k| k.sk.as_str())
                        .unwrap_or_default();
                    from.is_none_or(|f| sk >= f) && to.is_none_or(|t| sk < t)
                })
                .cloned()
                .collect();
            let want = sorted_ids(&in_range, 1, descending);
            for page_size in [1, 3, 100] {
                let mut q = Query::new(kind, 1, &pk);
                q.descending = descending;
                q.sk_from = from.map(String::from);
                q.sk_to = to.map(String::from);
                q.page_size = page_size;
                let got = ids(&query_all(ds, &q).await);
                assert_eq!(
                    got, want,
                    "descending={descending} range={from:?}..{to:?} page_size={page_size}"
                );
                let distinct: BTreeSet<&String> = got.iter().collect();
                assert_eq!(distinct.len(), got.len(), "a record came back twice");
            }
        }
        // Every record's own cursor resumes right after it, even mid-page.
        let mut q = Query::new(kind, 1, &pk);
        q.descending = descending;
        q.page_size = 100;
        let page = query_ok(ds, &q).await;
        let want = sorted_ids(&records, 1, descending);
        assert_eq!(
            ids(&page
                .records
                .iter()
                .map(|(r, _)| r.clone())
                .collect::<Vec<_>>()),
            want
        );
        for k in [0, 5, N - 2, N - 1] {
            let mut resumed = q.clone();
            resumed.after = Some(page.records[k].1.clone());
            assert_eq!(
                ids(&query_all(ds, &resumed).await),
                want[k + 1..].to_vec(),
                "after #{k}"
            );
        }
    }
}

pub async fn datastore_invalid_cursor(ds: &dyn Datastore) {
    let pk = unique("cursor");
    ds.create(
        Kind::Event,
        record(&unique("cursor-r"), b"", [Some((&pk, "a")), None, None]),
    )
    .await
    .expect("create");
    for bad in ["%%% not a cursor %%%", "!"] {
        let mut q = Query::new(Kind::Event, 0, &pk);
        q.after = Some(bad.to_string());
        assert_err!(ds.query(&q).await, StoreError::InvalidCursor);
        assert_err!(
            ds.scan(Kind::Event, Some(bad), 10).await,
            StoreError::InvalidCursor
        );
    }
}

pub async fn datastore_invalid_slot(ds: &dyn Datastore) {
    let q = Query::new(Kind::Event, INDEX_SLOTS, unique("slot"));
    assert_err!(ds.query(&q).await, StoreError::InvalidArgument(_));
}

pub async fn datastore_isolation(ds: &dyn Datastore) {
    let kind = Kind::Application;
    let pk = unique("iso");
    let mine = unique("iso-mine");
    let shorter = &pk[..pk.len() - 1];
    let longer = format!("{pk}0");
    ds.create(kind, record(&mine, b"", [Some((&pk, "m")), None, None]))
        .await
        .expect("create");
    let strangers: [(Kind, Slots<'_>); 4] = [
        (Kind::Deployment, [Some((&pk, "m")), None, None]), // other kind, same pk
        (kind, [None, Some((&pk, "m")), None]),             // other slot, same pk
        (kind, [Some((shorter, "m")), None, None]),         // pk that is a prefix of ours
        (kind, [Some((&longer, "m")), None, None]),         // pk that ours is a prefix of
    ];
    for (other_kind, indexes) in strangers {
        ds.create(other_kind, record(&unique("iso-stranger"), b"", indexes))
            .await
            .expect("create stranger");
    }
    for descending in [false, true] {
        let mut q = Query::new(kind, 0, &pk);
        q.descending = descending;
        assert_eq!(ids(&query_all(ds, &q).await), vec![mine.clone()]);
        q.sk_from = Some("a".into());
        q.sk_to = Some("n".into());
        assert_eq!(ids(&query_all(ds, &q).await), vec![mine.clone()]);
    }
    assert!(
        query_all(ds, &Query::new(Kind::Piped, 0, &pk))
            .await
            .is_empty()
    );
}

pub async fn datastore_expiry(ds: &dyn Datastore) {
    let kind = Kind::UnregisteredApps;
    let pk = unique("ttl");
    let now = now_unix();
    let expired = unique("ttl-expired");
    let alive = unique("ttl-alive");
    let mut r = record(&expired, b"old", [Some((&pk, "1")), None, None]);
    r.expires_at = Some(now - 60);
    ds.create(kind, r).await.expect("create expired");
    let mut r = record(&alive, b"", [Some((&pk, "2")), None, None]);
    r.expires_at = Some(now + 3600);
    ds.create(kind, r).await.expect("create alive");

    assert_err!(ds.get(kind, &expired).await, StoreError::NotFound(_));
    assert_eq!(ds.get(kind, &alive).await.expect("alive").id, alive);
    assert_eq!(
        ids(&query_all(ds, &Query::new(kind, 0, &pk)).await),
        vec![alive.clone()]
    );
    let scanned = scan_all(ds, kind, 50).await;
    assert!(
        !scanned.contains(&expired),
        "scan returned an expired record"
    );
    assert!(scanned.contains(&alive));

    // An expired record is absent for writers too.
    assert_err!(
        ds.put(kind, record(&expired, b"", [None, None, None]), 1)
            .await,
        StoreError::NotFound(_)
    );
    assert_err!(ds.delete(kind, &expired, 1).await, StoreError::NotFound(_));
    ds.create(kind, record(&expired, b"new", [None, None, None]))
        .await
        .expect("create over");
    let got = ds.get(kind, &expired).await.expect("re-created");
    assert_eq!(
        (got.data.as_slice(), got.version, got.expires_at),
        (&b"new"[..], 1, None)
    );
    assert_eq!(
        ids(&query_all(ds, &Query::new(kind, 0, &pk)).await),
        vec![alive]
    );
}

/// All ids of `kind` via `scan`, checking id order and that nothing repeats.
pub async fn scan_all(ds: &dyn Datastore, kind: Kind, page_size: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1_000_000 {
        let page = match ds.scan(kind, after.as_deref(), page_size).await {
            Ok(page) => page,
            Err(e) => panic!("scan {kind}: {e}"),
        };
        assert!(
            page.records.len() <= page_size,
            "scan page exceeds page_size"
        );
        for (r, cursor) in page.records {
            if let Some(last) = out.last() {
                assert!(*last < r.id, "scan out of id order: {last} then {}", r.id);
            }
            out.push(r.id);
            after = Some(cursor);
        }
        if !page.more {
            return out;
        }
        assert!(after.is_some(), "scan page with more=true but no records");
    }
    panic!("scan did not finish");
}

pub async fn datastore_scan(ds: &dyn Datastore) {
    let kind = Kind::DeploymentTrace;
    let base = unique("scan");
    let mine: Vec<String> = (0..7).map(|i| format!("{base}-{i}")).collect();
    for id in &mine {
        ds.create(kind, record(id, b"", [None, None, None]))
            .await
            .expect("create");
    }
    let other_kind = format!("{base}-other");
    ds.create(Kind::ApiKey, record(&other_kind, b"", [None, None, None]))
        .await
        .expect("create");
    for page_size in [1, 3, 1000] {
        let all = scan_all(ds, kind, page_size).await;
        let seen: Vec<&String> = all.iter().filter(|id| id.starts_with(&base)).collect();
        assert_eq!(
            seen,
            mine.iter().collect::<Vec<_>>(),
            "page_size={page_size}"
        );
        assert!(!all.contains(&other_kind), "scan leaked another kind");
    }
}

// ---------------------------------------------------------------------------------------
// Filestore
// ---------------------------------------------------------------------------------------

pub async fn filestore_suite(fs: Arc<dyn Filestore>) {
    filestore_get_missing(&*fs).await;
    filestore_round_trip(&*fs).await;
    filestore_absent(&*fs).await;
    filestore_matches(&*fs).await;
    filestore_list(&*fs).await;
    filestore_delete(&*fs).await;
    filestore_invalid_paths(&*fs).await;
    filestore_presigned_get(&*fs).await;
    filestore_concurrent_appends(fs.clone()).await;
}

pub async fn filestore_get_missing(fs: &dyn Filestore) {
    let base = unique("fs-missing");
    assert_err!(
        fs.get(&format!("{base}/nothing.txt")).await,
        StoreError::NotFound(_)
    );
    // A "directory" of other objects is not an object.
    fs.put(&format!("{base}/dir/x"), b"x".to_vec(), PutCondition::Any)
        .await
        .expect("put");
    assert_err!(
        fs.get(&format!("{base}/dir")).await,
        StoreError::NotFound(_)
    );
}

pub async fn filestore_round_trip(fs: &dyn Filestore) {
    let path = format!("log/{}/stage-1/0.txt", unique("fs-rt"));
    let first: Vec<u8> = (0..=255u8).collect();
    let etag = fs
        .put(&path, first.clone(), PutCondition::Any)
        .await
        .expect("put");
    let got = fs.get(&path).await.expect("get");
    assert_eq!((got.data, got.etag.clone()), (first.clone(), etag.clone()));
    // Same content, same etag is allowed but not required; new content, new etag is.
    let etag2 = fs
        .put(&path, b"second".to_vec(), PutCondition::Any)
        .await
        .expect("overwrite");
    assert_ne!(etag2, etag);
    let got = fs.get(&path).await.expect("get");
    assert_eq!((got.data.as_slice(), got.etag), (&b"second"[..], etag2));
    // Empty objects exist.
    let empty = format!("{path}.empty");
    let etag = fs
        .put(&empty, Vec::new(), PutCondition::Any)
        .await
        .expect("put empty");
    assert_eq!(fs.get(&empty).await.expect("get empty").etag, etag);
}

pub async fn filestore_absent(fs: &dyn Filestore) {
    let path = format!("{}/obj", unique("fs-absent"));
    let etag = fs
        .put(&path, b"one".to_vec(), PutCondition::Absent)
        .await
        .expect("create");
    assert_err!(
        fs.put(&path, b"two".to_vec(), PutCondition::Absent).await,
        StoreError::AlreadyExists(_)
    );
    let got = fs.get(&path).await.expect("get");
    assert_eq!((got.data.as_slice(), got.etag), (&b"one"[..], etag));
}

pub async fn filestore_matches(fs: &dyn Filestore) {
    let path = format!("{}/obj", unique("fs-match"));
    assert_err!(
        fs.put(
            &path,
            b"x".to_vec(),
            PutCondition::Matches("whatever".into())
        )
        .await,
        StoreError::NotFound(_)
    );
    let e1 = fs
        .put(&path, b"one".to_vec(), PutCondition::Any)
        .await
        .expect("put");
    let e2 = fs
        .put(&path, b"two".to_vec(), PutCondition::Matches(e1.clone()))
        .await
        .expect("cas");
    assert_err!(
        fs.put(&path, b"three".to_vec(), PutCondition::Matches(e1))
            .await,
        StoreError::Conflict(_)
    );
    let got = fs.get(&path).await.expect("get");
    assert_eq!(
        (got.data.as_slice(), got.etag.clone()),
        (&b"two"[..], e2.clone())
    );
    fs.put(&path, b"three".to_vec(), PutCondition::Matches(e2))
        .await
        .expect("cas again");
    assert_eq!(fs.get(&path).await.expect("get").data, b"three");
}

/// 20 tasks append a line each to one object with get → modify → put(Matches), retrying
/// on lost races; every line must survive.
pub async fn filestore_concurrent_appends(fs: Arc<dyn Filestore>) {
    const WRITERS: usize = 20;
    let path = format!("log/{}/stage/0.txt", unique("fs-append"));
    let mut tasks = Vec::new();
    for n in 0..WRITERS {
        let fs = fs.clone();
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let line = format!("line {n}\n");
            for attempt in 0..10_000u32 {
                let result = match fs.get(&path).await {
                    Ok(obj) => {
                        let mut data = obj.data;
                        data.extend_from_slice(line.as_bytes());
                        fs.put(&path, data, PutCondition::Matches(obj.etag)).await
                    }
                    Err(StoreError::NotFound(_)) => {
                        fs.put(&path, line.clone().into_bytes(), PutCondition::Absent)
                            .await
                    }
                    Err(e) => panic!("writer {n}: get: {e}"),
                };
                match result {
                    Ok(_) => return,
                    Err(
                        StoreError::Conflict(_)
                        | StoreError::AlreadyExists(_)
                        | StoreError::NotFound(_),
                    ) => {
                        if attempt % 4 == 3 {
                            let ms = rand::random::<u64>() % 3;
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        } else {
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => panic!("writer {n}: put: {e}"),
                }
            }
            panic!("writer {n} never won a race");
        }));
    }
    for task in tasks {
        task.await.expect("writer task");
    }
    let data = fs.get(&path).await.expect("get").data;
    let text = String::from_utf8(data).expect("utf-8");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    let mut want: Vec<String> = (0..WRITERS).map(|n| format!("line {n}")).collect();
    want.sort_unstable();
    assert_eq!(lines, want, "lost or duplicated appends");
}

pub async fn filestore_list(fs: &dyn Filestore) {
    let base = unique("fs-list");
    // Written out of order; `.` sorts before `/`, so "b.txt" precedes "b/…".
    let inside = [
        "c",
        "b/2.txt",
        "a.txt",
        "b.txt",
        "b/1.txt",
        "b/sub/deep.json",
        "b0",
    ];
    let now = now_unix();
    let mut etags = HashMap::new();
    for name in inside {
        let path = format!("{base}/{name}");
        let etag = fs
            .put(&path, name.as_bytes().to_vec(), PutCondition::Any)
            .await
            .expect("put");
        etags.insert(path, etag);
    }
    // Neighbours that share a string prefix but are outside `{base}/`.
    fs.put(&format!("{base}0/x"), b"x".to_vec(), PutCondition::Any)
        .await
        .expect("put");
    fs.put(&format!("{base}.txt"), b"x".to_vec(), PutCondition::Any)
        .await
        .expect("put");

    let mut want: Vec<String> = inside.iter().map(|n| format!("{base}/{n}")).collect();
    want.sort();
    for limit in [1, 2, 3, 100] {
        let mut got = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..100 {
            let page = fs
                .list(&format!("{base}/"), after.as_deref(), limit)
                .await
                .expect("list");
            assert!(page.objects.len() <= limit, "page exceeds limit {limit}");
            for o in &page.objects {
                assert_eq!(Some(&o.etag), etags.get(&o.path), "etag of {}", o.path);
                let name = o
                    .path
                    .strip_prefix(&format!("{base}/"))
                    .expect("under prefix");
                assert_eq!(o.size, name.len() as u64, "size of {}", o.path);
                assert!(
                    (o.updated_at - now).abs() < 300,
                    "updated_at {} of {}",
                    o.updated_at,
                    o.path
                );
            }
            got.extend(page.objects.into_iter().map(|o| o.path));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(got, want, "limit={limit}");
    }

    // A prefix may end mid-name.
    let page = fs
        .list(&format!("{base}/b"), None, 100)
        .await
        .expect("list");
    let got: Vec<String> = page.objects.into_iter().map(|o| o.path).collect();
    let want_b: Vec<String> = want
        .iter()
        .filter(|p| p.starts_with(&format!("{base}/b")))
        .cloned()
        .collect();
    assert_eq!(got, want_b);
    assert_eq!(want_b.len(), 5);
    // `after` is exclusive and need not name an existing object.
    let page = fs
        .list(&format!("{base}/"), Some(&format!("{base}/b/1.txt")), 100)
        .await
        .expect("list");
    let got: Vec<String> = page.objects.into_iter().map(|o| o.path).collect();
    assert_eq!(got, want[3..].to_vec());
    let page = fs
        .list(&format!("{base}/"), Some(&format!("{base}/b/3")), 100)
        .await
        .expect("list");
    let got: Vec<String> = page.objects.into_iter().map(|o| o.path).collect();
    assert_eq!(got, want[4..].to_vec());
    assert!(
        fs.list(&format!("{base}/nothing/"), None, 10)
            .await
            .expect("list")
            .objects
            .is_empty()
    );
}

pub async fn filestore_delete(fs: &dyn Filestore) {
    let base = unique("fs-delete");
    let path = format!("{base}/a/b.txt");
    let sibling = format!("{base}/a/c.txt");
    fs.put(&path, b"x".to_vec(), PutCondition::Any)
        .await
        .expect("put");
    fs.put(&sibling, b"y".to_vec(), PutCondition::Any)
        .await
        .expect("put");
    fs.delete(&path).await.expect("delete");
    assert_err!(fs.get(&path).await, StoreError::NotFound(_));
    fs.delete(&path).await.expect("delete again");
    fs.delete(&format!("{base}/never/was"))
        .await
        .expect("delete never written");
    assert_eq!(fs.get(&sibling).await.expect("sibling").data, b"y");
    let listed = fs.list(&format!("{base}/"), None, 10).await.expect("list");
    assert_eq!(
        listed
            .objects
            .iter()
            .map(|o| o.path.clone())
            .collect::<Vec<_>>(),
        vec![sibling]
    );
    // Re-creating after a delete works, including Absent.
    fs.put(&path, b"z".to_vec(), PutCondition::Absent)
        .await
        .expect("re-create");
}

pub async fn filestore_invalid_paths(fs: &dyn Filestore) {
    for bad in [
        "",
        "/etc/passwd",
        "../outside",
        "a/../../outside",
        "a/..",
        "a\\b",
        "..",
        "a//b",
    ] {
        assert_err!(fs.get(bad).await, StoreError::InvalidArgument(_));
        assert_err!(
            fs.put(bad, b"x".to_vec(), PutCondition::Any).await,
            StoreError::InvalidArgument(_)
        );
        assert_err!(fs.delete(bad).await, StoreError::InvalidArgument(_));
        assert_err!(
            fs.presigned_get(bad, &presign_request()).await,
            StoreError::InvalidArgument(_)
        );
    }
}

fn presign_request() -> crate::filestore::PresignedGet {
    crate::filestore::PresignedGet {
        signed_at: std::time::SystemTime::now(),
        expires_in: Duration::from_secs(600),
        content_type: Some("text/javascript; charset=utf-8".into()),
        cache_control: None,
    }
}

/// A backend either has no presigned URLs or gives an absolute http(s) URL that names
/// the object; the same signing time gives the same URL (browsers cache by URL).
pub async fn filestore_presigned_get(fs: &dyn Filestore) {
    let path = format!("console/{}/app.0123abcd.js", unique("fs-presign"));
    let request = presign_request();
    let Some(url) = fs.presigned_get(&path, &request).await.expect("presign") else {
        return;
    };
    assert!(
        url.starts_with("https://") || url.starts_with("http://"),
        "{url}"
    );
    assert!(url.contains("app.0123abcd.js"), "{url}");
    let again = fs.presigned_get(&path, &request).await.expect("presign");
    assert_eq!(again.as_deref(), Some(url.as_str()));
}

// ---------------------------------------------------------------------------------------
// Cache
// ---------------------------------------------------------------------------------------

pub async fn cache_suite(cache: Arc<dyn Cache>) {
    cache_get_put_delete(&*cache).await;
    cache_ttl(&*cache).await;
    cache_hash(&*cache).await;
}

pub async fn cache_get_put_delete(cache: &dyn Cache) {
    let key = unique("cache-kv");
    assert_eq!(cache.get(&key).await.expect("get"), None);
    cache.put(&key, b"one".to_vec(), None).await.expect("put");
    assert_eq!(
        cache.get(&key).await.expect("get").as_deref(),
        Some(&b"one"[..])
    );
    cache
        .put(&key, b"two".to_vec(), None)
        .await
        .expect("overwrite");
    assert_eq!(
        cache.get(&key).await.expect("get").as_deref(),
        Some(&b"two"[..])
    );
    cache
        .put(&key, Vec::new(), None)
        .await
        .expect("empty value");
    assert_eq!(
        cache.get(&key).await.expect("get").as_deref(),
        Some(&b""[..])
    );
    cache.delete(&key).await.expect("delete");
    assert_eq!(cache.get(&key).await.expect("get"), None);
    cache.delete(&key).await.expect("delete missing");
}

pub async fn cache_ttl(cache: &dyn Cache) {
    let short = unique("cache-short");
    let forever = unique("cache-forever");
    let reset = unique("cache-reset");
    let ttl = Some(Duration::from_millis(50));
    cache.put(&short, b"s".to_vec(), ttl).await.expect("put");
    cache.put(&forever, b"f".to_vec(), None).await.expect("put");
    cache.put(&reset, b"r".to_vec(), ttl).await.expect("put");
    // Overwriting without a TTL clears the TTL.
    cache.put(&reset, b"r2".to_vec(), None).await.expect("put");
    assert_eq!(
        cache.get(&short).await.expect("get").as_deref(),
        Some(&b"s"[..])
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        cache.get(&short).await.expect("get"),
        None,
        "TTL not honoured"
    );
    assert_eq!(
        cache.get(&forever).await.expect("get").as_deref(),
        Some(&b"f"[..])
    );
    assert_eq!(
        cache.get(&reset).await.expect("get").as_deref(),
        Some(&b"r2"[..])
    );
    // A long TTL keeps the entry.
    cache
        .put(&short, b"s2".to_vec(), Some(Duration::from_secs(3600)))
        .await
        .expect("put");
    assert_eq!(
        cache.get(&short).await.expect("get").as_deref(),
        Some(&b"s2"[..])
    );
}

pub async fn cache_hash(cache: &dyn Cache) {
    let key = unique("cache-hash");
    assert_eq!(cache.hash_get(&key, "f").await.expect("hash_get"), None);
    assert!(
        cache
            .hash_get_all(&key)
            .await
            .expect("hash_get_all")
            .is_empty()
    );
    cache
        .hash_delete(&key, "f")
        .await
        .expect("hash_delete missing");
    cache
        .hash_set(&key, "a", b"1".to_vec())
        .await
        .expect("hash_set");
    cache
        .hash_set(&key, "b", b"2".to_vec())
        .await
        .expect("hash_set");
    cache
        .hash_set(&key, "a", b"3".to_vec())
        .await
        .expect("hash_set overwrite");
    assert_eq!(
        cache
            .hash_get(&key, "a")
            .await
            .expect("hash_get")
            .as_deref(),
        Some(&b"3"[..])
    );
    assert_eq!(cache.hash_get(&key, "zz").await.expect("hash_get"), None);
    let all = cache.hash_get_all(&key).await.expect("hash_get_all");
    let want: HashMap<String, Vec<u8>> = [
        ("a".to_string(), b"3".to_vec()),
        ("b".to_string(), b"2".to_vec()),
    ]
    .into();
    assert_eq!(all, want);
    cache.hash_delete(&key, "a").await.expect("hash_delete");
    assert_eq!(cache.hash_get(&key, "a").await.expect("hash_get"), None);
    assert_eq!(
        cache.hash_get_all(&key).await.expect("hash_get_all").len(),
        1
    );
    cache
        .hash_delete(&key, "missing")
        .await
        .expect("hash_delete missing field");
    cache.delete(&key).await.expect("delete");
    assert!(
        cache
            .hash_get_all(&key)
            .await
            .expect("hash_get_all")
            .is_empty()
    );
    // Hashes under different keys are independent.
    let other = unique("cache-hash");
    cache
        .hash_set(&key, "x", b"1".to_vec())
        .await
        .expect("hash_set");
    cache
        .hash_set(&other, "x", b"2".to_vec())
        .await
        .expect("hash_set");
    assert_eq!(
        cache
            .hash_get(&key, "x")
            .await
            .expect("hash_get")
            .as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        cache
            .hash_get(&other, "x")
            .await
            .expect("hash_get")
            .as_deref(),
        Some(&b"2"[..])
    );
}
