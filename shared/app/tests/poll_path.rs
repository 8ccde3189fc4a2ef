//! The steady poll path on DynamoDB, as the composition root wires it: with the
//! revocation list in place, a piped's poll (verify its credentials, ListUnhandledCommands)
//! is one indexed read (a Query) and no bcrypt; a revocation in this process applies to
//! the next poll. Counted by the datastore's own request counters. And when the table
//! cannot be read, the credential check's error keeps the store's error (and the SDK's
//! code) as its source, for the log.
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
            .map_err(|e| wisp_auth::AuthError::from(wisp_auth::SourceError::caused_by("poll", e)))
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

/// A credential check whose table is missing is Unavailable (the client is told only
/// upstream's "Unable to verify credentials right now"), and its source chain walks to
/// the store's error, whose logged chain names DynamoDB's own error code.
#[tokio::test]
async fn a_failed_credential_lookup_keeps_the_stores_error_as_its_source() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A table nobody created.
    let config = Config::from_yaml_str(
        &format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: DYNAMODB\n    config: {{table: wisp-no-such-table, region: us-east-1, endpoint: {endpoint}}}\n  filestore:\n    type: LOCAL\n    config: {{dir: {}}}\n",
            dir.path().join("files").display()
        ),
        "missing-table",
    )
    .unwrap();
    // Not the store opener, which refuses a missing table up front: a table deleted
    // while the server runs.
    let datastore = wisp_store_aws::dynamodb::DynamoDbDatastore::from_config(
        Some("us-east-1".into()),
        Some(endpoint.clone()),
        "wisp-no-such-table",
    )
    .await;
    let stores = Stores::new(
        Arc::new(datastore),
        Arc::new(wisp_store_embedded::LocalFilestore::open(dir.path().join("files")).unwrap()),
        Arc::new(MemoryCache::default()),
    );
    let app = App::from_parts(config, false, stores, None);
    let err = app
        .piped_verifier()
        .verify(&PipedToken::new("p", "piped-1", "key-1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, wisp_auth::AuthError::Unavailable(_)),
        "{err:?}"
    );
    assert_eq!(
        err.client_message(),
        "Unable to verify credentials right now"
    );
    let mut store_error = None;
    let mut next = std::error::Error::source(&err);
    while let Some(cause) = next {
        if let Some(found) = cause.downcast_ref::<wisp_store::StoreError>() {
            store_error = Some(found);
        }
        next = cause.source();
    }
    let store_error =
        store_error.unwrap_or_else(|| panic!("no store error in the chain of {err:?}"));
    let logged = wisp_store::error::chain(&err).to_string();
    assert!(logged.contains("ResourceNotFoundException"), "{logged}");
    assert!(
        wisp_store::error::chain(store_error)
            .to_string()
            .contains("ResourceNotFoundException"),
        "{store_error:?}"
    );
}
