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

/// Piped tokens as a [`CredentialKind`].
struct Pipeds<S>(S);

#[async_trait]
impl<S: PipedKeySource> CredentialKind for Pipeds<S> {
    type Credential = PipedToken;
    type Info = PipedAuthInfo;
    type Caller = PipedCaller;
    const NAME: &'static str = "piped";

    fn id(token: &PipedToken) -> &str {
        &token.piped_id
    }

    fn scope(token: &PipedToken) -> &str {
        &token.project_id
    }

    fn key(token: &PipedToken) -> &str {
        token.piped_key()
    }

    fn caller_ids(caller: &PipedCaller) -> (&str, &str) {
        (&caller.project_id, &caller.piped_id)
    }

    async fn revoked_since(&self, project_id: &str, piped_id: &str, since_ms: i64) -> bool {
        self.0
            .piped_revoked_since(project_id, piped_id, since_ms)
            .await
    }

    /// As upstream: the project exists; the piped exists, belongs to the project and is
    /// enabled.
    async fn lookup(&self, token: &PipedToken) -> Result<Lookup<PipedAuthInfo>, SourceError> {
        let project_id = token.project_id.as_str();
        let piped_id = token.piped_id.as_str();
        if !self.0.project_exists(project_id).await? {
            return Ok(Lookup::Refused(Reason::ProjectNotFound {
                project_id: project_id.to_owned(),
                piped_id: piped_id.to_owned(),
            }));
        }
        let Some(piped) = self.0.piped(piped_id).await? else {
            return Ok(Lookup::Unknown(Reason::PipedNotFound {
                piped_id: piped_id.to_owned(),
            }));
        };
        if piped.project_id != project_id {
            return Ok(Lookup::Refused(Reason::PipedProjectMismatch {
                piped_id: piped_id.to_owned(),
                expected: project_id.to_owned(),
                got: piped.project_id,
            }));
        }
        if piped.disabled {
            return Ok(Lookup::Refused(Reason::PipedDisabled {
                piped_id: piped_id.to_owned(),
            }));
        }
        Ok(Lookup::Found(piped))
    }

    fn key_hashes(piped: &PipedAuthInfo) -> &[String] {
        &piped.key_hashes
    }

    async fn replace_hash(&self, piped: &PipedAuthInfo, piped_id: &str, old: &str, new: &str) {
        self.0
            .replace_piped_key_hash(&piped.project_id, piped_id, old, new)
            .await
    }

    fn mismatch(piped_id: &str) -> Reason {
        Reason::PipedKeyMismatch {
            piped_id: piped_id.to_owned(),
        }
    }

    fn caller(piped_id: &str, piped: PipedAuthInfo) -> PipedCaller {
        PipedCaller {
            project_id: piped.project_id,
            piped_id: piped_id.to_owned(),
        }
    }
}

/// Verifies piped tokens as upstream does (project exists; piped exists, belongs to the
/// project and is enabled; the key matches one of its hashes), caching the outcome.
pub struct PipedVerifier<S> {
    protocol: Protocol<Pipeds<S>, PipedCaller>,
}

impl<S> fmt::Debug for PipedVerifier<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipedVerifier")
            .field("bcrypt_verifications", &self.protocol.hashing.slow_checks())
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
            protocol: Protocol::new(Pipeds(source), policy),
        }
    }

    pub fn source(&self) -> &S {
        &self.protocol.kind.0
    }

    /// bcrypt comparisons run so far (one per stored hash tried).
    pub fn bcrypt_verifications(&self) -> u64 {
        self.protocol.hashing.slow_checks()
    }

    /// Forgets every cached outcome for `piped_id` on this instance (call after disabling
    /// a piped or changing its keys here; other instances catch up within the TTLs).
    pub fn forget_piped(&self, piped_id: &str) {
        self.protocol.forget(piped_id);
    }

    /// Forgets every cached outcome.
    pub fn clear_cache(&self) {
        self.protocol.clear();
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
        self.protocol.verify(token, source).await
    }
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

/// API keys as a [`CredentialKind`].
struct ApiKeys<S>(S);

#[async_trait]
impl<S: ApiKeyAuthSource> CredentialKind for ApiKeys<S> {
    type Credential = ApiKeyCredential;
    type Info = ApiKeyAuthInfo;
    type Caller = ApiKeyCaller;
    const NAME: &'static str = "api_key";

    fn id(credential: &ApiKeyCredential) -> &str {
        &credential.id
    }

    /// An API key's id alone names it.
    fn scope(_credential: &ApiKeyCredential) -> &str {
        ""
    }

    fn key(credential: &ApiKeyCredential) -> &str {
        credential.key()
    }

    fn caller_ids(caller: &ApiKeyCaller) -> (&str, &str) {
        (&caller.project_id, &caller.id)
    }

