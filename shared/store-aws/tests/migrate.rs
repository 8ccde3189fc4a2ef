//! `wisp_store::migrate` from the embedded backends to DynamoDB + S3 and back again: every
//! record (index keys and expiry included) and every object survives the round trip, and
//! a second run into AWS writes nothing.
//!
//! Needs `WISP_TEST_DYNAMODB_ENDPOINT` (DynamoDB Local) and `WISP_TEST_MOTO_ENDPOINT`
//! (moto_server); `scripts/test` starts both. Unset: the test prints a note and passes,
//! unless `WISP_REQUIRE_AWS_TESTS=1`, when it fails.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use tempfile::TempDir;
use wisp_store::conformance as cf;
use wisp_store::datastore::{Datastore, IndexKey, Kind, Record};
use wisp_store::filestore::{Filestore, PutCondition};
use wisp_store::migrate::{Backends, MemoryCheckpoint, MigrateOptions, NoProgress, migrate};
use wisp_store_aws::dynamodb::{self, DynamoDbDatastore};
use wisp_store_aws::s3::S3Filestore;
use wisp_store_embedded::{LocalFilestore, SqliteDatastore};

const DYNAMODB_VAR: &str = "WISP_TEST_DYNAMODB_ENDPOINT";
const MOTO_VAR: &str = "WISP_TEST_MOTO_ENDPOINT";
const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";

/// Both endpoints, or `None` (after a note) when this test is off.
fn endpoints() -> Option<(String, String)> {
    let get = |var: &str| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    match (get(DYNAMODB_VAR), get(MOTO_VAR)) {
        (Some(dynamodb), Some(moto)) => Some((dynamodb, moto)),
        _ => {
            let what = format!(
                "{DYNAMODB_VAR} and {MOTO_VAR} must both be set (scripts/test starts \
                 DynamoDB Local and moto_server and sets them)"
            );
            if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
                panic!("{what}, and {REQUIRE_VAR}=1 requires this test to run");
            }
            eprintln!("note: skipping the embedded -> AWS -> embedded migration test: {what}");
            None
        }
    }
}

/// SDK config for a stand-in: the environment's credentials and region when set, else
/// dummy ones (letters and digits only, as DynamoDB Local wants) and `us-east-1`.
async fn sdk_config(endpoint: &str) -> SdkConfig {
    let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region))
        .endpoint_url(endpoint);
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader = loader.credentials_provider(Credentials::new(
            "wispTest",
            "wispTestSecret",
            None,
            None,
            "wisp-migrate-test",
        ));
    }
    loader.load().await
}

struct Embedded {
    ds: SqliteDatastore,
    fs: LocalFilestore,
    _dir: TempDir,
}

impl Embedded {
    fn new() -> Embedded {
        let dir = tempfile::tempdir().expect("tempdir");
        Embedded {
            ds: SqliteDatastore::open(dir.path().join("wisp.db")).expect("datastore"),
            fs: LocalFilestore::open(dir.path().join("filestore")).expect("filestore"),
            _dir: dir,
        }
    }

    fn backends(&self) -> Backends<'_> {
        Backends {
            datastore: &self.ds,
            filestore: &self.fs,
        }
    }
}

use wisp_store::collection::now_unix;

fn record(kind: Kind, i: usize) -> Record {
    let id = format!("{}-{i}", kind.as_str().to_lowercase());
    Record {
        project_id: "p1".into(),
        version: 1,
        data: format!("{kind} {i}").into_bytes(),
        indexes: [
            Some(IndexKey::new("p1", format!("{:020}", 100 + i))),
            None,
            (i == 0).then(|| IndexKey::new("unhandled", id.clone())),
        ],
        expires_at: (kind == Kind::PipedStat).then(|| now_unix() + 3600),
        id,
    }
}

async fn records(ds: &dyn Datastore, kind: Kind) -> Vec<Record> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = ds.scan(kind, cursor.as_deref(), 2).await.expect("scan");
        let last = page.records.last().map(|(_, c)| c.clone());
        out.extend(
            page.records
                .into_iter()
                .map(|(r, _)| Record { version: 0, ..r }),
        );
        match last {
            Some(c) if page.more => cursor = Some(c),
            _ => break,
        }
    }
    out
}

