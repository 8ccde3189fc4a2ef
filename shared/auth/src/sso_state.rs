//! The state of one SSO login, between `POST /auth/login` and the provider's redirect to
//! `/auth/callback`: its own token type, never a session.
//!
//! The browser keeps a signed ticket in an HttpOnly cookie; the provider sees only the
//! ticket's random id (the OAuth `state`). The ticket is signed with a key derived from
//! the control plane's key for this purpose alone, with an issuer of its own, so a session
//! check refuses it and it refuses a session. It carries the OpenID Connect `nonce` and
//! the PKCE `code_verifier`, expires after [`SSO_STATE_TTL`], and the callback consumes it
//! once (the caller records the id as used).

use std::time::Duration;

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{AuthError, Reason, SourceError};
use crate::keys::generate_random_string;

/// How long a login may take from the form to the callback.
pub const SSO_STATE_TTL: Duration = Duration::from_secs(10 * 60);
/// The ticket's issuer; sessions carry `PipeCD`.
const ISSUER: &str = "wisp-sso-state";

/// What the callback needs to finish a login.
#[derive(Clone, PartialEq, Eq)]
pub struct SsoState {
    /// The OAuth `state` the provider carries back.
    pub id: String,
    pub project_id: String,
    /// The OpenID Connect `nonce` the ID token must carry.
    pub nonce: String,
    /// PKCE: the secret whose SHA-256 the authorization request sends.
    pub code_verifier: String,
}

impl std::fmt::Debug for SsoState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsoState")
            .field("id", &self.id)
            .field("project_id", &self.project_id)
            .finish_non_exhaustive()
    }
}

impl SsoState {
    /// PKCE `code_challenge` (method `S256`).
    pub fn code_challenge(&self) -> String {
        let digest = Sha256::digest(self.code_verifier.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    }
}

#[derive(Serialize, Deserialize)]
struct Claims {
    iss: String,
    exp: u64,
    sid: String,
    prj: String,
    nonce: String,
    pkce: String,
}

/// Makes and opens SSO state tickets.
#[derive(Clone)]
pub struct SsoStateSigner {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for SsoStateSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SsoStateSigner(<key redacted>)")
    }
}

impl SsoStateSigner {
    /// A signer whose key is derived from `key` (the control plane's key) for SSO states
    /// only.
    pub fn new(key: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"wisp sso state v1\n");
        hasher.update(key);
        let derived = hasher.finalize();
        SsoStateSigner {
            encoding: EncodingKey::from_secret(&derived),
            decoding: DecodingKey::from_secret(&derived),
        }
    }

    /// A new login of `project_id`: its state, and the ticket for the cookie.
    pub fn start(&self, project_id: &str) -> Result<(SsoState, String), AuthError> {
        let state = SsoState {
            id: generate_random_string(32),
            project_id: project_id.to_string(),
            nonce: generate_random_string(32),
            code_verifier: generate_random_string(64),
        };
        let claims = Claims {
            iss: ISSUER.to_string(),
            exp: crate::jwt::now_secs() + SSO_STATE_TTL.as_secs(),
            sid: state.id.clone(),
            prj: state.project_id.clone(),
            nonce: state.nonce.clone(),
            pkce: state.code_verifier.clone(),
        };
        let ticket = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| AuthError::from(SourceError::caused_by("sign SSO state", e)))?;
        Ok((state, ticket))
    }

    /// The state in `ticket`, if it is one of ours, unexpired, and its id is `state_id`
    /// (the `state` the provider sent back).
    pub fn open(&self, ticket: &str, state_id: &str) -> Result<SsoState, AuthError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.leeway = 5;
        let claims = jsonwebtoken::decode::<Claims>(ticket, &self.decoding, &validation)
            .map_err(|e| Reason::InvalidSessionToken(format!("SSO state: {e}")))?
            .claims;
        if claims.sid.is_empty() || claims.sid != state_id {
            return Err(
                Reason::InvalidSessionToken("SSO state does not match the ticket".into()).into(),
            );
        }
        Ok(SsoState {
            id: claims.sid,
            project_id: claims.prj,
            nonce: claims.nonce,
            code_verifier: claims.pkce,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SessionSigner, WebCaller};

    #[test]
    fn a_ticket_opens_only_with_its_own_state_and_never_as_a_session() {
        let key = [7u8; 32];
        let states = SsoStateSigner::new(&key);
        let (state, ticket) = states.start("p").unwrap();
        assert_eq!(states.open(&ticket, &state.id).unwrap(), state);
        assert!(states.open(&ticket, "another").is_err());
        assert!(state.code_verifier.len() >= 43 && state.nonce.len() >= 32);
        assert_eq!(state.code_challenge().len(), 43);

        // A session signer with the same key refuses the ticket, and the other way round.
        let sessions = SessionSigner::new(&key);
        assert!(sessions.verify(&ticket).is_err());
        let session = sessions
            .sign(&WebCaller {
                subject: "admin".into(),
                project_id: "p".into(),
                ..Default::default()
            })
            .unwrap();
        assert!(states.open(&session, "").is_err());
        // Another key's tickets are refused.
        let (other_state, other) = SsoStateSigner::new(&[8u8; 32]).start("p").unwrap();
        assert!(states.open(&other, &other_state.id).is_err());
    }
}
