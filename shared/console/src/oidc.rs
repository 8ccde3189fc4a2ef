//! OpenID Connect login (upstream's `pkg/oauth/oidc`): `POST /auth/login` sends the browser
//! to the provider with the login's `state`, a `nonce` and a PKCE challenge;
//! `GET /auth/callback` trades the code (with the PKCE verifier) for an ID token, checks it
//! against the provider's keys, its issuer and the nonce, merges the UserInfo endpoint's
//! claims into it, and maps the role claims to the project's roles.
//!
//! As upstream (`pkg/oauth/oidc`, over `golang.org/x/oauth2` and `go-oidc`): the client
//! authenticates to the token endpoint with HTTP Basic (`client_secret_basic`), and with
//! the form (`client_secret_post`) only when the discovery document says the provider
//! takes that and not Basic, or Basic was refused and it takes the form; an ID token is
//! accepted signed with any algorithm the discovery document advertises
//! (`id_token_signing_alg_values_supported`; RS256 when it names none) that
//! `jsonwebtoken` implements, and verified with a key of that algorithm's own kind only:
//! a JWKS key of the matching type (and curve) for RSA, EC and EdDSA, the client secret
//! for HMAC (OpenID Connect Core 10.1), never a public key as an HMAC secret, never
//! `none` (which `jsonwebtoken` cannot even parse).
//!
//! The provider's addresses (issuer, and the endpoints its discovery document or the
//! project names) must be ones the operator's [`ProviderPolicy`] allows: `https://` to
//! public addresses (issue 33), unless private ones are allowed, and then plain `http://`
//! to loopback too (a provider run beside the control plane in tests). The discovery
//! document must name the configured issuer.
//!
//! `POST /auth/login` needs no credentials, so the discovery document is cached per
//! issuer (and proxy) for [`DISCOVERY_TTL`], a failure for [`DISCOVERY_FAILURE_TTL`]:
//! a flood of logins fetches it about once, whatever the issuer answers.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use wisp_auth::SsoState;
use wisp_proto::model;
use wisp_services::web::rbac::sso_roles;
use wisp_services::web::sso_policy::ProviderPolicy;

use crate::provider::ProviderClient;

/// Claims upstream reads the user name and avatar from, when the project names none.
const USERNAME_CLAIMS: [&str; 4] = ["username", "preferred_username", "name", "cognito:username"];
const AVATAR_CLAIMS: [&str; 2] = ["picture", "avatar_url"];
/// Claims upstream reads roles from, all of them, when the project names none.
pub const DEFAULT_ROLE_CLAIMS: [&str; 5] = [
    "groups",
    "roles",
    "cognito:groups",
    "custom:roles",
    "custom:groups",
];

/// Whether `url` may be a provider address under `policy`.
pub fn provider_url_allowed(url: &str, policy: ProviderPolicy) -> bool {
    check_url(url, policy).is_ok()
}

/// [`ProviderPolicy::check`] on `url` as the HTTP client parses it.
fn check_url(url: &str, policy: ProviderPolicy) -> Result<(), String> {
    let uri = url
        .parse::<http::Uri>()
        .map_err(|_| "it is not a URL".to_string())?;
    policy.check(
        uri.scheme_str().unwrap_or_default(),
        uri.host().unwrap_or_default(),
    )
}

fn check_provider_url(what: &str, url: &str, policy: ProviderPolicy) -> Result<(), SsoError> {
    check_url(url, policy)
        .map_err(|why| SsoError::config(format!("the OIDC {what} is refused: {why}")))
}

/// How long a discovery document is used before it is fetched again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a failed discovery is remembered (logins fail at once meanwhile).
pub const DISCOVERY_FAILURE_TTL: Duration = Duration::from_secs(30);
/// Issuers whose discovery is remembered; past it the oldest are forgotten.
const MAX_CACHED_ISSUERS: usize = 512;

struct CachedDiscovery {
    at: Instant,
    found: Result<Discovery, String>,
}

