//! Verifier behaviour against fake sources that count their calls (mirrors upstream's
//! pipedverifier TestVerify, plus caching, expiry and rotation).
//!
//! The tests of TTLs run on tokio's paused clock (`start_paused`; the caches read
//! tokio's `Instant`): a sleep past a TTL moves the clock on at once, and nothing expires
//! between two calls however slow the machine. bcrypt runs on blocking threads, during
//! which the paused clock does not move.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use wisp_auth::keys::MIN_COST;
use wisp_auth::{
    ApiKeyAuthInfo, ApiKeyAuthSource, ApiKeyCaller, ApiKeyCredential, ApiKeyVerifier, AuthError,
    CachePolicy, HashPolicy, PipedAuthInfo, PipedCaller, PipedKeySource, PipedToken, PipedVerifier,
    Reason, SourceError, generate_api_key, generate_piped_key, hash_secret_with_cost,
};

fn hash(secret: &str) -> String {
    hash_secret_with_cost(secret, MIN_COST).expect("hash")
}

#[derive(Default)]
struct FakePipeds {
    projects: Mutex<HashSet<String>>,
    pipeds: Mutex<HashMap<String, PipedAuthInfo>>,
    project_calls: AtomicUsize,
    piped_calls: AtomicUsize,
    down: AtomicBool,
}

impl FakePipeds {
    fn add_project(&self, id: &str) {
        self.projects.lock().expect("lock").insert(id.to_owned());
    }

    fn put_piped(&self, id: &str, project_id: &str, keys: &[&str], disabled: bool) {
        let info = PipedAuthInfo {
            project_id: project_id.to_owned(),
            disabled,
            key_hashes: keys.iter().map(|k| hash(k)).collect(),
        };
        self.pipeds
            .lock()
            .expect("lock")
            .insert(id.to_owned(), info);
    }

    fn update_piped(&self, id: &str, f: impl FnOnce(&mut PipedAuthInfo)) {
        let mut pipeds = self.pipeds.lock().expect("lock");
        f(pipeds.get_mut(id).expect("piped exists"));
    }

    /// (project calls, piped calls)
    fn calls(&self) -> (usize, usize) {
        (
            self.project_calls.load(Ordering::SeqCst),
            self.piped_calls.load(Ordering::SeqCst),
        )
    }
}

#[async_trait]
impl PipedKeySource for FakePipeds {
    async fn project_exists(&self, project_id: &str) -> Result<bool, SourceError> {
        self.project_calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(SourceError::new("datastore is down"));
        }
        Ok(self.projects.lock().expect("lock").contains(project_id))
    }

    async fn piped(&self, piped_id: &str) -> Result<Option<PipedAuthInfo>, SourceError> {
        self.piped_calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(SourceError::new("datastore is down"));
        }
        Ok(self.pipeds.lock().expect("lock").get(piped_id).cloned())
    }
}

/// Upstream's fixture: project-0 and project-1 exist; piped-1-2 claims a project that
/// does not own it; piped-1-3 is disabled.
fn fixture() -> Arc<FakePipeds> {
    let src = Arc::new(FakePipeds::default());
    src.add_project("project-0");
    src.add_project("project-1");
    src.put_piped("piped-0-1", "project-0", &["piped-key-0-1"], false);
    src.put_piped("piped-1-1", "project-1", &["piped-key-1-1"], false);
    src.put_piped(
        "piped-1-2",
        "project-non-existence",
        &["piped-key-1-2"],
        false,
    );
    src.put_piped("piped-1-3", "project-1", &["piped-key-1-3"], true);
    src
}

fn token(project: &str, piped: &str, key: &str) -> PipedToken {
    PipedToken::new(project, piped, key)
}

fn reason(result: Result<PipedCaller, AuthError>) -> Reason {
    match result {
        Err(AuthError::Unauthenticated(reason)) => reason,
        other => panic!("expected Unauthenticated, got {other:?}"),
    }
}

fn caller(project: &str, piped: &str) -> PipedCaller {
    PipedCaller {
        project_id: project.to_owned(),
        piped_id: piped.to_owned(),
    }
}

