//! Loading the configuration and the encryption key from Secrets Manager, against
//! moto_server.
//!
//! Needs `WISP_TEST_MOTO_ENDPOINT` (e.g. `http://127.0.0.1:5000`, see `scripts/moto.sh`).
//! Unset: the tests print a note and pass, unless `WISP_REQUIRE_AWS_TESTS=1`, when they
//! fail. Credentials and region come from the environment when set, else dummy ones and
//! `us-east-1`. Secret names are unique per run.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aws_config::{BehaviorVersion, Region};
use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::config::Credentials;
use aws_sdk_secretsmanager::primitives::Blob;
use wisp_config::FilestoreConfig;
use wisp_store::conformance::unique;
use wisp_store_aws::secrets::{
    SecretError, load_config_from_secret, load_encryption_key_from_secret, load_secret,
};

const ENDPOINT_VAR: &str = "WISP_TEST_MOTO_ENDPOINT";
const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A client on moto, or `None` (after a note) when these tests are off.
async fn client(test: &str) -> Option<Client> {
    let Some(endpoint) = env(ENDPOINT_VAR) else {
        let what = format!(
            "{ENDPOINT_VAR} is not set (start moto with `scripts/moto.sh start 5000` and \
             export {ENDPOINT_VAR}=http://127.0.0.1:5000)"
        );
        if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
            panic!("{test}: {what}, but {REQUIRE_VAR}=1 requires this test to run");
        }
        eprintln!("note: {test} skipped: {what}");
        return None;
    };
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
    Some(Client::new(&loader.load().await))
}

async fn create_string(client: &Client, name: &str, value: &str) {
    client
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .expect("create string secret");
}

async fn create_binary(client: &Client, name: &str, value: &[u8]) {
    client
        .create_secret()
        .name(name)
        .secret_binary(Blob::new(value))
        .send()
        .await
        .expect("create binary secret");
}

const CONFIG: &str = "\
apiVersion: pipecd.dev/v1beta1
kind: ControlPlane
spec:
  address: https://wisp.example.com
  filestore:
    type: S3
    config:
      bucket: wisp-objects
      region: us-east-1
      prefix: wisp/
  projects:
    - id: quickstart
      staticAdmin:
        username: hello-pipecd
        passwordHash: \"$2a$10$ye96mUqUqTnjUqgwQJbJzel/LJibRhUnmzyypACkvrTSnQpVFZ7qK\"
";

#[tokio::test]
async fn config_from_a_string_secret() {
    let Some(client) = client("config_from_a_string_secret").await else {
        return;
    };
    let name = format!("wisp/test/{}/config", unique("secrets"));
    create_string(&client, &name, CONFIG).await;
    let config = load_config_from_secret(&client, &name)
        .await
        .expect("load config");
    assert_eq!(config.source, format!("secret {name}"));
    assert_eq!(
        config.spec.address.as_deref(),
        Some("https://wisp.example.com")
    );
    let FilestoreConfig::S3(s3) = &config.spec.filestore else {
        panic!("expected an S3 filestore, got {:?}", config.spec.filestore);
    };
    assert_eq!(
        (s3.bucket.as_str(), s3.prefix.as_deref()),
        ("wisp-objects", Some("wisp/"))
    );
    assert!(config.spec.find_project("quickstart").is_some());
    // The same document from a binary secret loads the same.
    let binary = format!("{name}-binary");
    create_binary(&client, &binary, CONFIG.as_bytes()).await;
    let again = load_config_from_secret(&client, &binary)
        .await
        .expect("load binary config");
    assert_eq!(again.spec, config.spec);
}