/// (issuer, proxy URL) → what discovery found.
fn discovery_cache() -> &'static Mutex<HashMap<(String, String), CachedDiscovery>> {
    static CACHE: OnceLock<Mutex<HashMap<(String, String), CachedDiscovery>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The error behind an SSO failure (an HTTP client's, a JSON decoder's, a token
/// library's), kept as the source for the log.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why an SSO login failed; the text goes to the login page's `error` cookie (a
/// configuration error or a refusal) or to the log only (the rest). Each message repeats
/// its cause's text, as before the cause was kept; the cause itself is the source.
#[derive(Debug, thiserror::Error)]
pub enum SsoError {
    #[error("{message}")]
    Config {
        message: String,
        #[source]
        source: Option<Cause>,
    },
    #[error("the identity provider could not be reached: {message}")]
    Provider {
        message: String,
        #[source]
        source: Option<Cause>,
    },
    #[error("the identity provider's token was refused: {message}")]
    Token {
        message: String,
        #[source]
        source: Option<Cause>,
    },
    #[error("{0}")]
    Denied(String),
}

/// `context: cause` (the cause alone without a context), and the cause.
fn caused(context: &str, cause: impl Into<Cause>) -> (String, Option<Cause>) {
    let cause = cause.into();
    let message = if context.is_empty() {
        cause.to_string()
    } else {
        format!("{context}: {cause}")
    };
    (message, Some(cause))
}

impl SsoError {
    pub(crate) fn config(message: impl Into<String>) -> Self {
        SsoError::Config {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn config_from(context: &str, cause: impl Into<Cause>) -> Self {
        let (message, source) = caused(context, cause);
        SsoError::Config { message, source }
    }

    pub(crate) fn provider(message: impl Into<String>) -> Self {
        SsoError::Provider {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn provider_from(context: &str, cause: impl Into<Cause>) -> Self {
        let (message, source) = caused(context, cause);
        SsoError::Provider { message, source }
    }

    pub(crate) fn token(message: impl Into<String>) -> Self {
        SsoError::Token {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn token_from(context: &str, cause: impl Into<Cause>) -> Self {
        let (message, source) = caused(context, cause);
        SsoError::Token { message, source }
    }
}

/// The signed-in SSO user.
#[derive(Debug)]
pub struct SsoUser {
    pub username: String,
    pub avatar_url: String,
    pub roles: Vec<String>,
    /// The values the roles came from, kept in the session so that its roles follow
    /// the project's mapping.
    pub groups: Vec<String>,
    /// Whether a value may name a role directly (OpenID Connect) or must be mapped
    /// (GitHub teams).
    pub role_names: bool,
}

#[derive(Deserialize, Clone)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    userinfo_endpoint: Option<String>,
    #[serde(default)]
    id_token_signing_alg_values_supported: Vec<String>,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TokenResponse {
    id_token: String,
    #[serde(default)]
    access_token: String,
}

/// The keys of a JWKS, each kept as JSON: a key of a type `jsonwebtoken` does not read
/// is skipped, not a reason to refuse the others.
#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Value>,
}

/// The client's credentials at the provider.
#[derive(Clone, Copy)]
pub struct Client<'a> {
    pub id: &'a str,
    pub secret: &'a str,
}

impl std::fmt::Debug for Client<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// How the client authenticates to the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuthStyle {
    /// `client_secret_basic`: `Authorization: Basic`.
    Basic,
    /// `client_secret_post`: in the form.
    Post,
}

/// The algorithms an ID token may be signed with: those the discovery document
/// advertises that `jsonwebtoken` implements; RS256 when it advertises none (the one
/// OpenID Connect Discovery requires every provider to support).
fn accepted_algorithms(advertised: &[String]) -> Vec<Algorithm> {
    if advertised.is_empty() {
        return vec![Algorithm::RS256];
    }
    advertised
        .iter()
        .filter_map(|a| a.parse::<Algorithm>().ok())
        .collect()
}

/// Whether `jwk` is a key for `alg`: its type (and curve) is the algorithm's, its `alg`
/// (when it names one) is `alg`, its `use` (when set) is signing, and its `kid` is the
/// token's (when the token names one).
fn key_fits(jwk: &jsonwebtoken::jwk::Jwk, alg: Algorithm, kid: Option<&str>) -> bool {
    use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, PublicKeyUse};
    let kind_fits = match (&jwk.algorithm, alg) {
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512,
        ) => true,
        (AlgorithmParameters::EllipticCurve(p), Algorithm::ES256) => p.curve == EllipticCurve::P256,
        (AlgorithmParameters::EllipticCurve(p), Algorithm::ES384) => p.curve == EllipticCurve::P384,
        (AlgorithmParameters::OctetKeyPair(p), Algorithm::EdDSA) => {
            p.curve == EllipticCurve::Ed25519
        }
        _ => false,
    };
    let alg_fits = jwk
        .common
        .key_algorithm
        .is_none_or(|ka| serde_json::to_value(ka).ok() == serde_json::to_value(alg).ok());
    let use_fits = jwk
        .common
        .public_key_use
        .as_ref()
        .is_none_or(|u| *u == PublicKeyUse::Signature);
    let kid_fits = kid.is_none_or(|kid| jwk.common.key_id.as_deref() == Some(kid));
    kind_fits && alg_fits && use_fits && kid_fits
}

/// The key that verifies a token signed with `alg`: the client secret for HMAC, else
/// the first key of `jwks` that [`key_fits`].
fn decoding_key(
    alg: Algorithm,
    kid: Option<&str>,
    jwks: &[Value],
    client_secret: &str,
) -> Result<DecodingKey, SsoError> {
    use jsonwebtoken::AlgorithmFamily;
    if alg.family() == AlgorithmFamily::Hmac {
        // OpenID Connect Core 10.1: the key is the client secret's bytes. Never a key of
        // the JWKS: a public key is public.
        if client_secret.is_empty() {
            return Err(SsoError::token(
                "an HMAC-signed ID token needs a client secret",
            ));
        }
        return Ok(DecodingKey::from_secret(client_secret.as_bytes()));
    }
    let jwk = jwks
        .iter()
        .filter_map(|k| serde_json::from_value::<jsonwebtoken::jwk::Jwk>(k.clone()).ok())
        .find(|k| key_fits(k, alg, kid))
        .ok_or_else(|| SsoError::token(format!("no {alg:?} key in the provider's JWKS")))?;
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| SsoError::token_from("", e))?;
    if key.family() != alg.family() {
        return Err(SsoError::token(format!(
            "no {alg:?} key in the provider's JWKS"
        )));
    }
    Ok(key)
}

/// Talks to OIDC providers.
#[derive(Clone)]
pub struct OidcClient {
    http: ProviderClient,
    policy: ProviderPolicy,
    proxy_url: String,
}

impl std::fmt::Debug for OidcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcClient").finish_non_exhaustive()
    }
}

