//! The steady poll path on DynamoDB, as the composition root wires it: with the
//! revocation list in place, a piped's poll (verify its credentials, ListUnhandledCommands)
//! is one indexed read (a Query) and no bcrypt; a revocation in this process applies to
//! the next poll. Counted by the datastore's own request counters.
//!
//! Needs DynamoDB Local (`WISP_TEST_DYNAMODB_ENDPOINT`); skipped with a note without it,
//! unless `WISP_REQUIRE_AWS_TESTS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use wisp_app::App;
use wisp_auth::PipedToken;
use wisp_config::Config;
use wisp_proto::model;
use wisp_proto::pipedservice::ListUnhandledCommandsRequest;
use wisp_services::piped::PipedApi;
use wisp_store::{MemoryCache, Stores};

fn endpoint() -> Option<String> {
    match std::env::var("WISP_TEST_DYNAMODB_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => Some(e.trim().to_string()),
        _ => {
            if std::env::var("WISP_REQUIRE_AWS_TESTS").as_deref() == Ok("1") {
                panic!("WISP_REQUIRE_AWS_TESTS=1 but WISP_TEST_DYNAMODB_ENDPOINT is not set");
            }
            eprintln!("note: skipping: WISP_TEST_DYNAMODB_ENDPOINT is not set");
            None
        }
    }
}

const POLLS: u64 = 50;

#[tokio::test]
async fn a_poll_is_one_query_and_no_bcrypt_and_revocation_is_immediate() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let table = format!(
        "wisp-poll-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let config = Config::from_yaml_str(
        &format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: DYNAMODB\n    config: {{table: {table}, region: us-east-1, endpoint: {endpoint}}}\n  filestore:\n    type: LOCAL\n    config: {{dir: {}}}\n",
            dir.path().join("files").display()
        ),
        "poll-path",
    )
    .unwrap();
    wisp_app::stores::init_aws(&config).await.unwrap();
    let wisp_config::DatastoreConfig::DynamoDb(ds_config) = &config.spec.datastore else {
        panic!("DynamoDB")
    };
    // The concrete datastore, for its counters; the services see it as any datastore.
    let datastore = Arc::new(
        wisp_store_aws::open::open_datastore(ds_config)
            .await
            .unwrap(),
    );
    let filestore = wisp_store_embedded::LocalFilestore::open(dir.path().join("files")).unwrap();
    let stores = Stores::new(
        datastore.clone(),
        Arc::new(filestore),
        Arc::new(MemoryCache::default()),
    );
    let app = App::from_parts(config, false, stores.clone(), None);
    stores
        .projects
        .create(model::Project {
            id: "p".into(),
            static_admin: Some(model::ProjectStaticUser {
                username: "admin".into(),
                password_hash: "unused".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    stores
        .pipeds
        .create(wisp_testkit::fixtures::piped_with_key(
            "p", "piped-1", "key-1",
        ))
        .await
        .unwrap();

    let verifier = app.piped_verifier();
    let api = PipedApi::new(stores.clone(), String::new());
    let token = PipedToken::new("p", "piped-1", "key-1");
    let poll = || async {
        let caller = verifier.verify(&token).await?;
        api.list_unhandled_commands(&caller, ListUnhandledCommandsRequest::default())
            .await
            .map_err(|e| wisp_auth::AuthError::Unavailable(e.to_string()))
    };
    poll().await.unwrap(); // the first verifies (bcrypt, GetItem) and caches

    let before = datastore.stats();
    let bcrypt_before = verifier.bcrypt_verifications();
    for _ in 0..POLLS {
        poll().await.unwrap();
    }
    let spent = datastore.stats().since(&before);
    eprintln!(
        "{POLLS} steady polls: {} requests ({} Query), {} read units; per piped-hour at one \
         poll per 5 s: {} read units",
        spent.total_requests(),
        spent.requests("Query"),
        spent.total_read_units(),
        spent.total_read_units() / POLLS as f64 * 720.0
    );
    assert_eq!(spent.total_requests(), POLLS, "{spent:?}");
    assert_eq!(spent.requests("Query"), POLLS, "{spent:?}");
    assert_eq!(verifier.bcrypt_verifications(), bcrypt_before, "no bcrypt");

    // Disabled here: the very next poll is refused.
    wisp_services::ops::pipeds::set_piped_disabled(&stores, "p", "piped-1", true)
        .await
        .unwrap();
    assert!(poll().await.is_err(), "a disabled piped is refused at once");
}
