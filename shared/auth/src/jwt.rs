//! Console sessions: the `token` cookie is a JWT (HS256, issuer `PipeCD`) signed with the
//! control plane's encryption key, in upstream's claim layout so that a token minted by
//! either side reads the same.

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::error::{AuthError, Reason, SourceError};

/// The cookie that carries the session token.
pub const SESSION_COOKIE: &str = "token";
/// The `iss` claim upstream writes and checks.
pub const ISSUER: &str = "PipeCD";
/// How long a console session lasts: a week, as upstream's token cookie.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// The longest a console session may last, whatever an SSO `sessionTtl` asks for, and the
/// furthest a token's expiry may lie ahead for it to be accepted. Deviation: upstream
/// takes any `sessionTtl`; Wisp caps it so that a logout is remembered (in the shared
/// revocations, `wisp_store::revocations::MAX_KEEP`) for as long as its token could work.
pub const MAX_SESSION_TTL: Duration = DEFAULT_SESSION_TTL;

/// A signed-in console user: who, and which project roles the token grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebCaller {
    /// The user name (static admin) or the SSO user's login.
    pub subject: String,
    pub avatar_url: String,
    pub project_id: String,
    /// Names of the project's RBAC roles (built-in `Admin`, `Editor`, `Viewer` or custom).
    pub roles: Vec<String>,
    /// The session's id (`jti`), which logout revokes; made when signing if empty.
    pub session_id: String,
    /// When the session ends (unix seconds; set by [`SessionSigner::verify`]).
    pub expires_at: u64,
    /// A static admin's session: [`static_admin_fingerprint`] of the password hash it
    /// logged in with (claim `wispAdmin`), so that a changed password ends it. Empty for
    /// SSO users.
    pub static_admin: String,
    /// An SSO user's session: the groups (teams, claim values) it logged in with, from
    /// which its roles are worked out again on every call (claim `wispSso`).
    pub sso: Option<SsoGroups>,
}

/// The groups an SSO login reported, kept in the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoGroups {
    pub groups: Vec<String>,
    /// Whether a value naming one of the project's roles gives that role (OpenID
    /// Connect's role claims) or only mapped groups count (GitHub teams).
    #[serde(default)]
    pub role_names: bool,
}

/// At most this many groups are kept in a session (the token is a cookie).
pub const MAX_SESSION_GROUPS: usize = 100;