impl OidcClient {
    /// A client for providers reached directly, or through the HTTP proxy `proxy_url`
    /// (the project's `oidc.proxy_url`) when it is not empty, at the addresses `policy`
    /// allows.
    pub fn new(proxy_url: &str, policy: ProviderPolicy) -> Result<Self, SsoError> {
        Ok(OidcClient {
            http: ProviderClient::new(proxy_url, policy)?,
            policy,
            proxy_url: proxy_url.trim().to_string(),
        })
    }

    /// The issuer's discovery document, from the cache when it was fetched lately.
    async fn discovery_document(&self, issuer: &str) -> Result<Discovery, SsoError> {
        let key = (issuer.to_string(), self.proxy_url.clone());
        if let Ok(cache) = discovery_cache().lock()
            && let Some(cached) = cache.get(&key)
        {
            let ttl = if cached.found.is_ok() {
                DISCOVERY_TTL
            } else {
                DISCOVERY_FAILURE_TTL
            };
            if cached.at.elapsed() < ttl {
                return cached.found.clone().map_err(SsoError::provider);
            }
        }
        let url = format!("{issuer}/.well-known/openid-configuration");
        let found: Result<Discovery, SsoError> = self.get_json(&url).await;
        let remembered = match &found {
            Ok(d) => Ok(d.clone()),
            // Refused by the policy: not the provider's doing, nothing to remember.
            Err(SsoError::Config { .. }) => return found,
            Err(e) => Err(e.to_string()),
        };
        if let Ok(mut cache) = discovery_cache().lock() {
            if cache.len() >= MAX_CACHED_ISSUERS && !cache.contains_key(&key) {
                let oldest = cache
                    .iter()
                    .min_by_key(|(_, c)| c.at)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    cache.remove(&oldest);
                }
            }
            cache.insert(
                key,
                CachedDiscovery {
                    at: Instant::now(),
                    found: remembered,
                },
            );
        }
        found
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(&self, url: &str) -> Result<T, SsoError> {
        Ok(self.http.get_json(url, &[]).await?.1)
    }

