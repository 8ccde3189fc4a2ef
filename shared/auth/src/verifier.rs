//! Verifiers for piped tokens and API keys, over store-agnostic sources, with in-process
//! caches so that steady-state polling costs no bcrypt and no store read.
//!
//! What is cached, per process:
//!
//! * **verified** credentials, keyed by `(project, piped, sha256(key))` (API keys:
//!   `(id, sha256(key))`), for [`VERIFIED_TTL`] from the moment they were verified; reads
//!   do not extend it. Each use asks the source whether the piped or key was revoked
//!   since it was verified (an in-memory check; the source keeps its list of revocations
//!   fresh), and verifies afresh if so: a disabled piped, a removed key or a disabled API
//!   key stops working at once in the process that revoked it, and within the source's
//!   refresh period elsewhere;
//! * **rejected** keys (a bcrypt mismatch only), same keying, for [`REJECTED_TTL`]: a piped
//!   left polling with a revoked key every few seconds costs one bcrypt per `REJECTED_TTL`,
//!   not one per call; **unknown** ids (the store has no such piped or key), for as long;
//! * **matched** keys, and bounds on bcrypt work per id and in all: see [`HashPolicy`]
//!   (module `hash_guard`). Guessing with fresh keys costs at most a few bcrypts per id
//!   per minute, and re-verifying a key that matched before costs a store read only.
//!
//! Each cache holds at most [`DEFAULT_CACHE_CAPACITY`] entries. The plaintext key is never
//! stored, only its SHA-256.
//!
//! bcrypt runs on the blocking pool, a bounded number at a time.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::credentials::{ApiKeyCredential, PipedToken};
use crate::error::{AuthError, Reason, SourceError};
pub use crate::hash_guard::HashPolicy;
use crate::hash_guard::{Check, HashGuard, sha256};
use crate::ttl_cache::TtlCache;

/// How long a verified credential is trusted without looking at the store again: the upper
/// bound on how long a disabled piped, a removed piped key or a disabled API key keeps
/// working on an instance that had already verified it.
pub const VERIFIED_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a key that failed bcrypt is rejected without looking again.
pub const REJECTED_TTL: Duration = Duration::from_secs(30);
/// Entries per cache (verified, rejected) per verifier.
pub const DEFAULT_CACHE_CAPACITY: usize = 10_000;

/// Cache settings of a verifier. `Default` is the production policy; tests shorten TTLs.
/// A zero TTL or capacity turns that cache off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    pub verified_ttl: Duration,
    pub rejected_ttl: Duration,
    pub capacity: usize,
    /// Bounds on bcrypt work, and how long a matched key is remembered.
    pub hashing: HashPolicy,
}

impl Default for CachePolicy {
    fn default() -> Self {
        CachePolicy {
            verified_ttl: VERIFIED_TTL,
            rejected_ttl: REJECTED_TTL,
            capacity: DEFAULT_CACHE_CAPACITY,
            hashing: HashPolicy::default(),
        }
    }
}

impl CachePolicy {
    pub fn verified_ttl(mut self, ttl: Duration) -> Self {
        self.verified_ttl = ttl;
        self
    }

    pub fn rejected_ttl(mut self, ttl: Duration) -> Self {
        self.rejected_ttl = ttl;
        self
    }

    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    pub fn hashing(mut self, hashing: HashPolicy) -> Self {
        self.hashing = hashing;
        self
    }

