//! The shared datastore conformance suite — the same case functions the embedded backend
//! runs — against DynamoDB Local, plus what only DynamoDB can show (request counts,
//! 1 MB response pages, TTL leftovers, item size, the table helper).
//!
//! ```sh
//! eval "$(scripts/dynamodb-local.sh start 8000)"   # WISP_TEST_DYNAMODB_ENDPOINT=...
//! cargo test -p wisp-store-aws --test dynamodb_conformance
//! scripts/dynamodb-local.sh stop
//! ```
//!
//! Without `WISP_TEST_DYNAMODB_ENDPOINT` every test here is skipped (with a note), unless
//! `WISP_REQUIRE_AWS_TESTS=1`, which turns the skip into a failure (CI). All tests share
//! one uniquely named table (every case uses ids and partitions of its own); the last
//! test to finish deletes it. Credentials: the default chain if `AWS_ACCESS_KEY_ID` is
//! set, otherwise static dummy ones (DynamoDB Local accepts any); region `us-east-1`.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use tokio::sync::OnceCell;
use wisp_proto::model;
use wisp_store::cache::Cache;
use wisp_store::collection::Collection;
use wisp_store::conformance as cf;
use wisp_store::entities::{pk, slot};
use wisp_store::pipedstat::PipedStatStore;
use wisp_store::{Datastore, IndexKey, Kind, Query, Record, StoreError};
use wisp_store_aws::dynamodb::sdk::config::Credentials;
use wisp_store_aws::dynamodb::{self, DynamoDbDatastore, MAX_ITEM_BYTES};

const ENDPOINT_VAR: &str = "WISP_TEST_DYNAMODB_ENDPOINT";
const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";
const REGION: &str = "us-east-1";

/// The endpoint to test against; `None` (after a note) skips the test.
fn endpoint() -> Option<String> {
    match std::env::var(ENDPOINT_VAR) {
        Ok(endpoint) if !endpoint.trim().is_empty() => Some(endpoint.trim().to_string()),
        _ => {
            if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
                panic!(
                    "{REQUIRE_VAR}=1 but {ENDPOINT_VAR} is not set: start DynamoDB Local \
                     (eval \"$(scripts/dynamodb-local.sh start)\") and export its endpoint"
                );
            }
            eprintln!(
                "note: skipping DynamoDB test: {ENDPOINT_VAR} is not set \
                 (eval \"$(scripts/dynamodb-local.sh start)\" to run it)"
            );
            None
        }
    }
}

/// A client for `endpoint`; built per test, since a client's connections belong to the
/// runtime that opened them and every `#[tokio::test]` has its own runtime.
async fn client(endpoint: &str) -> dynamodb::sdk::Client {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(endpoint);
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader = loader.credentials_provider(Credentials::new(
            // DynamoDB Local accepts any key made of letters and digits only.
            "wispTest",
            "wispTestSecret",
            None,
            None,
            "wisp-dynamodb-conformance",
        ));
    }
    dynamodb::sdk::Client::new(&loader.load().await)
}

static TABLE: OnceCell<String> = OnceCell::const_new();
static FINISHED: AtomicUsize = AtomicUsize::new(0);

/// One test's handle on the shared table. Dropping the last one (even while a test
/// panics) deletes the table.
struct TestTable {
    endpoint: String,
    table: String,
    ds: Arc<DynamoDbDatastore>,
}

impl TestTable {
    async fn open() -> Option<TestTable> {
        let endpoint = endpoint()?;
        let client = client(&endpoint).await;
        let table = TABLE
            .get_or_init(|| async {
                let name = cf::unique("wisp-conformance");
                dynamodb::create_table(&client, &name)
                    .await
                    .unwrap_or_else(|e| panic!("creating table {name} on {endpoint}: {e}"));
                name
            })
            .await
            .clone();
        let ds = Arc::new(DynamoDbDatastore::new(client, table.clone()));
        Some(TestTable {
            endpoint,
            table,
            ds,
        })
    }

    fn dyn_ds(&self) -> Arc<dyn Datastore> {
        self.ds.clone()
    }
}

impl Drop for TestTable {
    fn drop(&mut self) {
        if FINISHED.fetch_add(1, Ordering::SeqCst) + 1 != TABLE_TESTS {
            return;
        }
        // Async work from Drop: a runtime of its own on a thread of its own.
        let (endpoint, table) = (self.endpoint.clone(), self.table.clone());
        let deleted = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let client = client(&endpoint).await;
                dynamodb::delete_table(&client, &table)
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("note: could not delete test table {}: {e}", self.table),
            Err(_) => eprintln!("note: deleting test table {} panicked", self.table),
        }
    }
}