async fn objects(fs: &dyn Filestore) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = fs.list("", after.as_deref(), 2).await.expect("list");
        for attrs in &page.objects {
            let data = fs.get(&attrs.path).await.expect("get").data;
            out.insert(attrs.path.clone(), data);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    out
}

async fn assert_same(a: Backends<'_>, b: Backends<'_>) {
    for kind in Kind::ALL {
        assert_eq!(
            records(a.datastore, kind).await,
            records(b.datastore, kind).await,
            "{kind}"
        );
    }
    assert_eq!(objects(a.filestore).await, objects(b.filestore).await);
}

#[tokio::test]
async fn embedded_to_aws_and_back() {
    let Some((dynamodb_endpoint, moto_endpoint)) = endpoints() else {
        return;
    };
    // The AWS side: a fresh table and bucket.
    let client = dynamodb::sdk::Client::new(&sdk_config(&dynamodb_endpoint).await);
    let table = cf::unique("wisp-migrate");
    dynamodb::create_table(&client, &table)
        .await
        .expect("create the table");
    let ddb = DynamoDbDatastore::new(client.clone(), table.clone());
    let mut bucket = cf::unique("wisp-migrate");
    bucket.truncate(63);
    let s3 = S3Filestore::from_sdk_config(&sdk_config(&moto_endpoint).await, bucket, Some("wisp/"))
        .expect("S3 filestore");
    s3.create_bucket_if_missing()
        .await
        .expect("create the bucket");
    let aws = Backends {
        datastore: &ddb,
        filestore: &s3,
    };

    // The embedded source: every kind, objects under every prefix (one of 1 MiB).
    let source = Embedded::new();
    for kind in Kind::ALL {
        for i in 0..3 {
            source.ds.create(kind, record(kind, i)).await.expect("seed");
        }
    }
    let big: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let objects_in = [
        ("log/dep-1/stage-0/0.txt", b"{}\nEOL\n".to_vec()),
        ("application-live-state/app-1.json", b"{\"a\":1}".to_vec()),
        ("latest-analysis-result/app-1.json", b"{}".to_vec()),
        ("application-shared-objects/app-1/plugin/key", big),
        ("command-output/cmd-1", Vec::new()),
        ("insights/p1/x.json", b"[]".to_vec()),
    ];
    for (path, data) in objects_in.iter().cloned() {
        source
            .fs
            .put(path, data, PutCondition::Absent)
            .await
            .expect("seed object");
    }

    let mut options = MigrateOptions::new("embedded", "aws");
    options.page_size = 2;
    let there = migrate(
        source.backends(),
        aws,
        &options,
        &NoProgress,
        &MemoryCheckpoint::new(),
    )
    .await
    .expect("embedded -> AWS");
    assert!(there.counts_match, "{there:#?}");
    assert_eq!(
        there.written(),
        (3 * Kind::ALL.len() + objects_in.len()) as u64
    );
    assert_same(source.backends(), aws).await;

    // Again: nothing to write (S3's etags are not the local ones: content is compared).
    let again = migrate(
        source.backends(),
        aws,
        &options,
        &NoProgress,
        &MemoryCheckpoint::new(),
    )
    .await
    .expect("embedded -> AWS again");
    assert!(again.counts_match, "{again:#?}");
    assert_eq!(again.written(), 0, "{again:#?}");

    // And back into a fresh embedded set.
    let back = Embedded::new();
    let mut options = MigrateOptions::new("aws", "embedded");
    options.page_size = 2;
    let report = migrate(
        aws,
        back.backends(),
        &options,
        &NoProgress,
        &MemoryCheckpoint::new(),
    )
    .await
    .expect("AWS -> embedded");
    assert!(report.counts_match, "{report:#?}");
    assert_same(source.backends(), back.backends()).await;

    if let Err(e) = dynamodb::delete_table(&client, &table).await {
        eprintln!("note: could not delete test table {table}: {e}");
    }
}