/// What a static admin session remembers of the password it was opened with: a short
/// digest of the stored bcrypt hash (which never leaves the server; the digest reveals
/// nothing of the password and changes with every new hash).
pub fn static_admin_fingerprint(password_hash: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("wisp-static-admin\n{password_hash}").as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// The session id of a token that carries no `jti`: `sha256:` and the hex SHA-256 of the
/// whole token (one token, one id; the id reveals nothing of the token).
pub fn derived_session_id(token: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(token.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `model.Role` as upstream's JWT carries it (protobuf JSON names).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RoleClaim {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    project_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    project_rbac_roles: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    iss: String,
    iat: u64,
    nbf: u64,
    exp: u64,
    #[serde(
        rename = "avatarUrl",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    avatar_url: String,
    #[serde(default)]
    role: RoleClaim,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    jti: String,
    #[serde(
        rename = "wispAdmin",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    static_admin: String,
    #[serde(rename = "wispSso", default, skip_serializing_if = "Option::is_none")]
    sso: Option<SsoGroups>,
}

/// Signs and verifies session tokens with one HS256 key.
#[derive(Clone)]
pub struct SessionSigner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    ttl: Duration,
}

impl std::fmt::Debug for SessionSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches logs.
        f.debug_struct("SessionSigner")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl SessionSigner {
    /// `key` is the control plane's encryption key.
    pub fn new(key: &[u8]) -> Self {
        SessionSigner {
            encoding: EncodingKey::from_secret(key),
            decoding: DecodingKey::from_secret(key),
            ttl: DEFAULT_SESSION_TTL,
        }
    }

    /// Sessions lasting `ttl`, at most [`MAX_SESSION_TTL`].
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.min(MAX_SESSION_TTL);
        self
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A token for `caller`, valid from now for the signer's TTL.
    pub fn sign(&self, caller: &WebCaller) -> Result<String, AuthError> {
        self.sign_at(caller, now_secs())
    }

    fn sign_at(&self, caller: &WebCaller, now: u64) -> Result<String, AuthError> {
        let claims = Claims {
            sub: caller.subject.clone(),
            iss: ISSUER.to_string(),
            iat: now,
            nbf: now,
            exp: now + self.ttl.as_secs(),
            avatar_url: caller.avatar_url.clone(),
            role: RoleClaim {
                project_id: caller.project_id.clone(),
                project_rbac_roles: caller.roles.clone(),
            },
            jti: if caller.session_id.is_empty() {
                crate::keys::generate_random_string(24)
            } else {
                caller.session_id.clone()
            },
            static_admin: caller.static_admin.clone(),
            sso: caller.sso.clone().map(|mut sso| {
                sso.groups.truncate(MAX_SESSION_GROUPS);
                sso
            }),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| SourceError::caused_by("sign session token", e).into())
    }

    /// The caller a token names, if it is ours (HS256, issuer `PipeCD`), unexpired and
    /// names a project.
    pub fn verify(&self, token: &str) -> Result<WebCaller, AuthError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = 5;
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map_err(|e| Reason::InvalidSessionToken(e.kind_name()))?;
        let claims = data.claims;
        if claims.role.project_id.is_empty() {
            return Err(Reason::InvalidSessionToken("no project in role claim".into()).into());
        }
        // A token meant to outlive the longest session could outlive its logout's entry.
        if claims.exp > now_secs() + MAX_SESSION_TTL.as_secs() + validation.leeway {
            return Err(Reason::InvalidSessionToken("expiry too far ahead".into()).into());
        }
        Ok(WebCaller {
            subject: claims.sub,
            avatar_url: claims.avatar_url,
            project_id: claims.role.project_id,
            roles: claims.role.project_rbac_roles,
            // A token without `jti` (an older Wisp's, or upstream's) gets an id derived
            // from the token itself, so that logout revokes it like any other session.
            session_id: if claims.jti.is_empty() {
                derived_session_id(token)
            } else {
                claims.jti
            },
            expires_at: claims.exp,
            static_admin: claims.static_admin,
            sso: claims.sso,
        })
    }
}

trait KindName {
    fn kind_name(&self) -> String;
}

impl KindName for jsonwebtoken::errors::Error {
    fn kind_name(&self) -> String {
        use jsonwebtoken::errors::ErrorKind;
        match self.kind() {
            ErrorKind::ExpiredSignature => "expired".into(),
            ErrorKind::ImmatureSignature => "not yet valid".into(),
            ErrorKind::InvalidSignature => "bad signature".into(),
            ErrorKind::InvalidIssuer => "wrong issuer".into(),
            ErrorKind::InvalidAlgorithm => "wrong algorithm".into(),
            ErrorKind::MissingRequiredClaim(c) => format!("missing claim {c}"),
            _ => "malformed".into(),
        }
    }
}