#[tokio::test]
async fn success_then_served_from_cache() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let t = token("project-1", "piped-1-1", "piped-key-1-1");

    assert_eq!(v.verify(&t).await, Ok(caller("project-1", "piped-1-1")));
    assert_eq!(v.bcrypt_verifications(), 1);
    assert_eq!(src.calls(), (1, 1));

    // Steady-state polling: no bcrypt, no source call.
    for _ in 0..1000 {
        assert_eq!(v.verify(&t).await, Ok(caller("project-1", "piped-1-1")));
    }
    assert_eq!(v.bcrypt_verifications(), 1);
    assert_eq!(src.calls(), (1, 1));
}

#[tokio::test]
async fn unknown_project() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let r = reason(
        v.verify(&token("project-not-found", "piped-1-1", "piped-key-1-1"))
            .await,
    );
    assert_eq!(
        r.to_string(),
        "project project-not-found for piped piped-1-1 was not found"
    );
    assert_eq!(src.calls(), (1, 0));
    assert_eq!(v.bcrypt_verifications(), 0);
}

#[tokio::test]
async fn unknown_piped() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let r = reason(v.verify(&token("project-1", "nope", "k")).await);
    assert_eq!(
        r,
        Reason::PipedNotFound {
            piped_id: "nope".into()
        }
    );
    assert_eq!(v.bcrypt_verifications(), 0);
}

#[tokio::test]
async fn piped_of_another_project() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let r = reason(
        v.verify(&token("project-1", "piped-1-2", "piped-key-1-2"))
            .await,
    );
    assert_eq!(
        r.to_string(),
        "the project of piped piped-1-2 is not matched, expected=project-1, got=project-non-existence"
    );
    // A piped of project-0 presented under project-1 (which exists) is refused too.
    let r = reason(
        v.verify(&token("project-1", "piped-0-1", "piped-key-0-1"))
            .await,
    );
    assert!(matches!(r, Reason::PipedProjectMismatch { .. }), "{r:?}");
    assert_eq!(v.bcrypt_verifications(), 0);
}

#[tokio::test]
async fn disabled_piped_then_enabled() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let t = token("project-1", "piped-1-3", "piped-key-1-3");
    let r = reason(v.verify(&t).await);
    assert_eq!(r.to_string(), "piped piped-1-3 was already disabled");
    assert_eq!(v.bcrypt_verifications(), 0);

    // Not negative-cached: re-enabling takes effect at once.
    src.update_piped("piped-1-3", |p| p.disabled = false);
    assert_eq!(v.verify(&t).await, Ok(caller("project-1", "piped-1-3")));
    assert_eq!(src.calls(), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn wrong_key_is_rejected_and_briefly_negative_cached() {
    let src = fixture();
    let v = PipedVerifier::with_policy(
        src.clone(),
        CachePolicy::default().rejected_ttl(Duration::from_millis(150)),
    );
    let wrong = token("project-1", "piped-1-1", "piped-key-1-1-wrong");
    let r = reason(v.verify(&wrong).await);
    assert_eq!(r.to_string(), "the key of piped piped-1-1 is not matched");
    assert_eq!(v.bcrypt_verifications(), 1);
    assert_eq!(src.calls(), (1, 1));

    // Same wrong key again: no bcrypt, no source call.
    for _ in 0..10 {
        assert_eq!(reason(v.verify(&wrong).await), r);
    }
    assert_eq!(v.bcrypt_verifications(), 1);
    assert_eq!(src.calls(), (1, 1));

    // The right key is not affected by the negative entry.
    let right = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify(&right).await.is_ok());
    assert_eq!(v.bcrypt_verifications(), 2);

    // After the negative TTL the wrong key is checked again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(reason(v.verify(&wrong).await), r);
    assert_eq!(v.bcrypt_verifications(), 3);
}

#[tokio::test]
async fn piped_without_keys_is_rejected() {
    let src = fixture();
    src.put_piped("bare", "project-1", &[], false);
    let v = PipedVerifier::new(src.clone());
    let r = reason(v.verify(&token("project-1", "bare", "anything")).await);
    assert!(matches!(r, Reason::PipedKeyMismatch { .. }), "{r:?}");
}