    async fn revoked_since(&self, project_id: &str, id: &str, since_ms: i64) -> bool {
        self.0.api_key_revoked_since(project_id, id, since_ms).await
    }

    /// As upstream: the key exists and is enabled.
    async fn lookup(
        &self,
        credential: &ApiKeyCredential,
    ) -> Result<Lookup<ApiKeyAuthInfo>, SourceError> {
        let id = credential.id.as_str();
        let not_found = || Lookup::Unknown(Reason::ApiKeyNotFound { id: id.to_owned() });
        let Some(info) = self.0.api_key(id).await? else {
            return Ok(not_found());
        };
        if info.id != id {
            return Ok(not_found());
        }
        if info.disabled {
            return Ok(Lookup::Refused(Reason::ApiKeyDisabled {
                id: id.to_owned(),
            }));
        }
        Ok(Lookup::Found(info))
    }

    fn key_hashes(info: &ApiKeyAuthInfo) -> &[String] {
        std::slice::from_ref(&info.key_hash)
    }

    async fn replace_hash(&self, info: &ApiKeyAuthInfo, id: &str, old: &str, new: &str) {
        self.0
            .replace_api_key_hash(&info.project_id, id, old, new)
            .await
    }

    fn mismatch(id: &str) -> Reason {
        Reason::ApiKeyMismatch { id: id.to_owned() }
    }

    fn caller(_id: &str, info: ApiKeyAuthInfo) -> ApiKeyCaller {
        ApiKeyCaller {
            id: info.id,
            name: info.name,
            project_id: info.project_id,
            role: info.role,
        }
    }
}

/// Verifies API keys as upstream does (the key exists, is enabled, and bcrypt matches),
/// caching the outcome. Unlike upstream it writes nothing (no "last used" write that can
/// fail the call); recording last use, if wanted, is the caller's best-effort business.
pub struct ApiKeyVerifier<S> {
    protocol: Protocol<ApiKeys<S>, ApiKeyCaller>,
}

impl<S> fmt::Debug for ApiKeyVerifier<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyVerifier")
            .field("bcrypt_verifications", &self.protocol.hashing.slow_checks())
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
            protocol: Protocol::new(ApiKeys(source), policy),
        }
    }

    pub fn source(&self) -> &S {
        &self.protocol.kind.0
    }

    /// bcrypt comparisons run so far.
    pub fn bcrypt_verifications(&self) -> u64 {
        self.protocol.hashing.slow_checks()
    }

    /// Forgets every cached outcome for API key `id` on this instance.
    pub fn forget_api_key(&self, id: &str) {
        self.protocol.forget(id);
    }

    /// Forgets every cached outcome.
    pub fn clear_cache(&self) {
        self.protocol.clear();
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
        self.protocol.verify(credential, source).await
    }
}

// ---------------------------------------------------------------------------------------
// The protocol, once for every kind of credential
// ---------------------------------------------------------------------------------------

/// What the verification protocol needs to know about one kind of credential: how to
/// look it up, its hashes, how to upgrade a hash, and what identifies it in the caches.
#[async_trait]
trait CredentialKind: Send + Sync {
    /// The credential as presented.
    type Credential: Sync;
    /// What the store knows about it.
    type Info: Send;
    /// Whom it authenticates (kept in the verified cache).
    type Caller: Clone + Send + Sync;
    /// Its name in metrics and logs, and in the bounds on bcrypt work.
    const NAME: &'static str;

    /// The credential's id: unknown ids, failure counts and `forget` go by it.
    fn id(credential: &Self::Credential) -> &str;
    /// What else the credential names that a verified key is bound to (a piped token's
    /// project), or "".
    fn scope(credential: &Self::Credential) -> &str;
    /// The secret, to hash.
    fn key(credential: &Self::Credential) -> &str;
    /// `(project id, credential id)` of a caller, as revocations are recorded.
    fn caller_ids(caller: &Self::Caller) -> (&str, &str);
    /// Whether the credential was revoked after `since_ms` (unix milliseconds).
    async fn revoked_since(&self, project_id: &str, id: &str, since_ms: i64) -> bool;
    /// Reads the credential and applies every rule but the key's.
    async fn lookup(
        &self,
        credential: &Self::Credential,
    ) -> Result<Lookup<Self::Info>, SourceError>;
    /// The stored hashes the key may match.
    fn key_hashes(info: &Self::Info) -> &[String];
    /// Replaces the stored hash `old` with `new` (best effort).
    async fn replace_hash(&self, info: &Self::Info, id: &str, old: &str, new: &str);
    /// Why a key that matched none of the hashes is refused.
    fn mismatch(id: &str) -> Reason;
    /// The caller a verified credential stands for.
    fn caller(id: &str, info: Self::Info) -> Self::Caller;
}