    async fn discover(
        &self,
        oidc: &model::project_sso_config::Oidc,
    ) -> Result<Discovery, SsoError> {
        if oidc.issuer.is_empty() {
            return Err(SsoError::config("the project's OIDC issuer is not set"));
        }
        check_provider_url("issuer", &oidc.issuer, self.policy)?;
        let issuer = oidc.issuer.trim_end_matches('/');
        let mut discovery = self.discovery_document(issuer).await?;
        // Deviation: upstream takes whatever issuer the document names; a document that
        // names another one is refused (the ID token's issuer is checked against it).
        if discovery.issuer.trim_end_matches('/') != issuer {
            return Err(SsoError::provider(format!(
                "the discovery document names issuer {:?}, not the configured {issuer:?}",
                discovery.issuer
            )));
        }
        if !oidc.authorization_endpoint.is_empty() {
            discovery.authorization_endpoint = oidc.authorization_endpoint.clone();
        }
        if !oidc.token_endpoint.is_empty() {
            discovery.token_endpoint = oidc.token_endpoint.clone();
        }
        check_provider_url(
            "authorization endpoint",
            &discovery.authorization_endpoint,
            self.policy,
        )?;
        check_provider_url("token endpoint", &discovery.token_endpoint, self.policy)?;
        check_provider_url("JWKS address", &discovery.jwks_uri, self.policy)?;
        if !oidc.user_info_endpoint.is_empty() {
            discovery.userinfo_endpoint = Some(oidc.user_info_endpoint.clone());
        }
        discovery.userinfo_endpoint = discovery.userinfo_endpoint.filter(|u| !u.is_empty());
        if let Some(userinfo) = &discovery.userinfo_endpoint {
            check_provider_url("UserInfo endpoint", userinfo, self.policy)?;
        }
        Ok(discovery)
    }

    /// Where to send the browser: the provider's authorization endpoint.
    pub async fn authorization_url(
        &self,
        oidc: &model::project_sso_config::Oidc,
        client_id: &str,
        state: &SsoState,
    ) -> Result<String, SsoError> {
        let discovery = self.discover(oidc).await?;
        let mut scopes = vec!["openid".to_string()];
        scopes.extend(oidc.scopes.iter().filter(|s| *s != "openid").cloned());
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", &oidc.redirect_uri)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &state.id)
            .append_pair("nonce", &state.nonce)
            .append_pair("code_challenge", &state.code_challenge())
            .append_pair("code_challenge_method", "S256")
            .finish();
        let sep = if discovery.authorization_endpoint.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok(format!("{}{sep}{query}", discovery.authorization_endpoint))
    }

    /// Trades `code` for an ID token, verifies it, merges the UserInfo claims into it,
    /// and reads the user from them. `default_role_claims`: whether a project without a
    /// `roles_claim_key` reads [`DEFAULT_ROLE_CLAIMS`].
    pub async fn user(
        &self,
        oidc: &model::project_sso_config::Oidc,
        client: &Client<'_>,
        code: &str,
        state: &SsoState,
        project: &model::Project,
        default_role_claims: bool,
    ) -> Result<SsoUser, SsoError> {
        let discovery = self.discover(oidc).await?;
        let token = self.exchange(&discovery, oidc, client, code, state).await?;
        let mut claims = self
            .verify_id_token(&discovery, &token.id_token, client)
            .await?;
        // The token answers this login, not a replayed one.
        if claims.get("nonce").and_then(Value::as_str) != Some(state.nonce.as_str()) {
            return Err(SsoError::token("the ID token's nonce is not this login's"));
        }
        if let Some(userinfo) = &discovery.userinfo_endpoint {
            let extra = self.userinfo(userinfo, &token.access_token).await?;
            merge_userinfo(&mut claims, extra)?;
        }
        user_from_claims(&claims, oidc, project, default_role_claims)
    }