#[tokio::test]
async fn malformed_stored_hash_is_no_match() {
    let src = fixture();
    src.update_piped("piped-1-1", |p| p.key_hashes = vec!["redacted".into()]);
    let v = PipedVerifier::new(src.clone());
    let r = reason(
        v.verify(&token("project-1", "piped-1-1", "piped-key-1-1"))
            .await,
    );
    assert!(matches!(r, Reason::PipedKeyMismatch { .. }), "{r:?}");
}

#[tokio::test]
async fn second_key_is_accepted() {
    let src = fixture();
    // Newest first, as upstream's AddKey does.
    src.put_piped("two", "project-1", &["new-key", "old-key"], false);
    let v = PipedVerifier::new(src.clone());
    assert!(
        v.verify(&token("project-1", "two", "new-key"))
            .await
            .is_ok()
    );
    assert_eq!(v.bcrypt_verifications(), 1);
    assert!(
        v.verify(&token("project-1", "two", "old-key"))
            .await
            .is_ok()
    );
    // The old key is the second hash: two comparisons.
    assert_eq!(v.bcrypt_verifications(), 3);
    // Both cached.
    assert!(
        v.verify(&token("project-1", "two", "new-key"))
            .await
            .is_ok()
    );
    assert!(
        v.verify(&token("project-1", "two", "old-key"))
            .await
            .is_ok()
    );
    assert_eq!(v.bcrypt_verifications(), 3);
}

#[tokio::test(start_paused = true)]
async fn cache_expiry_re_verifies() {
    let src = fixture();
    let v = PipedVerifier::with_policy(
        src.clone(),
        CachePolicy::default().verified_ttl(Duration::from_millis(100)),
    );
    let t = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify(&t).await.is_ok());
    assert!(v.verify(&t).await.is_ok());
    assert_eq!((v.bcrypt_verifications(), src.calls()), (1, (1, 1)));

    // The store is read again (a disabled piped or a removed key shows there); the key
    // matched that stored hash before, so no second bcrypt.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(v.verify(&t).await.is_ok());
    assert_eq!((v.bcrypt_verifications(), src.calls()), (1, (2, 2)));

    // The key removed from the store: the remembered match no longer counts.
    src.update_piped("piped-1-1", |p| p.key_hashes = vec![hash("another key")]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(
        reason(v.verify(&t).await),
        Reason::PipedKeyMismatch { .. }
    ));
    assert_eq!(v.bcrypt_verifications(), 2);
}

#[tokio::test(start_paused = true)]
async fn disabling_takes_effect_within_the_ttl() {
    let src = fixture();
    let v = PipedVerifier::with_policy(
        src.clone(),
        CachePolicy::default().verified_ttl(Duration::from_millis(100)),
    );
    let t = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify(&t).await.is_ok());
    src.update_piped("piped-1-1", |p| p.disabled = true);
    // Still trusted from the cache...
    assert!(v.verify(&t).await.is_ok());
    // ...but not after the TTL.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(
        reason(v.verify(&t).await),
        Reason::PipedDisabled { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn key_rotation() {
    let src = fixture();
    let v = PipedVerifier::with_policy(
        src.clone(),
        CachePolicy::default().verified_ttl(Duration::from_millis(100)),
    );
    let old_key = generate_piped_key();
    let new_key = generate_piped_key();
    src.put_piped("rot", "project-1", &[&old_key], false);
    let old = token("project-1", "rot", &old_key);
    let new = token("project-1", "rot", &new_key);

    assert!(v.verify(&old).await.is_ok());
    // Before the new key is added it is refused (and negative-cached).
    assert!(matches!(
        reason(v.verify(&new).await),
        Reason::PipedKeyMismatch { .. }
    ));

    // Add the new key (newest first). It was negative-cached just above: the instance that
    // changes the keys forgets the piped's entries (others wait out the short
    // REJECTED_TTL, see the next test).
    let new_hash = hash(&new_key);
    src.update_piped("rot", |p| p.key_hashes.insert(0, new_hash));
    v.forget_piped("rot");
    assert!(v.verify(&new).await.is_ok());
    assert!(v.verify(&old).await.is_ok());

    // Delete the old key: the old key stays cached until the TTL, then is refused.
    src.update_piped("rot", |p| p.key_hashes.truncate(1));
    assert!(v.verify(&old).await.is_ok());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(
        reason(v.verify(&old).await),
        Reason::PipedKeyMismatch { .. }
    ));
    assert!(v.verify(&new).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn new_key_on_another_instance_is_accepted_after_rejected_ttl() {
    // An instance that saw a key fail (e.g. it raced the write) accepts it once the short
    // negative TTL has passed, without any explicit invalidation.
    let src = fixture();
    let v = PipedVerifier::with_policy(
        src.clone(),
        CachePolicy::default().rejected_ttl(Duration::from_millis(100)),
    );
    let t = token("project-1", "piped-1-1", "fresh-key");
    assert!(v.verify(&t).await.is_err());
    let h = hash("fresh-key");
    src.update_piped("piped-1-1", |p| p.key_hashes.insert(0, h));
    assert!(v.verify(&t).await.is_err());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(v.verify(&t).await.is_ok());
}

#[tokio::test]
async fn forget_piped_revokes_immediately() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let t = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify(&t).await.is_ok());
    src.update_piped("piped-1-1", |p| p.disabled = true);
    assert!(v.verify(&t).await.is_ok());
    v.forget_piped("piped-1-1");
    assert!(matches!(
        reason(v.verify(&t).await),
        Reason::PipedDisabled { .. }
    ));
}

