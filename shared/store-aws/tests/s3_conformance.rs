//! The shared filestore conformance suite against S3 as moto_server serves it, plus what
//! only S3 shows: the key prefix and upstream's key layout, keys written by others,
//! listings longer than one ListObjectsV2 page, and how a missing bucket or an unreachable
//! endpoint fails.
//!
//! Needs `WISP_TEST_MOTO_ENDPOINT` (e.g. `http://127.0.0.1:5000`, see `scripts/moto.sh`).
//! Unset: the tests print a note and pass, unless `WISP_REQUIRE_AWS_TESTS=1`, when they
//! fail. Credentials and region come from the environment when set, else dummy ones and
//! `us-east-1`. Every test makes its own bucket.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use wisp_store::conformance as cf;
use wisp_store::{Filestore, PutCondition, StoreError};
use wisp_store_aws::s3::S3Filestore;

const ENDPOINT_VAR: &str = "WISP_TEST_MOTO_ENDPOINT";
const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";

/// The moto endpoint, or `None` (after a note) when these tests are off.
fn endpoint(test: &str) -> Option<String> {
    match std::env::var(ENDPOINT_VAR) {
        Ok(e) if !e.is_empty() => Some(e),
        _ => {
            let what = format!(
                "{ENDPOINT_VAR} is not set (start moto with `scripts/moto.sh start 5000` and \
                 export {ENDPOINT_VAR}=http://127.0.0.1:5000)"
            );
            if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
                panic!("{test}: {what}, but {REQUIRE_VAR}=1 requires this test to run");
            }
            eprintln!("note: {test} skipped: {what}");
            None
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// SDK config for `endpoint`: the environment's credentials and region when set, else
/// dummy credentials (moto accepts any) and `us-east-1`.
async fn sdk_config(endpoint: &str) -> SdkConfig {
    let region = env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".into());
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region))
        .endpoint_url(endpoint);
    if env("AWS_ACCESS_KEY_ID").is_none() {
        loader = loader.credentials_provider(Credentials::new(
            "wisp-test",
            "wisp-test",
            None,
            None,
            "wisp-test",
        ));
    }
    loader.load().await
}

fn bucket_name() -> String {
    // Bucket names: 3-63 characters of [a-z0-9-].
    let mut name = cf::unique("wisp-test");
    name.truncate(63);
    name
}

/// A store on a fresh bucket, under `prefix`.
async fn store(test: &str, prefix: Option<&str>) -> Option<S3Filestore> {
    let endpoint = endpoint(test)?;
    let fs = S3Filestore::from_sdk_config(&sdk_config(&endpoint).await, bucket_name(), prefix)
        .expect("store");
    fs.create_bucket_if_missing().await.expect("create bucket");
    Some(fs)
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(fs) = store(stringify!($case), Some("wisp/")).await else { return };
                cf::$case(&fs).await;
            }
        )*
    };
}

cases!(
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
async fn filestore_concurrent_appends() {
    let Some(fs) = store("filestore_concurrent_appends", Some("wisp")).await else {
        return;
    };
    cf::filestore_concurrent_appends(Arc::new(fs)).await;
}

/// The whole suite twice on one bucket root (no prefix), as a shared deployment runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suite_twice_on_one_bucket() {
    let Some(fs) = store("suite_twice_on_one_bucket", None).await else {
        return;
    };
    let fs: Arc<dyn Filestore> = Arc::new(fs);
    cf::filestore_suite(fs.clone()).await;
    cf::filestore_suite(fs).await;
}

/// All keys in the bucket, as S3 has them.
async fn raw_keys(fs: &S3Filestore) -> Vec<String> {
    let out = fs
        .client()
        .list_objects_v2()
        .bucket(fs.bucket())
        .send()
        .await
        .expect("raw list");
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_string))
        .collect()
}