    /// No caching at all: every call reads the source and runs bcrypt (the bounds on
    /// bcrypt work still apply).
    pub fn disabled() -> Self {
        CachePolicy {
            verified_ttl: Duration::ZERO,
            rejected_ttl: Duration::ZERO,
            capacity: 0,
            hashing: HashPolicy {
                remember_matches: Duration::ZERO,
                ..HashPolicy::default()
            },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Pipeds
// ---------------------------------------------------------------------------------------

/// What the verifier needs to know about a piped.
#[derive(Clone, PartialEq, Eq)]
pub struct PipedAuthInfo {
    pub project_id: String,
    pub disabled: bool,
    /// bcrypt hashes of the piped's keys (at most [`MAX_PIPED_KEYS`](crate::MAX_PIPED_KEYS)).
    pub key_hashes: Vec<String>,
}

impl fmt::Debug for PipedAuthInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipedAuthInfo")
            .field("project_id", &self.project_id)
            .field("disabled", &self.disabled)
            .field(
                "key_hashes",
                &format_args!("<{} redacted>", self.key_hashes.len()),
            )
            .finish()
    }
}

/// The stores, as the piped verifier sees them. Implemented by the wiring.
#[async_trait]
pub trait PipedKeySource: Send + Sync {
    /// true if the project exists (config projects or datastore).
    async fn project_exists(&self, project_id: &str) -> Result<bool, SourceError>;
    /// None if unknown.
    async fn piped(&self, piped_id: &str) -> Result<Option<PipedAuthInfo>, SourceError>;
    /// Whether the piped's credentials were revoked after `since_ms` (unix milliseconds).
    async fn piped_revoked_since(
        &self,
        _project_id: &str,
        _piped_id: &str,
        _since_ms: i64,
    ) -> bool {
        false
    }
    /// Replaces the stored key hash `old` (bcrypt, from upstream) of the piped with `new`
    /// (the fast hash of the same key, which just matched it). Best effort.
    async fn replace_piped_key_hash(
        &self,
        _project_id: &str,
        _piped_id: &str,
        _old: &str,
        _new: &str,
    ) {
    }
}

#[async_trait]
impl<T: PipedKeySource + ?Sized> PipedKeySource for Arc<T> {
    async fn project_exists(&self, project_id: &str) -> Result<bool, SourceError> {
        (**self).project_exists(project_id).await
    }
    async fn piped(&self, piped_id: &str) -> Result<Option<PipedAuthInfo>, SourceError> {
        (**self).piped(piped_id).await
    }
    async fn piped_revoked_since(&self, project_id: &str, piped_id: &str, since_ms: i64) -> bool {
        (**self)
            .piped_revoked_since(project_id, piped_id, since_ms)
            .await
    }
    async fn replace_piped_key_hash(&self, project_id: &str, piped_id: &str, old: &str, new: &str) {
        (**self)
            .replace_piped_key_hash(project_id, piped_id, old, new)
            .await
    }
}

/// Now, in unix milliseconds (the clock revocations are recorded with).
fn now_ms() -> i64 {
    wisp_model::clock::now_unix_ms()
}

/// An authenticated piped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PipedCaller {
    pub project_id: String,
    pub piped_id: String,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PipedCacheKey {
    project_id: String,
    piped_id: String,
    key_sha256: [u8; 32],
}

impl PipedCacheKey {
    fn new(token: &PipedToken) -> Self {
        PipedCacheKey {
            project_id: token.project_id.clone(),
            piped_id: token.piped_id.clone(),
            key_sha256: sha256(token.piped_key()),
        }
    }
}

/// Verifies piped tokens as upstream does (project exists; piped exists, belongs to the
/// project and is enabled; the key matches one of its hashes), caching the outcome.
pub struct PipedVerifier<S> {
    source: S,
    /// The caller, and when it was verified (unix ms).
    verified: TtlCache<PipedCacheKey, (PipedCaller, i64)>,
    rejected: TtlCache<PipedCacheKey, Reason>,
    /// Piped ids the source did not know: ids are random and made at registration, so
    /// one unknown now was not registered before and a flood of made-up ids costs one
    /// store read per id per `rejected_ttl`.
    unknown: TtlCache<String, Reason>,
    hashing: HashGuard,
}

impl<S> fmt::Debug for PipedVerifier<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipedVerifier")
            .field("bcrypt_verifications", &self.hashing.slow_checks())
            .finish_non_exhaustive()
    }
}

impl<S: PipedKeySource> PipedVerifier<S> {
    /// A verifier with the production [`CachePolicy`].
    pub fn new(source: S) -> Self {
        Self::with_policy(source, CachePolicy::default())
    }