/// Tests on the shared table, counted so the last one can delete it.
macro_rules! table_tests {
    (
        cases: [$($case:ident),* $(,)?],
        arc_cases: [$($arc_case:ident),* $(,)?],
        tests: { $( $(#[$meta:meta])* async fn $name:ident($t:ident) $body:block )* }
    ) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(t) = TestTable::open().await else { return };
                cf::$case(&*t.ds).await;
            }
        )*
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $arc_case() {
                let Some(t) = TestTable::open().await else { return };
                cf::$arc_case(t.dyn_ds()).await;
            }
        )*
        $(
            $(#[$meta])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let Some($t) = TestTable::open().await else { return };
                $body
            }
        )*
        const TABLE_TESTS: usize =
            [$(stringify!($case),)* $(stringify!($arc_case),)* $(stringify!($name),)*].len();
    };
}

fn record(id: &str, data: Vec<u8>, indexes: [Option<IndexKey>; 3]) -> Record {
    Record {
        id: id.to_string(),
        project_id: "p".into(),
        version: 0,
        data,
        indexes,
        expires_at: None,
    }
}

use wisp_store::collection::now_unix;

/// A cache that holds nothing, so that only datastore requests are measured.
struct NoCache;

#[async_trait]
impl Cache for NoCache {
    async fn get(&self, _: &str) -> wisp_store::error::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    async fn put(
        &self,
        _: &str,
        _: Vec<u8>,
        _: Option<std::time::Duration>,
    ) -> wisp_store::error::Result<()> {
        Ok(())
    }
    async fn delete(&self, _: &str) -> wisp_store::error::Result<()> {
        Ok(())
    }
    async fn hash_set(&self, _: &str, _: &str, _: Vec<u8>) -> wisp_store::error::Result<()> {
        Ok(())
    }
    async fn hash_get(&self, _: &str, _: &str) -> wisp_store::error::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    async fn hash_get_all(
        &self,
        _: &str,
    ) -> wisp_store::error::Result<std::collections::HashMap<String, Vec<u8>>> {
        Ok(Default::default())
    }
    async fn hash_delete(&self, _: &str, _: &str) -> wisp_store::error::Result<()> {
        Ok(())
    }
}