#[tokio::test]
async fn encryption_key_from_binary_and_string_secrets() {
    let Some(client) = client("encryption_key_from_binary_and_string_secrets").await else {
        return;
    };
    let base = format!("wisp/test/{}", unique("secrets"));
    let raw: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
    create_binary(&client, &format!("{base}/key-binary"), &raw).await;
    let key = load_encryption_key_from_secret(&client, &format!("{base}/key-binary"))
        .await
        .expect("binary key");
    assert_eq!(key.bytes(), raw.as_slice());
    assert_eq!(key.aes_key().as_slice(), &raw[..32]);

    // Like the key file from `openssl rand 64 | base64`: used byte for byte.
    let text = "c2VjcmV0LWtleS1tYXRlcmlhbC1mb3Itd2lzcC10ZXN0cy0wMTIzNDU2Nzg5YWJjZGVm\n";
    create_string(&client, &format!("{base}/key-string"), text).await;
    let key = load_encryption_key_from_secret(&client, &format!("{base}/key-string"))
        .await
        .expect("string key");
    assert_eq!(key.bytes(), text.as_bytes());
    assert_eq!(
        load_secret(&client, &format!("{base}/key-string"))
            .await
            .expect("raw"),
        text.as_bytes()
    );
}

#[tokio::test]
async fn a_missing_secret_is_named() {
    let Some(client) = client("a_missing_secret_is_named").await else {
        return;
    };
    let name = format!("wisp/test/{}/nope", unique("secrets"));
    for err in [
        load_secret(&client, &name).await.expect_err("missing"),
        load_config_from_secret(&client, &name)
            .await
            .expect_err("missing"),
        load_encryption_key_from_secret(&client, &name)
            .await
            .map(|_| ())
            .expect_err("missing"),
    ] {
        assert!(
            matches!(&err, SecretError::NotFound { name: n } if *n == name),
            "{err:?}"
        );
        let shown = err.to_string();
        assert!(
            shown.contains(&name) && shown.contains("does not exist"),
            "{shown}"
        );
    }
}

#[tokio::test]
async fn bad_values_are_clear_errors_without_the_value() {
    let Some(client) = client("bad_values_are_clear_errors_without_the_value").await else {
        return;
    };
    let base = format!("wisp/test/{}", unique("secrets"));

    // A key too short for AES-256.
    let short = format!("{base}/short-key");
    create_string(&client, &short, "tiny-s3cret").await;
    let err = load_encryption_key_from_secret(&client, &short)
        .await
        .map(|_| ())
        .expect_err("short key");
    let shown = err.to_string();
    assert!(
        shown.contains(&short) && shown.contains("11 bytes") && !shown.contains("tiny-s3cret"),
        "{shown}"
    );

    // Not a control-plane configuration: the error says which secret.
    let wrong = format!("{base}/piped-config");
    create_string(
        &client,
        &wrong,
        "apiVersion: pipecd.dev/v1beta1\nkind: Piped\nspec: {}\n",
    )
    .await;
    let err = load_config_from_secret(&client, &wrong)
        .await
        .expect_err("wrong kind");
    assert!(matches!(err, SecretError::Invalid(_)), "{err:?}");
    let shown = err.to_string();
    assert!(shown.starts_with(&format!("secret {wrong}:")), "{shown}");

    // Unknown fields are refused, as from a file.
    let unknown = format!("{base}/unknown-field");
    create_string(
        &client,
        &unknown,
        "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  nonsense: 1\n",
    )
    .await;
    let err = load_config_from_secret(&client, &unknown)
        .await
        .expect_err("unknown field");
    assert!(err.to_string().contains("nonsense"), "{err}");

    // A binary value that is not text.
    let binary = format!("{base}/not-utf8");
    create_binary(&client, &binary, &[0xff, 0xfe, 0x00, 0x80]).await;
    let err = load_config_from_secret(&client, &binary)
        .await
        .expect_err("not UTF-8");
    assert!(
        matches!(&err, SecretError::NotUtf8 { name } if *name == binary),
        "{err:?}"
    );

    // Debug output of a loaded key shows no key material.
    let key_name = format!("{base}/key");
    create_string(&client, &key_name, &"k".repeat(48)).await;
    let key = load_encryption_key_from_secret(&client, &key_name)
        .await
        .expect("key");
    assert!(!format!("{key:?}").contains("kkkk"));
}
