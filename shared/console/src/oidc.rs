//! OpenID Connect login (upstream's `pkg/oauth/oidc`): `POST /auth/login` sends the browser
//! to the provider with the login's `state`, a `nonce` and a PKCE challenge;
//! `GET /auth/callback` trades the code (with the PKCE verifier) for an ID token, checks it
//! against the provider's keys, its issuer and the nonce, and maps the project's role
//! claim to the project's roles.
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
}

#[derive(Deserialize)]
struct TokenResponse {
    id_token: String,
}

#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

#[derive(Deserialize)]
struct Jwk {
    #[serde(default)]
    kid: String,
    #[serde(default)]
    kty: String,
    #[serde(default)]
    n: String,
    #[serde(default)]
    e: String,
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

    /// Trades `code` for an ID token, verifies it, and reads the user from it.
    pub async fn user(
        &self,
        oidc: &model::project_sso_config::Oidc,
        client_id: &str,
        client_secret: &str,
        code: &str,
        state: &SsoState,
        project: &model::Project,
    ) -> Result<SsoUser, SsoError> {
        let discovery = self.discover(oidc).await?;
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", &oidc.redirect_uri)
            .append_pair("client_id", client_id)
            .append_pair("client_secret", client_secret)
            .append_pair("code_verifier", &state.code_verifier)
            .finish();
        let req = Request::builder()
            .method(Method::POST)
            .uri(&discovery.token_endpoint)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| SsoError::config_from("token endpoint", e))?;
        let (_, body) = self.http.call(req).await?;
        let token: TokenResponse = serde_json::from_slice(&body)
            .map_err(|e| SsoError::provider_from("token response", e))?;

        let header = jsonwebtoken::decode_header(&token.id_token)
            .map_err(|e| SsoError::token_from("", e))?;
        if header.alg != Algorithm::RS256 {
            return Err(SsoError::token(format!(
                "unsupported algorithm {:?}",
                header.alg
            )));
        }
        let jwks: Jwks = self.get_json(&discovery.jwks_uri).await?;
        let jwk = jwks
            .keys
            .iter()
            .filter(|k| k.kty == "RSA")
            .find(|k| header.kid.as_deref().is_none_or(|kid| kid == k.kid))
            .ok_or_else(|| SsoError::token("no matching key in the provider's JWKS"))?;
        let key = DecodingKey::from_rsa_components(&jwk.n, &jwk.e)
            .map_err(|e| SsoError::token_from("", e))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_audience(&[client_id]);
        validation.set_issuer(&[discovery.issuer.as_str()]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(&token.id_token, &key, &validation)
            .map_err(|e| SsoError::token_from("", e))?
            .claims;
        // The token answers this login, not a replayed one.
        if claims.get("nonce").and_then(Value::as_str) != Some(state.nonce.as_str()) {
            return Err(SsoError::token("the ID token's nonce is not this login's"));
        }
        user_from_claims(&claims, oidc, project)
    }
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

/// The user name, avatar and project roles the claims give. Roles come from the one claim
/// the project names (`roles_claim_key`): a value is a role when it names one of the
/// project's roles, or an SSO group the project maps to a role (`user_groups`). With
/// none, `allow_stray_as_viewer` makes the user a Viewer; otherwise the login is refused.
///
/// Deviation: upstream accepts only the built-in role names as claim values and lets a
/// user in with no role at all when the claim names none of them; and without a
/// configured claim it reads a default list that includes `custom:roles` and
/// `custom:groups`, which users of some providers (Cognito) can edit themselves. Wisp
/// reads no role claim unless the project names one.
pub fn user_from_claims(
    claims: &Map<String, Value>,
    oidc: &model::project_sso_config::Oidc,
    project: &model::Project,
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
    let values: Vec<String> = if oidc.roles_claim_key.is_empty() {
        Vec::new()
    } else {
        claim_strings(claims, &oidc.roles_claim_key)
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
        let refused = user_from_claims(&claims, &oidc, &project(&[], false));
        assert!(matches!(refused, Err(SsoError::Denied(_))));
        let viewer = user_from_claims(&claims, &oidc, &project(&[], true)).unwrap();
        assert_eq!(viewer.roles, vec!["Viewer".to_string()]);
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
        )
        .expect("a user");
        assert_eq!(user.roles, vec!["Viewer".to_string(), "Admin".to_string()]);
        let empty_team = user_from_claims(
            &claims(serde_json::json!({"username": "eve", "groups": [""]})),
            &oidc,
            &p,
        );
        assert!(empty_team.is_err(), "an empty team name must match nobody");
    }

    #[test]
    fn strays_are_viewers_only_when_the_project_allows_it() {
        let oidc = groups_claim();
        let stray = claims(serde_json::json!({"username": "bob", "groups": ["elsewhere"]}));
        let user = user_from_claims(&stray, &oidc, &project(&[], true)).expect("a viewer");
        assert_eq!(user.roles, vec!["Viewer".to_string()]);
        let refused = user_from_claims(&stray, &oidc, &project(&[], false));
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
        )
        .expect("a user");
        assert_eq!(user.username, "c@example.com");
        assert_eq!(user.roles, vec!["Viewer".to_string()]);
        let nameless = user_from_claims(
            &claims(serde_json::json!({"wisp_roles": "Viewer"})),
            &oidc,
            &project(&[], false),
        );
        assert!(matches!(nameless, Err(SsoError::Denied(_))));
    }
}