table_tests! {
    cases: [
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
    ],
    arc_cases: [datastore_concurrent_updates, audit_log],
    tests: {
        /// The whole suite, twice, on the one table (as `wisp serve` would share it).
        async fn suite_twice_on_one_table(t) {
            cf::datastore_suite(t.dyn_ds()).await;
            cf::datastore_suite(t.dyn_ds()).await;
        }

        /// ListUnhandledCommands' read (services/src/piped/commands.rs) is one Query,
        /// whether or not there are commands, and nothing else.
        async fn one_query_per_unhandled_commands_poll(t) {
            let commands: Collection<model::Command> = Collection::new(t.dyn_ds());
            let (project, piped) = (cf::unique("proj"), cf::unique("piped"));
            let poll = || async {
                let before = t.ds.stats();
                let found = commands
                    .list_all(
                        slot::COMMAND_UNHANDLED_BY_PIPED,
                        pk::project_piped(&project, &piped),
                        None,
                    )
                    .await
                    .expect("poll");
                (found, t.ds.stats().since(&before))
            };
            let (found, cost) = poll().await;
            assert!(found.is_empty());
            assert_eq!((cost.requests("Query"), cost.total_requests()), (1, 1), "{cost:?}");
            eprintln!("ListUnhandledCommands, no commands: {cost:?}");

            for (n, status) in [
                model::CommandStatus::CommandNotHandledYet,
                model::CommandStatus::CommandSucceeded,
                model::CommandStatus::CommandNotHandledYet,
            ]
            .into_iter()
            .enumerate()
            {
                commands
                    .create(model::Command {
                        id: cf::unique(&format!("cmd{n}")),
                        piped_id: piped.clone(),
                        application_id: "app".into(),
                        project_id: project.clone(),
                        commander: "tester".into(),
                        status: status as i32,
                        r#type: model::command::Type::SyncApplication as i32,
                        ..Default::default()
                    })
                    .await
                    .expect("create command");
            }
            let (found, cost) = poll().await;
            assert_eq!(found.len(), 2, "only unhandled commands");
            assert_eq!((cost.requests("Query"), cost.total_requests()), (1, 1), "{cost:?}");
            eprintln!("ListUnhandledCommands, 2 commands: {cost:?}");
        }

        /// ReportStat (PipedStatStore::put): one GetItem, plus one PutItem only when the
        /// stored stat must change.
        async fn report_stat_requests(t) {
            let stats = PipedStatStore::new(t.dyn_ds(), Arc::new(NoCache));
            let piped = cf::unique("stat-piped");
            let now = now_unix();
            let report = |metrics: &'static [u8], at: i64| {
                let stats = stats.clone();
                let piped = piped.clone();
                let ds = t.ds.clone();
                async move {
                    let before = ds.stats();
                    stats.put("proj", &piped, metrics.to_vec(), at).await.expect("report");
                    ds.stats().since(&before)
                }
            };
            let first = report(b"m1", now).await;
            assert_eq!((first.requests("GetItem"), first.requests("PutItem")), (1, 1), "{first:?}");
            let same = report(b"m1", now + 5).await;
            assert_eq!((same.requests("GetItem"), same.total_requests()), (1, 1), "{same:?}");
            let changed = report(b"m2", now + 10).await;
            assert_eq!(
                (changed.requests("GetItem"), changed.requests("PutItem"), changed.total_requests()),
                (1, 1, 2),
                "{changed:?}"
            );
            eprintln!("ReportStat first: {first:?}\nReportStat unchanged: {same:?}\nReportStat changed: {changed:?}");
        }

        /// Records must stay far below DynamoDB's 400 KB item limit.
        async fn oversized_records_are_refused(t) {
            let id = cf::unique("big");
            let too_big = record(&id, vec![7; MAX_ITEM_BYTES], [None, None, None]);
            assert!(matches!(
                t.ds.create(Kind::Deployment, too_big).await,
                Err(StoreError::InvalidArgument(_))
            ));
            t.ds
                .create(Kind::Deployment, record(&id, vec![7; 300 * 1024], [None, None, None]))
                .await
                .expect("300 KB record");
            assert!(matches!(
                t.ds.put(Kind::Deployment, record(&id, vec![7; 400 * 1024], [None, None, None]), 1).await,
                Err(StoreError::InvalidArgument(_))
            ));
            assert_eq!(t.ds.get(Kind::Deployment, &id).await.expect("get").version, 1);
            // A NUL in an index sort key would break the (sk, id) order.
            assert!(matches!(
                t.ds.create(
                    Kind::Deployment,
                    record(&cf::unique("nul"), vec![], [Some(IndexKey::new("p", "a\0b")), None, None]),
                )
                .await,
                Err(StoreError::InvalidArgument(_))
            ));
        }

        /// A query over more than 1 MB of items needs several DynamoDB requests; pages and
        /// cursors still come out whole and in order.
        async fn pages_cross_the_1mb_response_limit(t) {
            let pk = cf::unique("big-pages");
            let mut ids = Vec::new();
            for n in 0..10 {
                let id = cf::unique(&format!("big-{n}"));
                let sk = format!("{n:02}");
                t.ds
                    .create(
                        Kind::Deployment,
                        record(&id, vec![n as u8; 300 * 1024], [None, Some(IndexKey::new(&pk, &sk)), None]),
                    )
                    .await
                    .expect("create");
                ids.push(id);
            }
            for descending in [false, true] {
                let before = t.ds.stats();
                let mut q = Query::new(Kind::Deployment, 1, &pk);
                q.descending = descending;
                q.page_size = 100;
                let got = cf::query_all(&*t.ds, &q).await;
                let cost = t.ds.stats().since(&before);
                let mut want = ids.clone();
                if descending {
                    want.reverse();
                }
                assert_eq!(got.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), want);
                assert!(got.iter().enumerate().all(|(i, r)| r.data.len() == 300 * 1024
                    && r.data[0] == if descending { 9 - i as u8 } else { i as u8 }));
                assert!(cost.requests("Query") >= 3, "10 x 300 KB in one request? {cost:?}");
                eprintln!("3 MB query (descending={descending}): {cost:?}");
            }
        }

        /// Expired items TTL has not deleted yet still count against `Limit`: a page must
        /// not come back empty with `more` because of them.
        async fn expired_leftovers_never_make_empty_pages(t) {
            let pk = cf::unique("leftovers");
            let now = now_unix();
            for n in 0..25 {
                let mut r = record(&cf::unique("gone"), vec![], [Some(IndexKey::new(&pk, format!("a{n:02}"))), None, None]);
                r.expires_at = Some(now - 10);
                t.ds.create(Kind::Event, r).await.expect("create expired");
            }
            let live = cf::unique("live");
            t.ds
                .create(Kind::Event, record(&live, vec![], [Some(IndexKey::new(&pk, "z")), None, None]))
                .await
                .expect("create live");
            let mut q = Query::new(Kind::Event, 0, &pk);
            q.page_size = 1;
            let page = t.ds.query(&q).await.expect("query");
            assert_eq!(page.records.len(), 1);
            assert_eq!(page.records[0].0.id, live);
            assert!(!page.more);
        }

        /// A cursor is a position, not a record: it still resumes after its record is gone.
        async fn cursor_survives_deleting_its_record(t) {
            let pk = cf::unique("cursor-del");
            let ids: Vec<String> = (0..3).map(|n| cf::unique(&format!("c{n}"))).collect();
            for (n, id) in ids.iter().enumerate() {
                t.ds
                    .create(Kind::Application, record(id, vec![], [None, None, Some(IndexKey::new(&pk, format!("{n}")))]))
                    .await
                    .expect("create");
            }
            let mut q = Query::new(Kind::Application, 2, &pk);
            q.page_size = 1;
            let first = t.ds.query(&q).await.expect("first page");
            assert!(first.more);
            let (r, cursor) = first.records[0].clone();
            assert_eq!(r.id, ids[0]);
            t.ds.delete(Kind::Application, &ids[0], 1).await.expect("delete");
            q.after = Some(cursor);
            q.page_size = 10;
            let rest = cf::query_all(&*t.ds, &q).await;
            assert_eq!(rest.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), ids[1..].to_vec());
        }

        /// `scan` is a Query on the kind's partition, never a DynamoDB Scan.
        async fn scan_is_a_query(t) {
            t.ds
                .create(Kind::DeploymentTrace, record(&cf::unique("scan-q"), vec![], [None, None, None]))
                .await
                .expect("create");
            let before = t.ds.stats();
            let all = cf::scan_all(&*t.ds, Kind::DeploymentTrace, 1000).await;
            assert!(!all.is_empty());
            let cost = t.ds.stats().since(&before);
            assert!(cost.requests("Query") >= 1 && cost.requests("Scan") == 0, "{cost:?}");
        }

        /// `create_table` on an existing table is fine, and TTL is on.
        async fn create_table_is_idempotent(t) {
            let client = client(&t.endpoint).await;
            dynamodb::create_table(&client, &t.table).await.expect("second create_table");
            let ttl = client
                .describe_time_to_live()
                .table_name(&t.table)
                .send()
                .await
                .expect("describe TTL");
            let ttl = ttl.time_to_live_description().expect("TTL description");
            assert_eq!(ttl.attribute_name(), Some("expires_at"));
            assert_eq!(
                ttl.time_to_live_status(),
                Some(&dynamodb::sdk::types::TimeToLiveStatus::Enabled)
            );
        }
    }
}