/// Paths are upstream's keys under the prefix, and two prefixes in one bucket are two
/// independent stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prefix_and_key_layout() {
    let Some(a) = store("prefix_and_key_layout", Some("team-a")).await else {
        return;
    };
    assert_eq!(a.prefix(), "team-a/");
    let b = S3Filestore::new(a.client().clone(), a.bucket(), Some("team-b/")).expect("b");
    let root = S3Filestore::new(a.client().clone(), a.bucket(), None).expect("root");

    let path = "log/deployment-1/stage-1/0.txt";
    a.put(path, b"a".to_vec(), PutCondition::Absent)
        .await
        .expect("put a");
    b.put(path, b"b".to_vec(), PutCondition::Absent)
        .await
        .expect("put b: another prefix, so absent there");
    a.put(
        "application-live-state/app-1.json",
        b"{}".to_vec(),
        PutCondition::Any,
    )
    .await
    .expect("put");
    let mut keys = raw_keys(&a).await;
    keys.sort();
    assert_eq!(
        keys,
        [
            "team-a/application-live-state/app-1.json",
            "team-a/log/deployment-1/stage-1/0.txt",
            "team-b/log/deployment-1/stage-1/0.txt",
        ]
    );
    assert_eq!(a.get(path).await.expect("get a").data, b"a");
    assert_eq!(b.get(path).await.expect("get b").data, b"b");
    let listed: Vec<String> = b
        .list("", None, 0)
        .await
        .expect("list b")
        .objects
        .into_iter()
        .map(|o| o.path)
        .collect();
    assert_eq!(listed, [path]);
    // The bucket root sees everything, with the prefixes as part of the paths.
    assert_eq!(root.list("", None, 0).await.expect("list").objects.len(), 3);
    assert_eq!(
        root.get(&format!("team-a/{path}")).await.expect("get").data,
        b"a"
    );
    b.delete(path).await.expect("delete b");
    assert_eq!(a.get(path).await.expect("a untouched").data, b"a");

    for bad in ["/abs", "a/../b", "a//b", "."] {
        assert!(
            matches!(
                S3Filestore::new(a.client().clone(), a.bucket(), Some(bad)),
                Err(StoreError::InvalidArgument(_))
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        S3Filestore::new(a.client().clone(), "", None),
        Err(StoreError::InvalidArgument(_))
    ));
}

