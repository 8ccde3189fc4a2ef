//! Wisp authentication, transport-free and store-free: parsing `PIPED-TOKEN`, `API-KEY` and
//! cookie credentials, generating and bcrypt-hashing keys, and verifiers with bounded-TTL caches.

pub mod credentials;
mod error;
mod hash_guard;
pub mod jwt;
pub mod keys;
pub mod sso_state;
mod ttl_cache;
mod verifier;

pub use credentials::{
    ApiKeyCredential, Credentials, CredentialsType, IdToken, PipedToken, parse_api_key,
    parse_authorization, parse_cookie_token, parse_piped_token,
};
pub use error::{AuthError, HashError, PipedTokenPart, Reason, SourceError};
pub use jwt::{
    MAX_SESSION_GROUPS, MAX_SESSION_TTL, SESSION_COOKIE, SessionSigner, SsoGroups, WebCaller,
    static_admin_fingerprint,
};
pub use keys::{
    GENERATED_KEY_HASH_PREFIX, MAX_PIPED_KEYS, generate_api_key, generate_piped_key,
    hash_generated_key, hash_secret, hash_secret_with_cost, is_slow_hash, verify_secret,
};
pub use sso_state::{SSO_STATE_TTL, SsoState, SsoStateSigner};
pub use verifier::{
    ApiKeyAuthInfo, ApiKeyAuthSource, ApiKeyCaller, ApiKeyVerifier, CachePolicy,
    DEFAULT_CACHE_CAPACITY, HashPolicy, PipedAuthInfo, PipedCaller, PipedKeySource, PipedVerifier,
    REJECTED_TTL, VERIFIED_TTL,
};