/// A table that does not exist is a configuration error: Internal, with context, and the
/// SDK's error kept whole below it (its code reachable, its words in the logged chain).
#[tokio::test]
async fn missing_table_is_internal() {
    use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    let Some(endpoint) = endpoint() else { return };
    let ds = DynamoDbDatastore::new(client(&endpoint).await, cf::unique("no-such-table"));
    match ds.get(Kind::Project, "x").await {
        Err(err @ StoreError::Internal { .. }) => {
            assert!(err.to_string().contains("GetItem"), "{err}");
            let mut sdk = None;
            let mut next = std::error::Error::source(&err);
            while let Some(cause) = next {
                if let Some(found) = cause.downcast_ref::<SdkError<GetItemError>>() {
                    sdk = Some(found);
                }
                next = cause.source();
            }
            let sdk = sdk.unwrap_or_else(|| panic!("no SDK error in the chain of {err:?}"));
            assert_eq!(sdk.code(), Some("ResourceNotFoundException"));
            let logged = wisp_store::error::chain(&err).to_string();
            assert!(logged.contains("ResourceNotFoundException"), "{logged}");
        }
        other => panic!("expected Internal, got {other:?}"),
    }
    assert!(ds.warm_up().await.is_err());
}

/// Nothing listening: Unavailable (the caller may retry), not Internal.
#[tokio::test]
async fn unreachable_endpoint_is_unavailable() {
    let ds = DynamoDbDatastore::new(client("http://127.0.0.1:9").await, "wisp");
    match ds.get(Kind::Project, "x").await {
        Err(StoreError::Unavailable { .. }) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}