/// Listings span several ListObjectsV2 calls (at most 1000 keys each) and skip keys that
/// are not valid object paths (console "folder" markers, `a//b`), without losing the
/// place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_listings_and_foreign_keys() {
    let Some(fs) = store("long_listings_and_foreign_keys", Some("wisp")).await else {
        return;
    };
    const N: usize = 1105;
    let fs = Arc::new(fs);
    let mut tasks = Vec::new();
    for worker in 0..16 {
        let fs = fs.clone();
        tasks.push(tokio::spawn(async move {
            for i in (worker..N).step_by(16) {
                fs.put(
                    &format!("many/{i:05}"),
                    vec![b'x'; i % 7],
                    PutCondition::Any,
                )
                .await
                .expect("put");
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer");
    }
    // Keys other tools may leave behind; none is a valid object path.
    for key in [
        "wisp/many/",
        "wisp/many/00010/",
        "wisp/many//x",
        "wisp/many/./y",
    ] {
        fs.client()
            .put_object()
            .bucket(fs.bucket())
            .key(key)
            .body(Vec::<u8>::new().into())
            .send()
            .await
            .expect("raw put");
    }
    let want: Vec<String> = (0..N).map(|i| format!("many/{i:05}")).collect();

    // No limit: one call returns everything, across S3 pages.
    let page = fs.list("many/", None, 0).await.expect("list all");
    assert_eq!(page.next, None);
    let got: Vec<String> = page.objects.iter().map(|o| o.path.clone()).collect();
    assert_eq!(got, want);
    assert_eq!(page.objects[13].size, 13 % 7);

    // A limit above one S3 page, then paging on.
    let page = fs.list("many/", None, 1050).await.expect("list 1050");
    assert_eq!(page.objects.len(), 1050);
    let next = page.next.expect("more to come");
    let rest = fs.list("many/", Some(&next), 1050).await.expect("rest");
    assert_eq!(rest.next, None);
    let got: Vec<String> = page
        .objects
        .into_iter()
        .chain(rest.objects)
        .map(|o| o.path)
        .collect();
    assert_eq!(got, want);

    // Small pages, resuming from `next` each time.
    let mut got = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = fs
            .list("many/0000", after.as_deref(), 3)
            .await
            .expect("list");
        assert!(page.objects.len() <= 3);
        got.extend(page.objects.into_iter().map(|o| o.path));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(got, want[..10].to_vec());
}

/// An error names what failed; a missing bucket is not "object not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_bucket_and_unreachable_endpoint() {
    let Some(endpoint) = endpoint("missing_bucket_and_unreachable_endpoint") else {
        return;
    };
    let config = sdk_config(&endpoint).await;
    let fs = S3Filestore::from_sdk_config(&config, bucket_name(), None).expect("store");
    for err in [
        fs.get("a/b").await.expect_err("no bucket"),
        fs.put("a/b", b"x".to_vec(), PutCondition::Any)
            .await
            .expect_err("no bucket"),
        fs.list("", None, 10).await.expect_err("no bucket"),
    ] {
        assert!(
            matches!(&err, StoreError::Internal { context, .. } if context.contains("bucket does not exist")),
            "{err:?}"
        );
    }

    // Nothing listens on this port: Unavailable, after the SDK's retries, quickly.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let dead = sdk_config(&format!("http://127.0.0.1:{port}")).await;
    let fs = S3Filestore::from_sdk_config(&dead, "bucket", None).expect("store");
    // A generous deadline: it only catches a call that retries for good (how long the
    // retries take is printed, not bounded).
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(60), fs.get("a/b"))
        .await
        .expect("the SDK gives up")
        .expect_err("nothing listens");
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
    println!("Unavailable after {:?}", started.elapsed());
}

/// `from_config` (the standard credential chain) with an endpoint override uses
/// path-style addressing, which moto needs. Runs only when the environment has
/// credentials, so the chain never falls through to the instance metadata service.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn from_config_uses_path_style_with_an_endpoint() {
    let Some(endpoint) = endpoint("from_config_uses_path_style_with_an_endpoint") else {
        return;
    };
    if env("AWS_ACCESS_KEY_ID").is_none() {
        eprintln!(
            "note: from_config_uses_path_style_with_an_endpoint skipped: set \
             AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (any values work with moto)"
        );
        return;
    }
    let fs = S3Filestore::from_config(
        Some("us-east-1".into()),
        Some(endpoint.clone()),
        bucket_name(),
        Some("p".into()),
    )
    .await
    .expect("from_config");
    fs.create_bucket_if_missing().await.expect("create bucket");
    fs.create_bucket_if_missing().await.expect("idempotent");
    let etag = fs
        .put("x/y.json", b"{}".to_vec(), PutCondition::Absent)
        .await
        .expect("put");
    assert_eq!(fs.get("x/y.json").await.expect("get").etag, etag);

    // The same through the control-plane configuration's `filestore.config`.
    let config = wisp_config::S3Config {
        bucket: fs.bucket().to_string(),
        region: Some("us-east-1".into()),
        prefix: Some("p/".into()),
        endpoint: Some(endpoint),
        ..Default::default()
    };
    let same = S3Filestore::from_s3_config(&config)
        .await
        .expect("from_s3_config");
    assert_eq!(same.get("x/y.json").await.expect("get").etag, etag);
}

/// A presigned URL downloads the object without credentials, with the content type and
/// cache control it was stored and signed with (the console's files reach browsers this
/// way; S3 honours both, moto only the stored ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn presigned_urls_download_the_object() {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use wisp_store::{ObjectMeta, PresignedGet};

    let Some(fs) = store("presigned_urls_download_the_object", Some("wisp/")).await else {
        return;
    };
    let body = "console.log(\"Déploiement réussi ✓\");".as_bytes().to_vec();
    let meta = ObjectMeta {
        content_type: Some("text/javascript; charset=utf-8".into()),
        cache_control: Some("public, max-age=31536000, immutable".into()),
    };
    fs.put_with_meta(
        "console/assets/index.0123abcd9.js",
        body.clone(),
        PutCondition::Any,
        &meta,
    )
    .await
    .expect("put");
    let request = PresignedGet {
        signed_at: std::time::SystemTime::now() - Duration::from_secs(60),
        expires_in: Duration::from_secs(3600),
        content_type: meta.content_type.clone(),
        cache_control: meta.cache_control.clone(),
    };
    let url = fs
        .presigned_get("console/assets/index.0123abcd9.js", &request)
        .await
        .expect("presign")
        .expect("S3 has presigned URLs");
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert!(
        url.contains("/wisp/console/assets/"),
        "the key prefix: {url}"
    );

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let response = client
        .get(url.parse().expect("URL"))
        .await
        .expect("GET the presigned URL");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(
        response.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let got = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(got.as_ref(), body.as_slice());
}
