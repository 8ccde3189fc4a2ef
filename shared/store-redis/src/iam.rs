//! ElastiCache IAM authentication: Wisp signs its own short-lived AUTH token.
//!
//! With an ElastiCache user set to IAM auth, the password is a SigV4 query presign of
//! `GET http://<cache-name>/?Action=connect&User=<user-id>` (plus
//! `&ResourceType=ServerlessCache` for a serverless cache), service `elasticache`, valid
//! for 15 minutes, without the `http://` scheme — as AWS documents for ElastiCache IAM
//! auth. No long-lived token secret exists in this mode.
//!
//! [`IamAuth`] is handed to the Redis client as a streaming credentials provider: every
//! new connection signs a fresh token, and each live connection re-authenticates
//! (`AUTH <user> <token>`) with a new one every [`IamAuth::refresh_every`], well before
//! the old one expires, so calls never meet an expired token.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use futures::Stream;
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use redis::{ErrorKind, RedisError, RedisResult};
use wisp_store::error::{Result, StoreError};

/// How long a signed token is valid (the most ElastiCache accepts).
pub const TOKEN_VALIDITY: Duration = Duration::from_secs(900);
/// Default for [`IamAuth::refresh_every`]: a third of the validity left as margin.
pub const REFRESH_EVERY: Duration = Duration::from_secs(600);

/// The signing service name ElastiCache checks.
const SERVICE: &str = "elasticache";

/// What an IAM auth token is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenTarget {
    /// The replication group id or serverless cache name (lower case, as ElastiCache
    /// stores it).
    pub cache_name: String,
    /// The ElastiCache user id (also its user name for IAM-auth users).
    pub user_id: String,
    /// `true` for an ElastiCache Serverless cache.
    pub serverless: bool,
    /// The cache's region.
    pub region: String,
}

/// Where the time used in signatures comes from; the wall clock except in tests.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// IAM authentication for [`crate::RedisCacheOptions::iam`].
#[derive(Clone)]
pub struct IamAuth {
    pub target: TokenTarget,
    /// AWS credentials of the role that holds `elasticache:Connect`.
    pub credentials: SharedCredentialsProvider,
    /// How often a live connection re-authenticates with a new token.
    pub refresh_every: Duration,
    pub clock: Clock,
}

impl IamAuth {
    pub fn new(target: TokenTarget, credentials: SharedCredentialsProvider) -> Self {
        IamAuth {
            target,
            credentials,
            refresh_every: REFRESH_EVERY,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// A token signed now with the current credentials.
    pub async fn token(&self) -> Result<String> {
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| StoreError::unavailable_from("ElastiCache IAM auth credentials", e))?;
        sign_token(&self.target, &credentials, (self.clock)())
    }
}

impl fmt::Debug for IamAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IamAuth")
            .field("target", &self.target)
            .field("refresh_every", &self.refresh_every)
            .finish_non_exhaustive()
    }
}

/// Cache names and user ids are letters, digits and hyphens in ElastiCache; anything
/// else would need escaping and is surely a typo.
fn check_name(what: &str, value: &str) -> Result<()> {
    if value.is_empty()
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(StoreError::InvalidArgument(format!(
            "ElastiCache IAM auth: {what} {value:?} must be letters, digits and hyphens"
        )));
    }
    Ok(())
}

/// Signs the ElastiCache IAM auth token for `target` at `now`.
pub fn sign_token(
    target: &TokenTarget,
    credentials: &Credentials,
    now: SystemTime,
) -> Result<String> {
    check_name("cache name", &target.cache_name)?;
    check_name("user id", &target.user_id)?;
    let mut url = format!(
        "http://{}/?Action=connect&User={}",
        target.cache_name, target.user_id
    );
    if target.serverless {
        url.push_str("&ResourceType=ServerlessCache");
    }
    let failed = |e: &dyn fmt::Display| {
        StoreError::InvalidArgument(format!("ElastiCache IAM auth token: {e}"))
    };
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_VALIDITY);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&target.region)
        .name(SERVICE)
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let signable = SignableRequest::new(
        "GET",
        url.as_str(),
        std::iter::empty(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| failed(&e))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| failed(&e))?
        .into_parts();
    let mut request = http::Request::builder()
        .method("GET")
        .uri(url.as_str())
        .body(())
        .map_err(|e| failed(&e))?;
    instructions.apply_to_request_http1x(&mut request);
    let signed = request.uri().to_string();
    Ok(signed
        .strip_prefix("http://")
        .map_or(signed.clone(), str::to_string))
}