    /// The token endpoint's answer to `code`. The client authenticates with Basic first,
    /// as upstream; with the form when the provider says it takes only that, or refuses
    /// Basic and says it takes the form.
    async fn exchange(
        &self,
        discovery: &Discovery,
        oidc: &model::project_sso_config::Oidc,
        client: &Client<'_>,
        code: &str,
        state: &SsoState,
    ) -> Result<TokenResponse, SsoError> {
        let methods = discovery.token_endpoint_auth_methods_supported.as_deref();
        let takes = |m: &str| methods.is_some_and(|all| all.iter().any(|x| x == m));
        let first =
            if methods.is_some() && !takes("client_secret_basic") && takes("client_secret_post") {
                AuthStyle::Post
            } else {
                AuthStyle::Basic
            };
        let answer = match self
            .token_request(discovery, oidc, client, code, state, first)
            .await
        {
            Err(SsoError::Provider { message, .. })
                if first == AuthStyle::Basic
                    && takes("client_secret_post")
                    && (message.contains(": HTTP 400") || message.contains(": HTTP 401")) =>
            {
                tracing::info!(
                    "the token endpoint refused Basic client authentication ({message}); \
                     trying client_secret_post, which its discovery document names"
                );
                self.token_request(discovery, oidc, client, code, state, AuthStyle::Post)
                    .await?
            }
            other => other?,
        };
        serde_json::from_slice(&answer).map_err(|e| SsoError::provider_from("token response", e))
    }

    async fn token_request(
        &self,
        discovery: &Discovery,
        oidc: &model::project_sso_config::Oidc,
        client: &Client<'_>,
        code: &str,
        state: &SsoState,
        style: AuthStyle,
    ) -> Result<Bytes, SsoError> {
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", &oidc.redirect_uri)
                .append_pair("code_verifier", &state.code_verifier);
            if style == AuthStyle::Post {
                form.append_pair("client_id", client.id)
                    .append_pair("client_secret", client.secret);
            }
            form.finish()
        };
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(&discovery.token_endpoint)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json");
        if style == AuthStyle::Basic {
            // RFC 6749 2.3.1: the id and secret are form-encoded before Base64.
            use base64::Engine;
            let enc = |v: &str| form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
            let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                enc(client.id),
                enc(client.secret)
            ));
            req = req.header(header::AUTHORIZATION, format!("Basic {credentials}"));
        }
        let req = req
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| SsoError::config_from("token endpoint", e))?;
        Ok(self.http.call(req).await?.1)
    }

    /// The ID token's claims, once its signature, algorithm, audience, issuer and
    /// lifetime are checked.
    async fn verify_id_token(
        &self,
        discovery: &Discovery,
        id_token: &str,
        client: &Client<'_>,
    ) -> Result<Map<String, Value>, SsoError> {
        let header =
            jsonwebtoken::decode_header(id_token).map_err(|e| SsoError::token_from("", e))?;
        let accepted = accepted_algorithms(&discovery.id_token_signing_alg_values_supported);
        if !accepted.contains(&header.alg) {
            return Err(SsoError::token(format!(
                "the ID token is signed with {:?}, which the provider's discovery document does not advertise",
                header.alg
            )));
        }
        let jwks: Vec<Value> = if header.alg.family() == jsonwebtoken::AlgorithmFamily::Hmac {
            Vec::new()
        } else {
            self.get_json::<Jwks>(&discovery.jwks_uri).await?.keys
        };
        let key = decoding_key(header.alg, header.kid.as_deref(), &jwks, client.secret)?;
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[client.id]);
        validation.set_issuer(&[discovery.issuer.as_str()]);
        Ok(
            jsonwebtoken::decode::<Map<String, Value>>(id_token, &key, &validation)
                .map_err(|e| SsoError::token_from("", e))?
                .claims,
        )
    }

    /// The UserInfo endpoint's claims (a JSON answer; a signed one is refused).
    async fn userinfo(
        &self,
        url: &str,
        access_token: &str,
    ) -> Result<Map<String, Value>, SsoError> {
        if access_token.is_empty() {
            return Err(SsoError::provider(
                "the token endpoint gave no access token for the UserInfo endpoint",
            ));
        }
        let (_, claims) = self
            .http
            .get_json::<Map<String, Value>>(
                url,
                &[(header::AUTHORIZATION, format!("Bearer {access_token}"))],
            )
            .await?;
        Ok(claims)
    }
}