#[tokio::test]
async fn source_errors_are_unavailable_and_not_cached() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    let t = token("project-1", "piped-1-1", "piped-key-1-1");
    src.down.store(true, Ordering::SeqCst);
    assert_eq!(
        v.verify(&t).await,
        Err(AuthError::Unavailable(SourceError::new(
            "datastore is down"
        )))
    );
    src.down.store(false, Ordering::SeqCst);
    assert!(v.verify(&t).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn cache_is_bounded() {
    let src = fixture();
    for i in 0..3 {
        src.put_piped(&format!("p{i}"), "project-1", &[&format!("k{i}")], false);
    }
    let v = PipedVerifier::with_policy(src.clone(), CachePolicy::default().capacity(2));
    for i in 0..3 {
        let t = token("project-1", &format!("p{i}"), &format!("k{i}"));
        assert!(v.verify(&t).await.is_ok());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(v.bcrypt_verifications(), 3);
    // p0 was evicted; p2 is still cached.
    let reads = src.calls().1;
    assert!(v.verify(&token("project-1", "p2", "k2")).await.is_ok());
    assert_eq!(src.calls().1, reads);
    // p0 is read from the store again (its key still matches a remembered hash).
    assert!(v.verify(&token("project-1", "p0", "k0")).await.is_ok());
    assert_eq!(src.calls().1, reads + 1);
    assert_eq!(v.bcrypt_verifications(), 3);
}

/// A piped id is no secret: a flood of made-up keys for it costs at most
/// `failures_per_id` bcrypts per window, and the real piped keeps working.
#[tokio::test(start_paused = true)]
async fn a_flood_of_wrong_keys_for_one_id_is_bounded() {
    let src = fixture();
    let policy = CachePolicy::default()
        .verified_ttl(Duration::from_millis(50))
        .hashing(HashPolicy {
            failures_per_id: 3,
            ..HashPolicy::default()
        });
    let v = PipedVerifier::with_policy(src.clone(), policy);
    let real = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify(&real).await.is_ok());
    assert_eq!(v.bcrypt_verifications(), 1);

    let mut refused_unchecked = 0;
    for i in 0..50 {
        match reason(
            v.verify(&token("project-1", "piped-1-1", &format!("guess-{i}")))
                .await,
        ) {
            Reason::PipedKeyMismatch { .. } => {}
            Reason::TooManyFailures { id } => {
                assert_eq!(id, "piped-1-1");
                refused_unchecked += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(v.bcrypt_verifications(), 1 + 3);
    assert_eq!(refused_unchecked, 47);

    // The real piped, re-verified after its cache entry expired, mid-flood: no bcrypt.
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(v.verify(&real).await.is_ok());
    assert_eq!(v.bcrypt_verifications(), 4);
    // Another piped is not affected by the flood on this one.
    assert!(
        v.verify(&token("project-0", "piped-0-1", "piped-key-0-1"))
            .await
            .is_ok()
    );
    assert_eq!(v.bcrypt_verifications(), 5);
}

/// An imported bcrypt key that has not been checked yet cannot be locked out by a
/// stranger who knows the piped id: failures are counted per source, so the flood from
/// one address spends that address's budget, and the real key from the piped's address
/// is still checked (issue 33).
#[tokio::test]
async fn a_flood_from_elsewhere_does_not_lock_out_the_real_key() {
    let src = fixture();
    let policy = CachePolicy::default().hashing(HashPolicy {
        failures_per_id: 3,
        ..HashPolicy::default()
    });
    let v = PipedVerifier::with_policy(src.clone(), policy);
    let stranger = Some("203.0.113.7".parse().unwrap());
    let piped_host = Some("198.51.100.2".parse().unwrap());
    for i in 0..20 {
        let _ = v
            .verify_from(
                &token("project-1", "piped-1-1", &format!("guess-{i}")),
                stranger,
            )
            .await;
    }
    assert_eq!(v.bcrypt_verifications(), 3);
    // The stranger is refused unchecked from then on.
    assert!(matches!(
        reason(
            v.verify_from(&token("project-1", "piped-1-1", "guess-x"), stranger)
                .await
        ),
        Reason::TooManyFailures { .. }
    ));
    // The real key, first seen now, from the piped's own address: checked and accepted.
    let real = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify_from(&real, piped_host).await.is_ok());
    assert_eq!(v.bcrypt_verifications(), 4);
}

/// A piped's first calls arriving together share one bcrypt.
#[tokio::test]
async fn concurrent_first_calls_share_one_check() {
    let src = fixture();
    let v = Arc::new(PipedVerifier::new(src.clone()));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let v = v.clone();
        calls.spawn(async move {
            v.verify(&token("project-1", "piped-1-1", "piped-key-1-1"))
                .await
        });
    }
    while let Some(result) = calls.join_next().await {
        assert_eq!(result.unwrap().unwrap(), caller("project-1", "piped-1-1"));
    }
    assert_eq!(v.bcrypt_verifications(), 1);
}

/// Past the slots and the waiting line, a caller is turned away at once (UNAVAILABLE,
/// which pipeds retry) instead of queueing without bound.
#[tokio::test]
async fn saturated_checks_are_shed() {
    let src = fixture();
    for i in 0..16 {
        src.put_piped(&format!("p{i}"), "project-1", &[&format!("k{i}")], false);
        // At the production cost, so that each check holds its slot for tens of
        // milliseconds while the others arrive.
        let slow = wisp_auth::hash_secret(&format!("k{i}")).unwrap();
        src.update_piped(&format!("p{i}"), |p| p.key_hashes = vec![slow]);
    }
    let policy = CachePolicy::default().hashing(HashPolicy {
        slots: 1,
        max_waiting: 2,
        ..HashPolicy::default()
    });
    let v = Arc::new(PipedVerifier::with_policy(src.clone(), policy));
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..16 {
        let v = v.clone();
        calls.spawn(async move {
            v.verify(&token("project-1", &format!("p{i}"), &format!("k{i}")))
                .await
        });
    }
    let (mut ok, mut shed) = (0, 0);
    while let Some(result) = calls.join_next().await {
        match result.unwrap() {
            Ok(_) => ok += 1,
            Err(AuthError::Unavailable(_)) => shed += 1,
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(ok + shed, 16);
    assert!(ok >= 1 && shed >= 1, "ok {ok}, shed {shed}");
    // Those turned away get in on a later try.
    for i in 0..16 {
        assert!(
            v.verify(&token("project-1", &format!("p{i}"), &format!("k{i}")))
                .await
                .is_ok()
        );
    }
}

/// Stored hashes that take a while to check (bcrypt at cost 12, a few hundred
/// milliseconds), so that a test can leave while one is being checked or waited for.
fn slow_pipeds(src: &FakePipeds, n: usize) {
    for i in 0..n {
        src.put_piped(&format!("p{i}"), "project-1", &[&format!("k{i}")], false);
        let slow = hash_secret_with_cost(&format!("k{i}"), 12).unwrap();
        src.update_piped(&format!("p{i}"), |p| p.key_hashes = vec![slow]);
    }
}

/// Polls `future` once, as a caller does before it gives up (its deadline passes, its
/// connection closes): whether it finished then.
fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    std::future::Future::poll(std::pin::Pin::new(future), &mut cx).is_ready()
}

/// A caller that goes away (its deadline passed, its connection closed) while waiting for
/// a check costs nothing: the check it was waiting for never starts.
///
/// No clock decides the outcome: the departed caller's check, had it been kept, would
/// queue for the only slot before a third caller's, and the slot is handed out in turn;
/// so once the third caller is answered, every check that was going to run has run.
/// (Checked by making `HashGuard::check` run its turn in a spawned task, so that
/// dropping the caller no longer cancels it: this test then fails with 3 checks.)
#[tokio::test]
async fn a_caller_that_has_gone_starts_no_check() {
    // The first check must still hold the slot when the second caller arrives and goes;
    // it takes a few hundred milliseconds, the second caller's visit microseconds. A
    // machine that stalls in between tries again with a fresh verifier.
    for attempt in 1..=5 {
        let src = fixture();
        slow_pipeds(&src, 3);
        let policy = CachePolicy::default().hashing(HashPolicy {
            slots: 1,
            ..HashPolicy::default()
        });
        let v = PipedVerifier::with_policy(src.clone(), policy);
        // p0's check takes the only slot (the first poll runs up to the CPU work).
        let (t0, t1) = (
            token("project-1", "p0", "k0"),
            token("project-1", "p1", "k1"),
        );
        let mut holder = Box::pin(v.verify(&t0));
        assert!(!poll_once(&mut holder), "p0's check is under way");
        // p1's caller arrives, waits for the slot, and goes away.
        let mut gone = Box::pin(v.verify(&t1));
        assert!(!poll_once(&mut gone), "p1's check waits for the slot");
        drop(gone);
        if v.bcrypt_verifications() != 0 {
            // p0's check ended before p1's caller came: nothing was tested.
            println!("attempt {attempt}: p0's check ended too early, again");
            continue;
        }
        assert!(holder.await.is_ok());
        // p2 queues for the slot after anything p1 left behind.
        assert!(v.verify(&token("project-1", "p2", "k2")).await.is_ok());
        assert_eq!(
            v.bcrypt_verifications(),
            2,
            "p0 and p2 checked; p1 must not be checked for nobody"
        );
        // p1 itself, calling again, is checked as usual.
        assert!(v.verify(&token("project-1", "p1", "k1")).await.is_ok());
        assert_eq!(v.bcrypt_verifications(), 3);
        return;
    }
    panic!("p0's check never outlasted p1's visit");
}

/// A check that has started when its caller goes away finishes and is kept: the
/// caller's retry is answered from it instead of paying for the check again.
#[tokio::test]
async fn a_check_whose_caller_left_serves_the_retry() {
    let src = fixture();
    slow_pipeds(&src, 1);
    let v = PipedVerifier::new(src.clone());
    let t0 = token("project-1", "p0", "k0");
    let mut gone = Box::pin(v.verify(&t0));
    assert!(!poll_once(&mut gone), "the check should be under way");
    drop(gone);
    // The check runs to its end and is counted and kept, though nobody waits for it.
    let finished = async {
        while v.bcrypt_verifications() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), finished)
        .await
        .expect("the started check finishes");
    assert!(v.verify(&token("project-1", "p0", "k0")).await.is_ok());
    assert_eq!(v.bcrypt_verifications(), 1);
}

/// Made-up piped ids cost one store read per id per `rejected_ttl`, not one per call.
#[tokio::test]
async fn unknown_ids_are_remembered() {
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    for _ in 0..5 {
        assert!(matches!(
            reason(v.verify(&token("project-1", "made-up", "k")).await),
            Reason::PipedNotFound { .. }
        ));
    }
    assert_eq!(src.calls().1, 1);
}

#[tokio::test]
async fn disabled_cache_always_verifies() {
    let src = fixture();
    let v = PipedVerifier::with_policy(src.clone(), CachePolicy::disabled());
    let t = token("project-1", "piped-1-1", "piped-key-1-1");
    for _ in 0..3 {
        assert!(v.verify(&t).await.is_ok());
    }
    assert_eq!(v.bcrypt_verifications(), 3);
    assert_eq!(src.calls(), (3, 3));
}

#[tokio::test]
async fn upstream_sequence() {
    // upstream pipedverifier TestVerify, step by step (our source owns config projects).
    let src = fixture();
    let v = PipedVerifier::new(src.clone());
    assert!(
        v.verify(&token("project-0", "piped-0-1", "piped-key-0-1"))
            .await
            .is_ok()
    );
    assert!(
        v.verify(&token("project-not-found", "piped-1-1", "piped-key-1-1"))
            .await
            .is_err()
    );
    assert!(
        v.verify(&token("project-1", "piped-1-2", "piped-key-1-2"))
            .await
            .is_err()
    );
    let t13 = token("project-1", "piped-1-3", "piped-key-1-3");
    assert!(v.verify(&t13).await.is_err());
    src.update_piped("piped-1-3", |p| p.disabled = false);
    assert!(v.verify(&t13).await.is_ok());
    assert!(
        v.verify(&token("project-1", "piped-1-1", "piped-key-1-1"))
            .await
            .is_ok()
    );
    let wrong = token("project-1", "piped-1-1", "piped-key-1-1-wrong");
    assert!(v.verify(&wrong).await.is_err());
    let calls = src.calls();
    assert!(v.verify(&wrong).await.is_err());
    assert_eq!(src.calls(), calls, "invalid key is cached");
    let h = hash("piped-key-1-1-new");
    src.update_piped("piped-1-1", |p| p.key_hashes.push(h));
    assert!(
        v.verify(&token("project-1", "piped-1-1", "piped-key-1-1-new"))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn shared_across_tasks() {
    let src = fixture();
    let v = Arc::new(PipedVerifier::new(src.clone()));
    let t = token("project-1", "piped-1-1", "piped-key-1-1");
    assert!(v.verify(&t).await.is_ok());
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (v, t) = (v.clone(), t.clone());
        tasks.push(tokio::spawn(async move { v.verify(&t).await }));
    }
    for task in tasks {
        assert!(task.await.expect("join").is_ok());
    }
    assert_eq!(v.bcrypt_verifications(), 1);
}

#[test]
fn debug_output_has_no_secrets() {
    let info = PipedAuthInfo {
        project_id: "p".into(),
        disabled: false,
        key_hashes: vec!["$2a$04$secrethashsecrethash".into()],
    };
    let out = format!("{info:?}");
    assert!(!out.contains("secrethash"), "{out}");
    let api = ApiKeyAuthInfo {
        id: "id".into(),
        name: "n".into(),
        project_id: "p".into(),
        role: 0,
        disabled: false,
        key_hash: "$2a$04$secrethashsecrethash".into(),
    };
    let out = format!("{api:?}");
    assert!(!out.contains("secrethash"), "{out}");
}

// ---------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct FakeApiKeys {
    keys: Mutex<HashMap<String, ApiKeyAuthInfo>>,
    calls: AtomicUsize,
    down: AtomicBool,
}

impl FakeApiKeys {
    /// Registers a fresh key and returns its credential.
    fn register(&self, name: &str, role: i32) -> ApiKeyCredential {
        let (id, key) = generate_api_key();
        let info = ApiKeyAuthInfo {
            id: id.clone(),
            name: name.to_owned(),
            project_id: "project-1".to_owned(),
            role,
            disabled: false,
            key_hash: hash(&key),
        };
        self.keys.lock().expect("lock").insert(id, info);
        key.parse().expect("generated key parses")
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut ApiKeyAuthInfo)) {
        let mut keys = self.keys.lock().expect("lock");
        f(keys.get_mut(id).expect("key exists"));
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ApiKeyAuthSource for FakeApiKeys {
    async fn api_key(&self, id: &str) -> Result<Option<ApiKeyAuthInfo>, SourceError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(SourceError::new("datastore is down"));
        }
        Ok(self.keys.lock().expect("lock").get(id).cloned())
    }
}

fn api_reason(result: Result<ApiKeyCaller, AuthError>) -> Reason {
    match result {
        Err(AuthError::Unauthenticated(reason)) => reason,
        other => panic!("expected Unauthenticated, got {other:?}"),
    }
}

#[tokio::test]
async fn api_key_success_then_cached() {
    let src = Arc::new(FakeApiKeys::default());
    let cred = src.register("ci", 1);
    let v = ApiKeyVerifier::new(src.clone());
    let expected = ApiKeyCaller {
        id: cred.id.clone(),
        name: "ci".into(),
        project_id: "project-1".into(),
        role: 1,
    };
    assert_eq!(v.verify(&cred).await, Ok(expected.clone()));
    for _ in 0..100 {
        assert_eq!(v.verify(&cred).await, Ok(expected.clone()));
    }
    assert_eq!(v.bcrypt_verifications(), 1);
    assert_eq!(src.calls(), 1);
}

#[tokio::test]
async fn api_key_unknown_disabled_wrong() {
    let src = Arc::new(FakeApiKeys::default());
    let cred = src.register("ci", 0);
    let v = ApiKeyVerifier::new(src.clone());

    let unknown: ApiKeyCredential = "nope.secret".parse().expect("parses");
    assert_eq!(
        api_reason(v.verify(&unknown).await),
        Reason::ApiKeyNotFound { id: "nope".into() }
    );

    let wrong: ApiKeyCredential = format!("{}.wrongsecret", cred.id).parse().expect("parses");
    let r = api_reason(v.verify(&wrong).await);
    assert_eq!(
        r,
        Reason::ApiKeyMismatch {
            id: cred.id.clone()
        }
    );
    assert_eq!(v.bcrypt_verifications(), 1);
    let calls = src.calls();
    assert_eq!(api_reason(v.verify(&wrong).await), r);
    assert_eq!((v.bcrypt_verifications(), src.calls()), (1, calls));

    src.update(&cred.id, |k| k.disabled = true);
    assert_eq!(
        api_reason(v.verify(&cred).await),
        Reason::ApiKeyDisabled {
            id: cred.id.clone()
        }
    );
    assert_eq!(v.bcrypt_verifications(), 1);
}

#[tokio::test(start_paused = true)]
async fn api_key_disable_within_ttl_and_forget() {
    let src = Arc::new(FakeApiKeys::default());
    let cred = src.register("ci", 1);
    let v = ApiKeyVerifier::with_policy(
        src.clone(),
        CachePolicy::default().verified_ttl(Duration::from_millis(100)),
    );
    assert!(v.verify(&cred).await.is_ok());
    src.update(&cred.id, |k| k.disabled = true);
    assert!(v.verify(&cred).await.is_ok());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(v.verify(&cred).await.is_err());

    src.update(&cred.id, |k| k.disabled = false);
    assert!(v.verify(&cred).await.is_ok());
    src.update(&cred.id, |k| k.disabled = true);
    v.forget_api_key(&cred.id);
    assert!(v.verify(&cred).await.is_err());
}

#[tokio::test]
async fn api_key_source_down_is_unavailable_and_needs_no_cache_write() {
    let src = Arc::new(FakeApiKeys::default());
    let cred = src.register("ci", 1);
    let v = ApiKeyVerifier::new(src.clone());
    src.down.store(true, Ordering::SeqCst);
    assert!(matches!(
        v.verify(&cred).await,
        Err(AuthError::Unavailable(_))
    ));
    src.down.store(false, Ordering::SeqCst);
    assert!(v.verify(&cred).await.is_ok());
    // Once verified, the source being down does not matter until the TTL.
    src.down.store(true, Ordering::SeqCst);
    assert!(v.verify(&cred).await.is_ok());
}

#[tokio::test]
async fn api_key_id_mismatch_from_source_is_refused() {
    let src = Arc::new(FakeApiKeys::default());
    let cred = src.register("ci", 1);
    // A buggy source returning another key's record for this id.
    src.update(&cred.id, |k| k.id = "someone-else".into());
    let v = ApiKeyVerifier::new(src.clone());
    assert!(matches!(
        api_reason(v.verify(&cred).await),
        Reason::ApiKeyNotFound { .. }
    ));
    assert_eq!(v.bcrypt_verifications(), 0);
}