/// What a lookup found.
enum Lookup<I> {
    /// The credential exists and may be used if its key matches.
    Found(I),
    /// The store has no such id: remembered in the unknown cache.
    Unknown(Reason),
    /// It exists but may not be used (disabled, another project...): not cached, so
    /// re-enabling it takes effect at once.
    Refused(Reason),
}

/// Cache key of a presented credential; the plaintext key is never kept.
#[derive(Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    scope: String,
    id: String,
    key_sha256: [u8; 32],
}

/// The verification protocol with its caches, for credentials of kind `K` that
/// authenticate a `C` (`K::Caller`, a parameter of its own so that the verifiers' structs
/// need no bound on their source).
struct Protocol<K, C> {
    kind: K,
    /// The caller, and when it was verified (unix ms).
    verified: TtlCache<CacheKey, (C, i64)>,
    rejected: TtlCache<CacheKey, Reason>,
    /// Ids the source did not know: ids are random and made with the credential, so one
    /// unknown now was not made before, and a flood of made-up ids costs one store read
    /// per id per `rejected_ttl`.
    unknown: TtlCache<String, Reason>,
    hashing: HashGuard,
}

impl<K: CredentialKind<Caller = C>, C: Clone + Send + Sync> Protocol<K, C> {
    fn new(kind: K, policy: CachePolicy) -> Self {
        Protocol {
            kind,
            verified: TtlCache::new(policy.verified_ttl, policy.capacity),
            rejected: TtlCache::new(policy.rejected_ttl, policy.capacity),
            unknown: TtlCache::new(policy.rejected_ttl, policy.capacity),
            hashing: HashGuard::new(policy.hashing, K::NAME),
        }
    }

    fn forget(&self, id: &str) {
        self.verified.remove_where(|k, _| k.id == id);
        self.rejected.remove_where(|k, _| k.id == id);
        self.unknown.remove_where(|unknown, _| unknown == id);
        self.hashing.forget(id);
    }

    fn clear(&self) {
        self.verified.clear();
        self.rejected.clear();
        self.unknown.clear();
        self.hashing.clear();
    }

    /// Verifies `credential`, counting the outcome.
    async fn verify(
        &self,
        credential: &K::Credential,
        source: Option<std::net::IpAddr>,
    ) -> Result<K::Caller, AuthError> {
        counted(K::NAME, self.verify_uncounted(credential, source).await)
    }

    /// Verifies `credential`, with whether the answer came from the verified cache.
    /// Rejections are `AuthError::Unauthenticated(reason)`; a failing source is
    /// `AuthError::Unavailable`.
    async fn verify_uncounted(
        &self,
        credential: &K::Credential,
        source: Option<std::net::IpAddr>,
    ) -> Result<(K::Caller, bool), AuthError> {
        let id = K::id(credential);
        let cache_key = CacheKey {
            scope: K::scope(credential).to_owned(),
            id: id.to_owned(),
            key_sha256: sha256(K::key(credential)),
        };
        if let Some((caller, verified_at)) = self.verified.get(&cache_key) {
            let (project_id, caller_id) = K::caller_ids(&caller);
            if !self
                .kind
                .revoked_since(project_id, caller_id, verified_at)
                .await
            {
                return Ok((caller, true));
            }
            self.forget(caller_id);
        }
        if let Some(reason) = self.rejected.get(&cache_key) {
            return Err(AuthError::Unauthenticated(reason));
        }
        // Before any bcrypt: an id the store does not know costs no hashing.
        if let Some(reason) = self.unknown.get(id) {
            return Err(AuthError::Unauthenticated(reason));
        }

        // Taken before the read: a revocation after this instant ends the verification.
        let verified_at = now_ms();
        let info = match self.kind.lookup(credential).await? {
            Lookup::Found(info) => info,
            Lookup::Unknown(reason) => {
                self.unknown.insert(id.to_owned(), reason.clone());
                return Err(reason.into());
            }
            Lookup::Refused(reason) => return Err(reason.into()),
        };
        match self
            .hashing
            .check(id, K::key(credential), K::key_hashes(&info), source)
            .await?
        {
            Check::Matched(None) => {}
            Check::Matched(Some(slow)) => {
                // A key from upstream PipeCD (bcrypt): store its fast hash from now on.
                let fast = crate::keys::hash_generated_key(K::key(credential));
                self.kind.replace_hash(&info, id, &slow, &fast).await;
            }
            Check::NoMatch => {
                let reason = K::mismatch(id);
                self.rejected.insert(cache_key, reason.clone());
                return Err(reason.into());
            }
            Check::TooManyFailures => {
                return Err(Reason::TooManyFailures { id: id.to_owned() }.into());
            }
        }

        let caller = K::caller(id, info);
        let (project_id, _) = K::caller_ids(&caller);
        tracing::debug!(credential = K::NAME, id, project_id, "credentials verified");
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