    pub fn with_policy(source: S, policy: CachePolicy) -> Self {
        PipedVerifier {
            source,
            verified: TtlCache::new(policy.verified_ttl, policy.capacity),
            rejected: TtlCache::new(policy.rejected_ttl, policy.capacity),
            unknown: TtlCache::new(policy.rejected_ttl, policy.capacity),
            hashing: HashGuard::new(policy.hashing, "piped"),
        }
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// bcrypt comparisons run so far (one per stored hash tried).
    pub fn bcrypt_verifications(&self) -> u64 {
        self.hashing.slow_checks()
    }

    /// Forgets every cached outcome for `piped_id` on this instance (call after disabling
    /// a piped or changing its keys here; other instances catch up within the TTLs).
    pub fn forget_piped(&self, piped_id: &str) {
        self.verified.remove_where(|k, _| k.piped_id == piped_id);
        self.rejected.remove_where(|k, _| k.piped_id == piped_id);
        self.unknown.remove_where(|id, _| id == piped_id);
        self.hashing.forget(piped_id);
    }

    /// Forgets every cached outcome.
    pub fn clear_cache(&self) {
        self.verified.clear();
        self.rejected.clear();
        self.unknown.clear();
        self.hashing.clear();
    }

    /// Verifies `token`. Rejections are `AuthError::Unauthenticated(reason)`; a failing
    /// source is `AuthError::Unavailable`.
    pub async fn verify(&self, token: &PipedToken) -> Result<PipedCaller, AuthError> {
        self.verify_from(token, None).await
    }

    /// [`Self::verify`] for a call from `source` (the client's address, when known): a
    /// key's failed slow checks are counted per id and source.
    pub async fn verify_from(
        &self,
        token: &PipedToken,
        source: Option<std::net::IpAddr>,
    ) -> Result<PipedCaller, AuthError> {
        counted("piped", self.verify_uncounted(token, source).await)
    }

    /// [`Self::verify`], with whether the answer came from the verified cache.
    async fn verify_uncounted(
        &self,
        token: &PipedToken,
        source: Option<std::net::IpAddr>,
    ) -> Result<(PipedCaller, bool), AuthError> {
        let cache_key = PipedCacheKey::new(token);
        if let Some((caller, verified_at)) = self.verified.get(&cache_key) {
            if !self
                .source
                .piped_revoked_since(&caller.project_id, &caller.piped_id, verified_at)
                .await
            {
                return Ok((caller, true));
            }
            self.forget_piped(&caller.piped_id);
        }
        if let Some(reason) = self.rejected.get(&cache_key) {
            return Err(AuthError::Unauthenticated(reason));
        }
        if let Some(reason) = self.unknown.get(token.piped_id.as_str()) {
            return Err(AuthError::Unauthenticated(reason));
        }

        // Taken before the read: a revocation after this instant ends the verification.
        let verified_at = now_ms();
        let project_id = token.project_id.as_str();
        let piped_id = token.piped_id.as_str();
        if !self.source.project_exists(project_id).await? {
            return Err(Reason::ProjectNotFound {
                project_id: project_id.to_owned(),
                piped_id: piped_id.to_owned(),
            }
            .into());
        }
        let Some(piped) = self.source.piped(piped_id).await? else {
            let reason = Reason::PipedNotFound {
                piped_id: piped_id.to_owned(),
            };
            self.unknown.insert(piped_id.to_owned(), reason.clone());
            return Err(reason.into());
        };
        if piped.project_id != project_id {
            return Err(Reason::PipedProjectMismatch {
                piped_id: piped_id.to_owned(),
                expected: project_id.to_owned(),
                got: piped.project_id,
            }
            .into());
        }
        if piped.disabled {
            return Err(Reason::PipedDisabled {
                piped_id: piped_id.to_owned(),
            }
            .into());
        }
        match self
            .hashing
            .check(piped_id, token.piped_key(), &piped.key_hashes, source)
            .await?
        {
            Check::Matched(None) => {}
            Check::Matched(Some(slow)) => {
                // A key from upstream PipeCD (bcrypt): store its fast hash from now on.
                let fast = crate::keys::hash_generated_key(token.piped_key());
                self.source
                    .replace_piped_key_hash(project_id, piped_id, &slow, &fast)
                    .await;
            }
            Check::NoMatch => {
                let reason = Reason::PipedKeyMismatch {
                    piped_id: piped_id.to_owned(),
                };
                self.rejected.insert(cache_key, reason.clone());
                return Err(reason.into());
            }
            Check::TooManyFailures => {
                return Err(Reason::TooManyFailures {
                    id: piped_id.to_owned(),
                }
                .into());
            }
        }

        let caller = PipedCaller {
            project_id: project_id.to_owned(),
            piped_id: piped_id.to_owned(),
        };
        tracing::debug!(project_id, piped_id, "piped credentials verified");
        self.verified
            .insert(cache_key, (caller.clone(), verified_at));
        Ok((caller, false))
    }
}

/// Counts a verification by its outcome (`wisp_auth_verifications_total`).
fn counted<C>(
    credential: &'static str,
    result: Result<(C, bool), AuthError>,
) -> Result<C, AuthError> {
    let outcome = match &result {
        Ok((_, true)) => "cached",
        Ok((_, false)) => "verified",
        Err(AuthError::Unauthenticated(_)) => "rejected",
        Err(_) => "unavailable",
    };
    wisp_telemetry::record_verification(credential, outcome);
    result.map(|(caller, _)| caller)
}

// ---------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------

/// What the verifier needs to know about an API key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeyAuthInfo {
    pub id: String,
    pub name: String,
    pub project_id: String,
    /// `model.APIKey.Role` (0 READ_ONLY, 1 READ_WRITE).
    pub role: i32,
    pub disabled: bool,
    /// bcrypt hash of the full `<id>.<secret>` string.
    pub key_hash: String,
}