impl StreamingCredentialsProvider for IamAuth {
    /// A fresh token at once (for a new connection), then a new one every
    /// `refresh_every` (for the live connection to re-authenticate).
    fn subscribe(&self) -> Pin<Box<dyn Stream<Item = RedisResult<BasicAuth>> + Send + 'static>> {
        let auth = self.clone();
        let stream = futures::stream::unfold(true, move |first| {
            let auth = auth.clone();
            async move {
                if !first {
                    tokio::time::sleep(auth.refresh_every).await;
                }
                let item = match auth.token().await {
                    Ok(token) => Ok(BasicAuth::new(auth.target.user_id.clone(), token)),
                    Err(e) => {
                        tracing::warn!(error = %e, "signing an ElastiCache IAM auth token");
                        Err(RedisError::from((
                            ErrorKind::AuthenticationFailed,
                            "signing an ElastiCache IAM auth token",
                            e.to_string(),
                        )))
                    }
                };
                Some((item, false))
            }
        });
        Box::pin(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_21_40() -> SystemTime {
        // 2026-11-26T21:40:00Z
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_729_200)
    }

    fn target(serverless: bool) -> TokenTarget {
        TokenTarget {
            cache_name: "wisp-cache".into(),
            user_id: "wisp-app".into(),
            serverless,
            region: "eu-west-1".into(),
        }
    }

    // The expected tokens were produced independently by botocore 1.43.11's
    // `SigV4QueryAuth(credentials, "elasticache", "eu-west-1", expires=900)` on
    // `AWSRequest("GET", "http://wisp-cache/", params={"Action": "connect", "User":
    // "wisp-app"[, "ResourceType": "ServerlessCache"]})`, with
    // `botocore.auth.get_current_datetime` patched to 2026-11-26T21:40:00Z, and the
    // `http://` prefix removed from the prepared URL.
    #[test]
    fn tokens_match_botocore() {
        let plain = Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            None,
            "test",
        );
        assert_eq!(
            sign_token(&target(false), &plain, at_21_40()).expect("signs"),
            "wisp-cache/?Action=connect&User=wisp-app&X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=AKIDEXAMPLE%2F20261126%2Feu-west-1%2Felasticache%2Faws4_request\
             &X-Amz-Date=20261126T214000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host\
             &X-Amz-Signature=7d3128a0c867ed77653139afac7738525fa36c49cefb08b85e27e474b76b9d25"
        );
        let session = Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("FwoGZXIvYXdzEXAMPLE/session+token=".into()),
            None,
            "test",
        );
        // aws-sigv4 appends the security token after the signature, botocore before it;
        // the server reads a query string, so compare the parameters in order of name.
        let params = |token: &str| {
            let (host, query) = token.split_once("/?").expect("host/?query");
            let mut params: Vec<String> = query.split('&').map(str::to_string).collect();
            params.sort();
            (host.to_string(), params)
        };
        assert_eq!(
            params(&sign_token(&target(true), &session, at_21_40()).expect("signs")),
            params(
                "wisp-cache/?Action=connect&User=wisp-app&ResourceType=ServerlessCache\
             &X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=AKIDEXAMPLE%2F20261126%2Feu-west-1%2Felasticache%2Faws4_request\
             &X-Amz-Date=20261126T214000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host\
             &X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLE%2Fsession%2Btoken%3D\
             &X-Amz-Signature=2d8474cf867494da356ee0a4356025f7bff2b89d1eef3a8ca205f41affb3142c"
            )
        );
    }

    #[test]
    fn odd_names_are_refused() {
        let creds = Credentials::new("a", "b", None, None, "test");
        for (cache, user) in [("wisp cache", "u"), ("c", "u&x=1"), ("", "u")] {
            let t = TokenTarget {
                cache_name: cache.into(),
                user_id: user.into(),
                ..target(false)
            };
            let err = sign_token(&t, &creds, at_21_40()).expect_err(cache);
            assert!(matches!(err, StoreError::InvalidArgument(_)), "{err:?}");
        }
    }
}
