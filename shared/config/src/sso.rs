//! `spec.sharedSSOConfigs[]`: SSO settings any project can refer to by name
//! (`Project.shared_sso_name`).
//!
//! Upstream reads these with protobuf's JSON mapping, which accepts both the camelCase
//! names and the proto (snake_case) names, and `sessionTtl` (an int64, in hours) as a
//! number or a string. Wisp accepts the same.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::SecretString;

/// Session lifetime when `sessionTtl` is unset or zero: 7 days.
pub const DEFAULT_SSO_SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// `provider`: which identity provider a [`SharedSsoConfig`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SsoProvider {
    #[serde(rename = "GITHUB")]
    Github,
    #[serde(rename = "GOOGLE")]
    Google,
    #[serde(rename = "OIDC")]
    Oidc,
}

impl SsoProvider {
    /// The spelling used in YAML (and the proto enum name).
    pub const fn as_str(self) -> &'static str {
        match self {
            SsoProvider::Github => "GITHUB",
            SsoProvider::Google => "GOOGLE",
            SsoProvider::Oidc => "OIDC",
        }
    }
}

impl fmt::Display for SsoProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `spec.sharedSSOConfigs`. Mirrors `model.ProjectSSOConfig` plus `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharedSsoConfig {
    /// Unique name, referenced by projects.
    pub name: String,
    pub provider: SsoProvider,
    /// Session lifetime in hours; see [`SharedSsoConfig::session_ttl`].
    #[serde(
        default,
        alias = "session_ttl",
        deserialize_with = "hours",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_ttl: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubSsoConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub google: Option<GoogleSsoConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcSsoConfig>,
}

impl SharedSsoConfig {
    /// The session lifetime: `sessionTtl` hours, or 7 days when unset or zero.
    pub fn session_ttl(&self) -> Duration {
        match self.session_ttl {
            Some(h) if h > 0 => Duration::from_secs(h.saturating_mul(3600)),
            _ => DEFAULT_SSO_SESSION_TTL,
        }
    }

    pub(crate) fn problems(&self, at: &str, out: &mut Vec<String>) {
        let mut need = |ok: bool, what: &str| {
            if !ok {
                out.push(format!("{at}: {what}"));
            }
        };
        let filled = |s: &str| !s.trim().is_empty();
        match self.provider {
            SsoProvider::Github => match &self.github {
                None => need(false, "provider GITHUB requires a `github` section"),
                Some(g) => {
                    need(filled(&g.client_id), "github.clientId is required");
                    need(
                        filled(g.client_secret.expose()),
                        "github.clientSecret is required",
                    );
                }
            },
            SsoProvider::Google => match &self.google {
                None => need(false, "provider GOOGLE requires a `google` section"),
                Some(g) => {
                    need(filled(&g.client_id), "google.clientId is required");
                    need(
                        filled(g.client_secret.expose()),
                        "google.clientSecret is required",
                    );
                }
            },
            SsoProvider::Oidc => match &self.oidc {
                None => need(false, "provider OIDC requires an `oidc` section"),
                Some(o) => {
                    need(filled(&o.client_id), "oidc.clientId is required");
                    need(
                        filled(o.client_secret.expose()),
                        "oidc.clientSecret is required",
                    );
                    need(filled(&o.issuer), "oidc.issuer is required");
                }
            },
        }
    }
}

/// GitHub OAuth app settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GithubSsoConfig {
    #[serde(alias = "client_id")]
    pub client_id: String,
    #[serde(alias = "client_secret")]
    pub client_secret: SecretString,
    /// GitHub Enterprise address.
    #[serde(alias = "base_url", skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(alias = "upload_url", skip_serializing_if = "Option::is_none")]
    pub upload_url: Option<String>,
    #[serde(alias = "proxy_url", skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
}

/// Google OAuth app settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GoogleSsoConfig {
    #[serde(alias = "client_id")]
    pub client_id: String,
    #[serde(alias = "client_secret")]
    pub client_secret: SecretString,
}

/// OpenID Connect settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OidcSsoConfig {
    #[serde(alias = "client_id")]
    pub client_id: String,
    #[serde(alias = "client_secret")]
    pub client_secret: SecretString,
    /// Issuer URL, used for discovery.
    pub issuer: String,
    #[serde(alias = "redirect_uri", skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    #[serde(
        alias = "authorization_endpoint",
        skip_serializing_if = "Option::is_none"
    )]
    pub authorization_endpoint: Option<String>,
    #[serde(alias = "token_endpoint", skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    #[serde(alias = "user_info_endpoint", skip_serializing_if = "Option::is_none")]
    pub user_info_endpoint: Option<String>,
    #[serde(alias = "proxy_url", skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Scopes to request; empty means the provider default (`openid`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    #[serde(alias = "roles_claim_key", skip_serializing_if = "Option::is_none")]
    pub roles_claim_key: Option<String>,
    #[serde(alias = "username_claim_key", skip_serializing_if = "Option::is_none")]
    pub username_claim_key: Option<String>,
    #[serde(
        alias = "avatar_url_claim_key",
        skip_serializing_if = "Option::is_none"
    )]
    pub avatar_url_claim_key: Option<String>,
}

/// `sessionTtl`: hours as a number or a decimal string (protobuf JSON int64); null = unset.
fn hours<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct HoursVisitor;

    impl<'de> Visitor<'de> for HoursVisitor {
        type Value = Option<u64>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a non-negative number of hours")
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            u64::try_from(v)
                .map(Some)
                .map_err(|_| E::custom(format!("sessionTtl must not be negative, got {v}")))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            v.trim()
                .parse::<i64>()
                .map_err(|_| {
                    E::custom(format!(
                        "sessionTtl must be a whole number of hours, got {v:?}"
                    ))
                })
                .and_then(|n| self.visit_i64(n))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    d.deserialize_any(HoursVisitor)
}