impl fmt::Debug for ApiKeyAuthInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyAuthInfo")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("project_id", &self.project_id)
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .field("key_hash", &"<redacted>")
            .finish()
    }
}

/// The stores, as the API key verifier sees them. Implemented by the wiring.
#[async_trait]
pub trait ApiKeyAuthSource: Send + Sync {
    /// None if unknown.
    async fn api_key(&self, id: &str) -> Result<Option<ApiKeyAuthInfo>, SourceError>;
    /// Whether the key was revoked after `since_ms` (unix milliseconds).
    async fn api_key_revoked_since(&self, _project_id: &str, _id: &str, _since_ms: i64) -> bool {
        false
    }
    /// Replaces the stored hash `old` (bcrypt, from upstream) of the key with `new` (the
    /// fast hash of the same key, which just matched it). Best effort.
    async fn replace_api_key_hash(&self, _project_id: &str, _id: &str, _old: &str, _new: &str) {}
}

#[async_trait]
impl<T: ApiKeyAuthSource + ?Sized> ApiKeyAuthSource for Arc<T> {
    async fn api_key(&self, id: &str) -> Result<Option<ApiKeyAuthInfo>, SourceError> {
        (**self).api_key(id).await
    }
    async fn api_key_revoked_since(&self, project_id: &str, id: &str, since_ms: i64) -> bool {
        (**self)
            .api_key_revoked_since(project_id, id, since_ms)
            .await
    }
    async fn replace_api_key_hash(&self, project_id: &str, id: &str, old: &str, new: &str) {
        (**self)
            .replace_api_key_hash(project_id, id, old, new)
            .await
    }
}

/// An authenticated API key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiKeyCaller {
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub role: i32,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct ApiKeyCacheKey {
    id: String,
    key_sha256: [u8; 32],
}

/// Verifies API keys as upstream does (the key exists, is enabled, and bcrypt matches),
/// caching the outcome. Unlike upstream it writes nothing (no "last used" write that can
/// fail the call); recording last use, if wanted, is the caller's best-effort business.
pub struct ApiKeyVerifier<S> {
    source: S,
    /// The caller, and when it was verified (unix ms).
    verified: TtlCache<ApiKeyCacheKey, (ApiKeyCaller, i64)>,
    rejected: TtlCache<ApiKeyCacheKey, Reason>,
    /// Key ids the source did not know (random UUIDs made with the key).
    unknown: TtlCache<String, Reason>,
    hashing: HashGuard,
}

impl<S> fmt::Debug for ApiKeyVerifier<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyVerifier")
            .field("bcrypt_verifications", &self.hashing.slow_checks())
            .finish_non_exhaustive()
    }
}

impl<S: ApiKeyAuthSource> ApiKeyVerifier<S> {
    /// A verifier with the production [`CachePolicy`].
    pub fn new(source: S) -> Self {
        Self::with_policy(source, CachePolicy::default())
    }

