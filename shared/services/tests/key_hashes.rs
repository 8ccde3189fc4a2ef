//! Keys imported from upstream PipeCD are bcrypt-hashed; the first time one is used, its
//! stored hash becomes the fast one, so later checks (other instances, cold starts, a
//! flood of made-up keys) cost no bcrypt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use wisp_auth::{
    ApiKeyCredential, ApiKeyVerifier, GENERATED_KEY_HASH_PREFIX, PipedToken, PipedVerifier,
};
use wisp_proto::model;
use wisp_services::auth_source::StoreKeySource;
use wisp_testkit::{TempStores, fixtures};

#[tokio::test]
async fn upstream_bcrypt_keys_move_to_the_fast_hash_on_first_use() {
    let temp = TempStores::new();
    let stores = temp.stores.clone();
    stores
        .pipeds
        .create(fixtures::piped_with_key(
            "p",
            "piped-1",
            "upstream-piped-key",
        ))
        .await
        .unwrap();
    let api_key = "00000000-0000-4000-8000-000000000001.upstreamsecret";
    stores
        .api_keys
        .create(model::ApiKey {
            id: "00000000-0000-4000-8000-000000000001".into(),
            name: "ci".into(),
            key_hash: wisp_auth::hash_secret_with_cost(api_key, 4).unwrap(),
            project_id: "p".into(),
            creator: "upstream".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let source = StoreKeySource::new(stores.clone(), ["p".to_string()]);

    let pipeds = PipedVerifier::new(source.clone());
    let token = PipedToken::new("p", "piped-1", "upstream-piped-key");
    pipeds.verify(&token).await.unwrap();
    let stored = stores.pipeds.get_any("piped-1").await.unwrap();
    assert!(
        stored.keys[0].hash.starts_with(GENERATED_KEY_HASH_PREFIX),
        "{}",
        stored.keys[0].hash
    );
    // A fresh instance checks it without bcrypt; a wrong key is still refused.
    let fresh = PipedVerifier::new(source.clone());
    fresh.verify(&token).await.unwrap();
    assert_eq!(fresh.bcrypt_verifications(), 0);
    assert!(
        fresh
            .verify(&PipedToken::new("p", "piped-1", "wrong"))
            .await
            .is_err()
    );

    let keys = ApiKeyVerifier::new(source.clone());
    let credential: ApiKeyCredential = api_key.parse().unwrap();
    keys.verify(&credential).await.unwrap();
    let stored = stores
        .api_keys
        .get_any("00000000-0000-4000-8000-000000000001")
        .await
        .unwrap();
    assert!(stored.key_hash.starts_with(GENERATED_KEY_HASH_PREFIX));
    let fresh = ApiKeyVerifier::new(source);
    fresh.verify(&credential).await.unwrap();
    assert_eq!(fresh.bcrypt_verifications(), 0);
}
