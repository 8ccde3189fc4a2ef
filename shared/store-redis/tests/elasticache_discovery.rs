//! Finding the cache through the ElastiCache API, against moto_server's ElastiCache
//! (replication groups and users): a usable cache gives its endpoint, and each way a
//! cache can be unusable gives its one-line error. (moto makes every group `available`
//! and serves no serverless caches; those cases are unit tests in `src/elasticache.rs`.)
//!
//! Needs `WISP_TEST_MOTO_ENDPOINT` (see `scripts/moto.sh`). Unset: the tests print a note
//! and pass, unless `WISP_REQUIRE_AWS_TESTS=1`, when they fail.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aws_config::SdkConfig;
use aws_sdk_elasticache::Client;
use aws_sdk_elasticache::types::AuthenticationMode;
use wisp_store::conformance as cf;
use wisp_store_redis::elasticache::{AuthMode, DiscoveryError, Lookup, discover, sdk_config};

const MOTO_VAR: &str = "WISP_TEST_MOTO_ENDPOINT";
const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";

fn moto(test: &str) -> Option<String> {
    match std::env::var(MOTO_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
                panic!("{test}: {MOTO_VAR} is not set, but {REQUIRE_VAR}=1 requires this test");
            }
            eprintln!("note: {test} skipped: {MOTO_VAR} is not set");
            None
        }
    }
}

fn lookup(endpoint: &str, cache_id: &str, auth: AuthMode, username: Option<&str>) -> Lookup {
    Lookup {
        cache_id: cache_id.into(),
        serverless: false,
        auth,
        username: username.map(Into::into),
        region: Some("us-east-1".into()),
        endpoint: Some(endpoint.into()),
    }
}

/// ElastiCache ids: lower-case letters, digits and hyphens, at most 40 characters.
fn unique_id(tag: &str) -> String {
    let id = cf::unique(tag)
        .to_ascii_lowercase()
        .replace(['_', '.', ':'], "-");
    id.chars()
        .rev()
        .take(40)
        .collect::<String>()
        .chars()
        .rev()
        .collect::<String>()
        .trim_start_matches('-')
        .to_string()
}

async fn setup(endpoint: &str) -> (SdkConfig, Client) {
    let config = sdk_config(&lookup(endpoint, "x", AuthMode::None, None)).await;
    let client = Client::new(&config);
    (config, client)
}

async fn create_group(client: &Client, id: &str, tls: bool, token: bool, user_group: bool) {
    let mut create = client
        .create_replication_group()
        .replication_group_id(id)
        .replication_group_description("wisp test")
        .engine("valkey")
        .cache_node_type("cache.t4g.micro")
        .num_cache_clusters(1)
        .transit_encryption_enabled(tls);
    if token {
        create = create.auth_token("a-long-enough-auth-token-0123456789");
    }
    if user_group {
        create = create.user_group_ids("wisp-users");
    }
    create.send().await.expect("CreateReplicationGroup");
}

async fn create_user(client: &Client, id: &str, iam: bool) {
    let mut create = client
        .create_user()
        .user_id(id)
        .user_name(id)
        .engine("valkey")
        .access_string("on ~* +@all");
    create = if iam {
        create.authentication_mode(
            AuthenticationMode::builder()
                .r#type(aws_sdk_elasticache::types::InputAuthenticationType::Iam)
                .build(),
        )
    } else {
        create.passwords("a-long-enough-password-0123456789")
    };
    create.send().await.expect("CreateUser");
}

#[tokio::test]
async fn an_iam_cache_is_found_with_its_endpoint() {
    let Some(endpoint) = moto("an_iam_cache_is_found_with_its_endpoint") else {
        return;
    };
    let (config, client) = setup(&endpoint).await;
    let id = unique_id("wisp-iam");
    let user = unique_id("wisp-app");
    create_group(&client, &id, true, false, true).await;
    create_user(&client, &user, true).await;
    let started = std::time::Instant::now();
    let found = discover(&lookup(&endpoint, &id, AuthMode::Iam, Some(&user)), &config)
        .await
        .expect("usable");
    // A figure, not a bound: what the lookup adds to init here (loopback moto).
    eprintln!(
        "discovery (DescribeReplicationGroups + DescribeUsers): {:?}",
        started.elapsed()
    );
    assert_eq!(found.cache_id, id);
    assert!(found.tls && !found.serverless);
    assert_eq!(found.status, "available");
    assert_eq!(found.auth, format!("IAM user {user}"));
    assert_eq!(found.region, "us-east-1");
    assert!(
        found.url().starts_with(&format!("rediss://master.{id}."))
            && found.url().ends_with(":6379"),
        "{}",
        found.url()
    );
}

#[tokio::test]
async fn each_unusable_cache_is_a_one_line_error() {
    let Some(endpoint) = moto("each_unusable_cache_is_a_one_line_error") else {
        return;
    };
    let (config, client) = setup(&endpoint).await;
    let check = |err: DiscoveryError, wanted: &str| {
        let text = err.to_string();
        assert!(text.contains(wanted), "{text:?} lacks {wanted:?}");
        assert!(!text.contains('\n'), "{text:?}");
        err
    };

    // Missing.
    let missing = unique_id("wisp-none");
    let err = discover(
        &lookup(&endpoint, &missing, AuthMode::Iam, Some("u")),
        &config,
    )
    .await
    .expect_err("missing");
    let err = check(
        err,
        &format!("no ElastiCache replication group {missing} in us-east-1"),
    );
    assert!(matches!(err, DiscoveryError::NotFound { .. }));

    // TLS off.
    let plain = unique_id("wisp-plain");
    create_group(&client, &plain, false, false, false).await;
    let err = discover(&lookup(&endpoint, &plain, AuthMode::None, None), &config)
        .await
        .expect_err("tls off");
    check(err, "in-transit encryption off");

    // An AUTH-token cache, Wisp configured for IAM auth.
    let token = unique_id("wisp-token");
    create_group(&client, &token, true, true, false).await;
    let err = discover(
        &lookup(&endpoint, &token, AuthMode::Iam, Some("u")),
        &config,
    )
    .await
    .expect_err("token cache, IAM config");
    check(
        err,
        "uses an AUTH token, but Wisp is configured for IAM auth",
    );
    // ...and the same cache with the token configured is fine.
    let found = discover(&lookup(&endpoint, &token, AuthMode::Token, None), &config)
        .await
        .expect("token mode");
    assert_eq!(found.auth, "an AUTH token");

    // A user-group cache, but the user has password auth.
    let rbac = unique_id("wisp-rbac");
    let user = unique_id("wisp-pw");
    create_group(&client, &rbac, true, false, true).await;
    create_user(&client, &user, false).await;
    let err = discover(
        &lookup(&endpoint, &rbac, AuthMode::Iam, Some(&user)),
        &config,
    )
    .await
    .expect_err("password user");
    check(err, &format!("user {user} with password auth"));
    let err = discover(
        &lookup(&endpoint, &rbac, AuthMode::Iam, Some("nobody-here")),
        &config,
    )
    .await
    .expect_err("no user");
    check(err, "no ElastiCache user nobody-here");
    // A user-group cache, Wisp configured with no auth.
    let err = discover(&lookup(&endpoint, &rbac, AuthMode::None, None), &config)
        .await
        .expect_err("rbac cache, no auth");
    check(err, "set iamAuth: true");
}