    pub fn with_policy(source: S, policy: CachePolicy) -> Self {
        ApiKeyVerifier {
            source,
            verified: TtlCache::new(policy.verified_ttl, policy.capacity),
            rejected: TtlCache::new(policy.rejected_ttl, policy.capacity),
            unknown: TtlCache::new(policy.rejected_ttl, policy.capacity),
            hashing: HashGuard::new(policy.hashing, "api_key"),
        }
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// bcrypt comparisons run so far.
    pub fn bcrypt_verifications(&self) -> u64 {
        self.hashing.slow_checks()
    }

    /// Forgets every cached outcome for API key `id` on this instance.
    pub fn forget_api_key(&self, id: &str) {
        self.verified.remove_where(|k, _| k.id == id);
        self.rejected.remove_where(|k, _| k.id == id);
        self.unknown.remove_where(|key_id, _| key_id == id);
        self.hashing.forget(id);
    }

    /// Forgets every cached outcome.
    pub fn clear_cache(&self) {
        self.verified.clear();
        self.rejected.clear();
        self.unknown.clear();
        self.hashing.clear();
    }

    pub async fn verify(&self, credential: &ApiKeyCredential) -> Result<ApiKeyCaller, AuthError> {
        self.verify_from(credential, None).await
    }

    /// [`Self::verify`] for a call from `source` (the client's address, when known): a
    /// key's failed slow checks are counted per id and source.
    pub async fn verify_from(
        &self,
        credential: &ApiKeyCredential,
        source: Option<std::net::IpAddr>,
    ) -> Result<ApiKeyCaller, AuthError> {
        counted("api_key", self.verify_uncounted(credential, source).await)
    }

    /// [`Self::verify`], with whether the answer came from the verified cache.
    async fn verify_uncounted(
        &self,
        credential: &ApiKeyCredential,
        source: Option<std::net::IpAddr>,
    ) -> Result<(ApiKeyCaller, bool), AuthError> {
        let cache_key = ApiKeyCacheKey {
            id: credential.id.clone(),
            key_sha256: sha256(credential.key()),
        };
        if let Some((caller, verified_at)) = self.verified.get(&cache_key) {
            if !self
                .source
                .api_key_revoked_since(&caller.project_id, &caller.id, verified_at)
                .await
            {
                return Ok((caller, true));
            }
            self.forget_api_key(&caller.id);
        }
        if let Some(reason) = self.rejected.get(&cache_key) {
            return Err(AuthError::Unauthenticated(reason));
        }
        if let Some(reason) = self.unknown.get(credential.id.as_str()) {
            return Err(AuthError::Unauthenticated(reason));
        }

        let verified_at = now_ms();
        let id = credential.id.as_str();
        let not_found = || {
            let reason = Reason::ApiKeyNotFound { id: id.to_owned() };
            self.unknown.insert(id.to_owned(), reason.clone());
            reason
        };
        let info = self.source.api_key(id).await?.ok_or_else(not_found)?;
        if info.id != id {
            return Err(not_found().into());
        }
        if info.disabled {
            return Err(Reason::ApiKeyDisabled { id: id.to_owned() }.into());
        }
        match self
            .hashing
            .check(
                id,
                credential.key(),
                std::slice::from_ref(&info.key_hash),
                source,
            )
            .await?
        {
            Check::Matched(None) => {}
            Check::Matched(Some(slow)) => {
                // A key from upstream PipeCD (bcrypt): store its fast hash from now on.
                let fast = crate::keys::hash_generated_key(credential.key());
                self.source
                    .replace_api_key_hash(&info.project_id, id, &slow, &fast)
                    .await;
            }
            Check::NoMatch => {
                let reason = Reason::ApiKeyMismatch { id: id.to_owned() };
                self.rejected.insert(cache_key, reason.clone());
                return Err(reason.into());
            }
            Check::TooManyFailures => {
                return Err(Reason::TooManyFailures { id: id.to_owned() }.into());
            }
        }

        let caller = ApiKeyCaller {
            id: info.id,
            name: info.name,
            project_id: info.project_id,
            role: info.role,
        };
        tracing::debug!(api_key_id = id, project_id = %caller.project_id, "api key verified");
        self.verified
            .insert(cache_key, (caller.clone(), verified_at));
        Ok((caller, false))
    }
}