/// The one clock's unix seconds, as JWT claims count them.
pub(crate) fn now_secs() -> u64 {
    u64::try_from(wisp_model::clock::now_unix()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> WebCaller {
        WebCaller {
            subject: "alice".into(),
            avatar_url: String::new(),
            project_id: "p1".into(),
            roles: vec!["Admin".into()],
            ..Default::default()
        }
    }

    /// A token without `jti` gets an id of its own, the same on every verification, so
    /// that logout can revoke it.
    #[test]
    fn a_token_without_jti_gets_a_derived_session_id() {
        let key = b"0123456789abcdef0123456789abcdef";
        let signer = SessionSigner::new(key);
        let mint = |sub: &str| {
            let claims = Claims {
                sub: sub.into(),
                iss: ISSUER.into(),
                iat: now_secs(),
                nbf: now_secs(),
                exp: now_secs() + 600,
                avatar_url: String::new(),
                role: RoleClaim {
                    project_id: "p1".into(),
                    project_rbac_roles: vec!["Admin".into()],
                },
                jti: String::new(),
                static_admin: String::new(),
                sso: None,
            };
            jsonwebtoken::encode(
                &Header::new(Algorithm::HS256),
                &claims,
                &EncodingKey::from_secret(key),
            )
            .unwrap()
        };
        let token = mint("alice");
        let first = signer.verify(&token).unwrap().session_id;
        assert_eq!(first, derived_session_id(&token));
        assert!(
            first.starts_with("sha256:") && first.len() == 7 + 64,
            "{first}"
        );
        assert_eq!(signer.verify(&token).unwrap().session_id, first);
        assert_ne!(signer.verify(&mint("bob")).unwrap().session_id, first);
    }

    #[test]
    fn round_trip_keeps_the_caller() {
        let signer = SessionSigner::new(b"0123456789abcdef0123456789abcdef");
        let admin = WebCaller {
            static_admin: static_admin_fingerprint("$2b$10$hash"),
            ..caller()
        };
        let token = signer.sign(&admin).expect("sign");
        let got = signer.verify(&token).expect("verify");
        assert_eq!(got.subject, admin.subject);
        assert_eq!(got.roles, admin.roles);
        assert_eq!(got.static_admin, admin.static_admin);
        assert_eq!(got.session_id.len(), 24, "a session id is made");
        assert!(got.expires_at > now_secs());
        // Each token its own id.
        let other = signer
            .verify(&signer.sign(&admin).expect("sign"))
            .expect("verify");
        assert_ne!(other.session_id, got.session_id);
        assert_ne!(
            static_admin_fingerprint("$2b$10$hash"),
            static_admin_fingerprint("$2b$10$other")
        );
    }

    #[test]
    fn another_key_is_refused() {
        let a = SessionSigner::new(b"key-a-key-a-key-a-key-a-key-a-ke");
        let b = SessionSigner::new(b"key-b-key-b-key-b-key-b-key-b-ke");
        let token = a.sign(&caller()).expect("sign");
        assert!(matches!(
            b.verify(&token),
            Err(AuthError::Unauthenticated(Reason::InvalidSessionToken(_)))
        ));
    }

    #[test]
    fn an_expired_token_is_refused() {
        let signer = SessionSigner::new(b"k").with_ttl(Duration::from_secs(60));
        let token = signer.sign_at(&caller(), now_secs() - 3600).expect("sign");
        let err = signer.verify(&token).expect_err("expired");
        assert_eq!(
            err.to_string(),
            "unauthenticated: invalid session token: expired"
        );
    }

    /// An SSO `sessionTtl` of a month gives a week; a token expiring further ahead than
    /// that (another signer's) is refused.
    #[test]
    fn sessions_last_at_most_the_cap() {
        let month = Duration::from_secs(30 * 24 * 3600);
        let signer = SessionSigner::new(b"k").with_ttl(month);
        assert_eq!(signer.ttl(), MAX_SESSION_TTL);
        assert!(
            signer
                .verify(&signer.sign(&caller()).expect("sign"))
                .is_ok()
        );
        let mut long = SessionSigner::new(b"k");
        long.ttl = month;
        let err = long
            .verify(&long.sign(&caller()).expect("sign"))
            .expect_err("too long");
        assert_eq!(
            err.to_string(),
            "unauthenticated: invalid session token: expiry too far ahead"
        );
    }

    #[test]
    fn garbage_is_refused() {
        let signer = SessionSigner::new(b"k");
        assert!(signer.verify("not.a.jwt").is_err());
        assert!(signer.verify("").is_err());
    }

    #[test]
    fn claims_use_upstream_names() {
        let signer = SessionSigner::new(b"k");
        let token = signer.sign(&caller()).expect("sign");
        let payload = token.split('.').nth(1).expect("payload");
        use base64::Engine;
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("base64");
        let v: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(v["iss"], "PipeCD");
        assert_eq!(v["sub"], "alice");
        assert_eq!(v["role"]["project_id"], "p1");
        assert_eq!(v["role"]["project_rbac_roles"][0], "Admin");
    }
}