/// Adds the UserInfo claims to the ID token's. Its `sub` must be the ID token's
/// (OpenID Connect Core 5.3.2: else the answer is not about this user).
///
/// Deviation: upstream lets a UserInfo claim replace the ID token's of the same name;
/// here the ID token's wins. The ID token is signed and checked; a UserInfo answer
/// comes over TLS only, and its claims are often ones the user edits (a profile).
fn merge_userinfo(
    claims: &mut Map<String, Value>,
    userinfo: Map<String, Value>,
) -> Result<(), SsoError> {
    let sub = |m: &Map<String, Value>| m.get("sub").and_then(Value::as_str).map(str::to_string);
    match (sub(claims), sub(&userinfo)) {
        (Some(a), Some(b)) if a == b => {}
        _ => {
            return Err(SsoError::token(
                "the UserInfo answer's subject is not the ID token's",
            ));
        }
    }
    for (k, v) in userinfo {
        claims.entry(k).or_insert(v);
    }
    Ok(())
}

fn claim_strings(claims: &Map<String, Value>, key: &str) -> Vec<String> {
    match claims.get(key) {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => vec![],
    }
}

/// The user name, avatar and project roles the claims give. Roles come from the claim
/// the project names (`roles_claim_key`), else, as upstream, from every claim of
/// [`DEFAULT_ROLE_CLAIMS`] when `default_role_claims`: a value is a role when it names one
/// of the project's roles, or an SSO group the project maps to a role (`user_groups`).
/// With none, `allow_stray_as_viewer` makes the user a Viewer; otherwise the login is
/// refused.
///
/// Deviation: upstream accepts only the built-in role names as claim values and lets a
/// user in with no role at all when the claims name none of them; Wisp refuses such a
/// user (unless strays are Viewers).
///
/// Deviation: a project can opt out of the default claims (the config's
/// `oidcNoDefaultRoleClaims`), and then reads no role claim unless it names one. The
/// default list includes `custom:roles` and `custom:groups`, which the users of some
/// providers can write themselves (Cognito custom attributes are writable by the user
/// unless the app client says otherwise): such a project must name its claim or opt
/// out. The default stays upstream's, so that projects moved from upstream keep their
/// users.
pub fn user_from_claims(
    claims: &Map<String, Value>,
    oidc: &model::project_sso_config::Oidc,
    project: &model::Project,
    default_role_claims: bool,
) -> Result<SsoUser, SsoError> {
    let pick = |configured: &str, defaults: &[&str]| -> Vec<String> {
        if configured.is_empty() {
            defaults.iter().map(|s| s.to_string()).collect()
        } else {
            vec![configured.to_string()]
        }
    };
    let username = pick(&oidc.username_claim_key, &USERNAME_CLAIMS)
        .iter()
        .find_map(|k| claim_strings(claims, k).into_iter().next())
        .ok_or_else(|| SsoError::Denied("no user name in the identity token".into()))?;
    let avatar_url = pick(&oidc.avatar_url_claim_key, &AVATAR_CLAIMS)
        .iter()
        .find_map(|k| claim_strings(claims, k).into_iter().next())
        .unwrap_or_default();
    let values: Vec<String> = if !oidc.roles_claim_key.is_empty() {
        claim_strings(claims, &oidc.roles_claim_key)
    } else if default_role_claims {
        DEFAULT_ROLE_CLAIMS
            .iter()
            .flat_map(|k| claim_strings(claims, k))
            .collect()
    } else {
        Vec::new()
    };
    let Some(roles) = sso_roles(project, &values, true) else {
        return Err(SsoError::Denied(format!(
            "{username} has no role in project {}",
            project.id
        )));
    };
    Ok(SsoUser {
        username,
        avatar_url,
        roles,
        groups: values,
        role_names: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(groups: &[(&str, &str)], stray: bool) -> model::Project {
        model::Project {
            id: "p".into(),
            allow_stray_as_viewer: stray,
            rbac_roles: vec![model::ProjectRbacRole {
                name: "Deployer".into(),
                ..Default::default()
            }],
            user_groups: groups
                .iter()
                .map(|(g, r)| model::ProjectUserGroup {
                    sso_group: g.to_string(),
                    role: r.to_string(),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn groups_claim() -> model::project_sso_config::Oidc {
        model::project_sso_config::Oidc {
            roles_claim_key: "groups".into(),
            ..Default::default()
        }
    }

    /// Without a configured claim no claim gives roles, a user-writable one least of all.
    #[test]
    fn no_role_claim_is_read_unless_the_project_names_one() {
        let oidc = model::project_sso_config::Oidc::default();
        let claims = claims(serde_json::json!({
            "username": "mallory",
            "custom:roles": ["Admin"],
            "custom:groups": ["Admin"],
            "groups": ["Admin"],
        }));
        let refused = user_from_claims(&claims, &oidc, &project(&[], false), false);
        assert!(matches!(refused, Err(SsoError::Denied(_))));
        let viewer = user_from_claims(&claims, &oidc, &project(&[], true), false).unwrap();
        assert_eq!(viewer.roles, vec!["Viewer".to_string()]);
    }

    /// Without a configured claim, upstream's default claims are all read.
    #[test]
    fn default_role_claims_are_read_unless_the_project_opts_out() {
        let oidc = model::project_sso_config::Oidc::default();
        let claims = claims(serde_json::json!({
            "username": "ann",
            "roles": "Deployer",
            "cognito:groups": ["acme/ops"],
        }));
        let p = project(&[("acme/ops", "Editor")], false);
        let user = user_from_claims(&claims, &oidc, &p, true).unwrap();
        assert_eq!(
            user.roles,
            vec!["Deployer".to_string(), "Editor".to_string()]
        );
        assert!(matches!(
            user_from_claims(&claims, &oidc, &p, false),
            Err(SsoError::Denied(_))
        ));
        // A configured claim replaces the list.
        let named = model::project_sso_config::Oidc {
            roles_claim_key: "groups".into(),
            ..Default::default()
        };
        assert!(user_from_claims(&claims, &named, &p, true).is_err());
    }

    #[test]
    fn userinfo_adds_claims_the_id_token_lacks_for_the_same_subject_only() {
        let mut id = claims(serde_json::json!({"sub": "u1", "username": "ann"}));
        merge_userinfo(
            &mut id,
            claims(serde_json::json!({"sub": "u1", "username": "mallory", "groups": ["g"]})),
        )
        .unwrap();
        assert_eq!(id["username"], "ann");
        assert_eq!(id["groups"], serde_json::json!(["g"]));
        for other in [
            serde_json::json!({"sub": "u2", "groups": ["g"]}),
            serde_json::json!({"groups": ["g"]}),
        ] {
            let mut id = claims(serde_json::json!({"sub": "u1"}));
            assert!(merge_userinfo(&mut id, claims(other)).is_err());
            assert!(id.get("groups").is_none(), "nothing merged");
        }
    }

    #[test]
    fn algorithms_are_the_advertised_ones_jsonwebtoken_implements() {
        assert_eq!(accepted_algorithms(&[]), vec![Algorithm::RS256]);
        let advertised: Vec<String> = ["none", "RS256", "ES256", "ES512", "EdDSA", "HS256"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            accepted_algorithms(&advertised),
            vec![
                Algorithm::RS256,
                Algorithm::ES256,
                Algorithm::EdDSA,
                Algorithm::HS256
            ]
        );
    }

    fn rsa_jwk() -> Value {
        serde_json::json!({"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
            "n": "AQAB",
            "e": "AQAB"})
    }

    #[test]
    fn keys_are_chosen_by_the_algorithms_own_kind() {
        let jwks = vec![serde_json::json!({"kty": "unknown-kind"}), rsa_jwk()];
        // RSA algorithms: the RSA key, past a key jsonwebtoken cannot read.
        assert!(decoding_key(Algorithm::RS256, Some("k1"), &jwks, "s").is_ok());
        // Its `alg` names RS256: not a key for PS256.
        assert!(decoding_key(Algorithm::PS256, Some("k1"), &jwks, "s").is_err());
        // Another kid, or a kind of key the set lacks: none.
        assert!(decoding_key(Algorithm::RS256, Some("k2"), &jwks, "s").is_err());
        assert!(decoding_key(Algorithm::ES256, None, &jwks, "s").is_err());
        assert!(decoding_key(Algorithm::EdDSA, None, &jwks, "s").is_err());
        // HMAC: the client secret, never a key of the set; none without a secret.
        let key = decoding_key(Algorithm::HS256, Some("k1"), &jwks, "s").unwrap();
        assert_eq!(key.family(), jsonwebtoken::AlgorithmFamily::Hmac);
        assert!(decoding_key(Algorithm::HS256, None, &jwks, "").is_err());
    }

    #[test]
    fn providers_must_be_public_https_unless_the_operator_allows_private() {
        let strict = ProviderPolicy::default();
        let open = ProviderPolicy {
            allow_private: true,
        };
        for ok in [
            "https://idp.example.com",
            "https://idp.example.com/realms/x",
        ] {
            assert!(provider_url_allowed(ok, strict), "{ok}");
        }
        for private in [
            "http://127.0.0.1:8080",
            "http://localhost:9000/x",
            "http://[::1]:80",
            "https://169.254.169.254/latest",
            "https://10.0.0.1",
            "https://[fd00::1]",
        ] {
            assert!(!provider_url_allowed(private, strict), "{private}");
        }
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost:9000/x",
            "http://[::1]:80",
        ] {
            assert!(provider_url_allowed(ok, open), "{ok}");
        }
        for bad in [
            "http://idp.example.com",
            "http://169.254.169.254/latest",
            "http://10.0.0.1",
            "ftp://idp.example.com",
            "idp.example.com",
            "",
        ] {
            assert!(!provider_url_allowed(bad, strict), "{bad}");
            assert!(!provider_url_allowed(bad, open), "{bad}");
        }
    }

    #[test]
    fn roles_come_from_role_names_and_mapped_groups() {
        let oidc = groups_claim();
        let user = user_from_claims(
            &claims(serde_json::json!({
                "preferred_username": "ann",
                "picture": "https://example.com/ann.png",
                "groups": ["acme/ops", "Deployer", "unknown"],
            })),
            &oidc,
            &project(&[("acme/ops", "Editor")], false),
            false,
        )
        .expect("a user");
        assert_eq!(user.username, "ann");
        assert_eq!(user.avatar_url, "https://example.com/ann.png");
        assert_eq!(
            user.roles,
            vec!["Editor".to_string(), "Deployer".to_string()]
        );
    }

    #[test]
    fn legacy_team_settings_grant_built_in_roles() {
        let oidc = groups_claim();
        let mut p = project(&[], false);
        p.rbac = Some(model::ProjectRbacConfig {
            admin: "acme/admins".into(),
            editor: String::new(),
            viewer: "acme/all".into(),
        });
        let user = user_from_claims(
            &claims(serde_json::json!({"username": "dee", "groups": ["acme/all", "acme/admins"]})),
            &oidc,
            &p,
            false,
        )
        .expect("a user");
        assert_eq!(user.roles, vec!["Viewer".to_string(), "Admin".to_string()]);
        let empty_team = user_from_claims(
            &claims(serde_json::json!({"username": "eve", "groups": [""]})),
            &oidc,
            &p,
            false,
        );
        assert!(empty_team.is_err(), "an empty team name must match nobody");
    }

    #[test]
    fn strays_are_viewers_only_when_the_project_allows_it() {
        let oidc = groups_claim();
        let stray = claims(serde_json::json!({"username": "bob", "groups": ["elsewhere"]}));
        let user = user_from_claims(&stray, &oidc, &project(&[], true), false).expect("a viewer");
        assert_eq!(user.roles, vec!["Viewer".to_string()]);
        let refused = user_from_claims(&stray, &oidc, &project(&[], false), false);
        assert!(matches!(refused, Err(SsoError::Denied(m)) if m.contains("no role")));
    }

    #[test]
    fn configured_claim_keys_replace_the_defaults() {
        let oidc = model::project_sso_config::Oidc {
            username_claim_key: "email".into(),
            roles_claim_key: "wisp_roles".into(),
            ..Default::default()
        };
        let user = user_from_claims(
            &claims(serde_json::json!({
                "email": "c@example.com",
                "preferred_username": "ignored",
                "groups": ["Admin"],
                "wisp_roles": "Viewer",
            })),
            &oidc,
            &project(&[], false),
            false,
        )
        .expect("a user");
        assert_eq!(user.username, "c@example.com");
        assert_eq!(user.roles, vec!["Viewer".to_string()]);
        let nameless = user_from_claims(
            &claims(serde_json::json!({"wisp_roles": "Viewer"})),
            &oidc,
            &project(&[], false),
            false,
        );
        assert!(matches!(nameless, Err(SsoError::Denied(_))));
    }
}
