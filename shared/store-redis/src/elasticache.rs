//! Finding the cache through the ElastiCache API: the config names a replication group or
//! a serverless cache by id, and at init (once per instance, not per request) Wisp reads
//! its endpoint, TLS, auth mode and status with `DescribeReplicationGroups` /
//! `DescribeServerlessCaches` (and `DescribeUsers` for IAM auth).
//!
//! A cache Wisp cannot use — not available yet, TLS off, an auth mode other than the one
//! configured — or a lookup the role may not make (the IAM action to grant) is a
//! one-line error naming the cause and the fix, rather than Redis timeouts on every call
//! later.

use std::fmt;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_elasticache::Client;
use aws_sdk_elasticache::config::http::HttpResponse;
use aws_sdk_elasticache::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_elasticache::types::{AuthenticationType, ReplicationGroup, ServerlessCache};

/// How Wisp is configured to authenticate to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// No AUTH at all.
    None,
    /// A fixed AUTH token (ElastiCache `AuthToken`, no user groups).
    Token,
    /// An ElastiCache user with IAM auth; Wisp signs its own tokens.
    Iam,
}

impl fmt::Display for AuthMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthMode::None => "no AUTH",
            AuthMode::Token => "an AUTH token",
            AuthMode::Iam => "IAM auth",
        })
    }
}

/// What to look up.
#[derive(Debug, Clone)]
pub struct Lookup {
    /// Replication group id or serverless cache name.
    pub cache_id: String,
    /// `cache_id` names a serverless cache.
    pub serverless: bool,
    /// The auth mode the config asks for.
    pub auth: AuthMode,
    /// The ElastiCache user id (IAM auth).
    pub username: Option<String>,
    /// Region override (else the SDK's default chain).
    pub region: Option<String>,
    /// ElastiCache API endpoint override (tests).
    pub endpoint: Option<String>,
}

/// The cache as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundCache {
    pub cache_id: String,
    pub serverless: bool,
    pub address: String,
    pub port: u16,
    pub tls: bool,
    /// What ElastiCache says about auth, in words (`IAM user wisp-app`, `AUTH token`…).
    pub auth: String,
    pub status: String,
    /// The region the cache is in (IAM tokens are signed for it).
    pub region: String,
}

impl FoundCache {
    /// `rediss://address:port` (or `redis://` without TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{}:{}", self.address, self.port)
    }
}

impl fmt::Display for FoundCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.serverless {
            "serverless cache"
        } else {
            "replication group"
        };
        write!(
            f,
            "ElastiCache {kind} {} at {}:{} (TLS {}, {}, {})",
            self.cache_id,
            self.address,
            self.port,
            if self.tls { "on" } else { "off" },
            self.auth,
            self.status
        )
    }
}

/// Why the cache cannot be used. Each message is one line: the cause, then the fix.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error(
        "no ElastiCache {kind} {id} in {region}: check cache.config.cacheId and region \
         (a serverless cache needs serverless: true)"
    )]
    NotFound {
        kind: &'static str,
        id: String,
        region: String,
    },
    #[error(
        "ElastiCache {kind} {id} is {status}, not available: wait until it is available \
         (or fix it in the console) and start Wisp again"
    )]
    NotAvailable {
        kind: &'static str,
        id: String,
        status: String,
    },
    #[error(
        "ElastiCache {kind} {id} has in-transit encryption off: Wisp connects with TLS \
         only; enable TransitEncryptionEnabled on the cache"
    )]
    TlsOff { kind: &'static str, id: String },
    #[error("ElastiCache {kind} {id} uses {found}, but Wisp is configured for {wanted}: {fix}")]
    AuthMismatch {
        kind: &'static str,
        id: String,
        found: String,
        wanted: AuthMode,
        fix: &'static str,
    },
    /// The role lacks the permission for one of the lookup's calls: the message names
    /// the IAM action to grant.
    #[error(
        "ElastiCache {kind} {id}: {operation} was refused (AccessDenied): grant \
         elasticache:{operation} on {resource} to this function's role (the IaC grants it \
         to the functions that use the cache)"
    )]
    AccessDenied {
        kind: &'static str,
        id: String,
        operation: &'static str,
        resource: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("ElastiCache {kind} {id}: {what}")]
    Api {
        kind: &'static str,
        id: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl DiscoveryError {
    /// Whether trying again later may help (the API could not be reached, or the cache
    /// is still being made).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            DiscoveryError::Api { .. } | DiscoveryError::NotAvailable { .. }
        )
    }
}

fn kind(serverless: bool) -> &'static str {
    if serverless {
        "serverless cache"
    } else {
        "replication group"
    }
}

/// Whether the API refused a call for want of a permission (AWS answers `AccessDenied`
/// with 403; a stand-in may send only the status).
fn access_denied<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> bool {
    matches!(e.code(), Some("AccessDenied" | "AccessDeniedException"))
        || e.raw_response().is_some_and(|r| r.status().as_u16() == 403)
}

/// The SDK configuration `lookup` asks for (region and endpoint overrides applied).
pub async fn sdk_config(lookup: &Lookup) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = lookup.region.clone().filter(|r| !r.is_empty()) {
        loader = loader.region(Region::new(region));
    }
    if let Some(endpoint) = lookup.endpoint.clone().filter(|e| !e.is_empty()) {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

/// Reads the cache `lookup` names and checks Wisp can use it as configured.
pub async fn discover(lookup: &Lookup, config: &SdkConfig) -> Result<FoundCache, DiscoveryError> {
    let client = Client::new(config);
    let region = config
        .region()
        .map_or_else(|| "the default region".to_string(), ToString::to_string);
    let k = kind(lookup.serverless);
    let id = lookup.cache_id.as_str();
    let denied =
        |operation: &'static str, resource: String, e: Box<dyn std::error::Error + Send + Sync>| {
            DiscoveryError::AccessDenied {
                kind: k,
                id: id.to_string(),
                operation,
                resource,
                source: e,
            }
        };
    let api = |what: &str, e: Box<dyn std::error::Error + Send + Sync>| DiscoveryError::Api {
        kind: k,
        id: id.to_string(),
        what: what.to_string(),
        source: e,
    };
    let not_found = || DiscoveryError::NotFound {
        kind: k,
        id: id.to_string(),
        region: region.clone(),
    };
    let mut found = if lookup.serverless {
        let out = client
            .describe_serverless_caches()
            .serverless_cache_name(id)
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e) if e.code() == Some("ServerlessCacheNotFoundFault") => return Err(not_found()),
            Err(e) if access_denied(&e) => {
                return Err(denied(
                    "DescribeServerlessCaches",
                    format!("the serverless cache {id}"),
                    Box::new(e),
                ));
            }
            Err(e) => return Err(api("DescribeServerlessCaches", Box::new(e))),
        };
        let Some(cache) = out.serverless_caches().first() else {
            return Err(not_found());
        };
        check_serverless(lookup, cache)?
    } else {
        let out = client
            .describe_replication_groups()
            .replication_group_id(id)
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e) if e.code() == Some("ReplicationGroupNotFoundFault") => return Err(not_found()),
            Err(e) if access_denied(&e) => {
                return Err(denied(
                    "DescribeReplicationGroups",
                    format!("the replication group {id}"),
                    Box::new(e),
                ));
            }
            Err(e) => return Err(api("DescribeReplicationGroups", Box::new(e))),
        };
        let Some(group) = out.replication_groups().first() else {
            return Err(not_found());
        };
        check_replication_group(lookup, group)?
    };
    found.region = region.clone();
    if lookup.auth == AuthMode::Iam {
        let user = lookup.username.clone().unwrap_or_default();
        let out = client.describe_users().user_id(&user).send().await;
        let user_auth = match out {
            Ok(out) => out
                .users()
                .first()
                .and_then(|u| u.authentication())
                .and_then(|a| a.r#type())
                .cloned(),
            Err(e) if e.code() == Some("UserNotFound") => None,
            Err(e) if access_denied(&e) => {
                return Err(denied(
                    "DescribeUsers",
                    format!("the user {user}"),
                    Box::new(e),
                ));
            }
            Err(e) => return Err(api("DescribeUsers", Box::new(e))),
        };
        match user_auth {
            Some(AuthenticationType::Iam) => {}
            other => {
                let found_what = match other {
                    None => format!("no ElastiCache user {user}"),
                    Some(t) => format!("user {user} with {} auth", t.as_str()),
                };
                return Err(DiscoveryError::AuthMismatch {
                    kind: k,
                    id: id.to_string(),
                    found: found_what,
                    wanted: AuthMode::Iam,
                    fix: "create the user with --authentication-mode Type=iam (its user id \
                          and name equal) and add it to the cache's user group",
                });
            }
        }
        found.auth = format!("IAM user {user}");
    }
    Ok(found)
}

/// The endpoint and state of a replication group, if Wisp can use it as `lookup` says.
pub fn check_replication_group(
    lookup: &Lookup,
    group: &ReplicationGroup,
) -> Result<FoundCache, DiscoveryError> {
    let k = kind(false);
    let id = lookup.cache_id.clone();
    let status = group.status().unwrap_or("in an unknown state").to_string();
    if status != "available" {
        return Err(DiscoveryError::NotAvailable {
            kind: k,
            id,
            status,
        });
    }
    if group.transit_encryption_enabled() != Some(true) {
        return Err(DiscoveryError::TlsOff { kind: k, id });
    }
    let user_groups = !group.user_group_ids().is_empty();
    let token = group.auth_token_enabled() == Some(true);
    let found = if user_groups {
        "RBAC user groups"
    } else if token {
        "an AUTH token"
    } else {
        "no AUTH"
    };
    let fix = match (lookup.auth, user_groups, token) {
        (AuthMode::Iam, true, _)
        | (AuthMode::Token, false, true)
        | (AuthMode::None, false, false) => None,
        (AuthMode::Iam, false, _) => Some(
            "add a user group with an IAM-auth user to the cache, or configure its AUTH \
             token instead of iamAuth",
        ),
        (_, true, _) => Some("set iamAuth: true and username to the cache's IAM-auth user"),
        (AuthMode::Token, false, false) => Some("remove authToken from the cache config"),
        (AuthMode::None, false, true) => {
            Some("set authTokenFile (or authToken) to the cache's AUTH token")
        }
    };
    if let Some(fix) = fix {
        return Err(DiscoveryError::AuthMismatch {
            kind: k,
            id,
            found: found.to_string(),
            wanted: lookup.auth,
            fix,
        });
    }
    // Cluster mode on: the configuration endpoint; off: the primary's.
    let endpoint = group.configuration_endpoint().or_else(|| {
        group
            .node_groups()
            .first()
            .and_then(|n| n.primary_endpoint())
    });
    let (address, port) = endpoint
        .and_then(|e| Some((e.address()?.to_string(), e.port()?)))
        .ok_or_else(|| DiscoveryError::NotAvailable {
            kind: k,
            id: id.clone(),
            status: "without an endpoint".into(),
        })?;
    Ok(FoundCache {
        cache_id: id,
        serverless: false,
        address,
        port: u16::try_from(port).unwrap_or(6379),
        tls: true,
        auth: found.to_string(),
        status,
        region: String::new(),
    })
}

/// The endpoint and state of a serverless cache (always TLS), if Wisp can use it.
pub fn check_serverless(
    lookup: &Lookup,
    cache: &ServerlessCache,
) -> Result<FoundCache, DiscoveryError> {
    let k = kind(true);
    let id = lookup.cache_id.clone();
    let status = cache.status().unwrap_or("in an unknown state").to_string();
    if status != "available" {
        return Err(DiscoveryError::NotAvailable {
            kind: k,
            id,
            status,
        });
    }
    let user_group = cache.user_group_id().is_some_and(|g| !g.is_empty());
    // A serverless cache has either a user group (RBAC / IAM) or no AUTH at all.
    let fix = match (lookup.auth, user_group) {
        (AuthMode::Iam, true) | (AuthMode::None, false) => None,
        (AuthMode::Iam, false) => Some("give the cache a user group with an IAM-auth user"),
        (AuthMode::Token, _) => {
            Some("serverless caches take no AUTH token: use iamAuth with an IAM-auth user")
        }
        (AuthMode::None, true) => {
            Some("set iamAuth: true and username to the cache's IAM-auth user")
        }
    };
    let found = if user_group {
        "RBAC user groups"
    } else {
        "no AUTH"
    };
    if let Some(fix) = fix {
        return Err(DiscoveryError::AuthMismatch {
            kind: k,
            id,
            found: found.to_string(),
            wanted: lookup.auth,
            fix,
        });
    }
    let (address, port) = cache
        .endpoint()
        .and_then(|e| Some((e.address()?.to_string(), e.port()?)))
        .ok_or_else(|| DiscoveryError::NotAvailable {
            kind: k,
            id: id.clone(),
            status: "without an endpoint".into(),
        })?;
    Ok(FoundCache {
        cache_id: id,
        serverless: true,
        address,
        port: u16::try_from(port).unwrap_or(6379),
        tls: true,
        auth: found.to_string(),
        status,
        region: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_elasticache::types::{Endpoint, NodeGroup};

    fn lookup(auth: AuthMode) -> Lookup {
        Lookup {
            cache_id: "wisp-cache".into(),
            serverless: false,
            auth,
            username: Some("wisp-app".into()),
            region: None,
            endpoint: None,
        }
    }

    fn group(status: &str, tls: bool, token: bool, user_group: bool) -> ReplicationGroup {
        let mut b = ReplicationGroup::builder()
            .replication_group_id("wisp-cache")
            .status(status)
            .transit_encryption_enabled(tls)
            .auth_token_enabled(token)
            .node_groups(
                NodeGroup::builder()
                    .primary_endpoint(
                        Endpoint::builder()
                            .address("master.wisp-cache.abc.euw1.cache.amazonaws.com")
                            .port(6379)
                            .build(),
                    )
                    .build(),
            );
        if user_group {
            b = b.user_group_ids("wisp-users");
        }
        b.build()
    }

    // The states moto cannot make (it creates every group `available`).
    #[test]
    fn a_cache_still_being_made_is_a_clear_error() {
        let err = check_replication_group(
            &lookup(AuthMode::Iam),
            &group("creating", true, false, true),
        )
        .expect_err("creating");
        assert!(matches!(err, DiscoveryError::NotAvailable { .. }), "{err}");
        assert!(
            err.to_string().contains("is creating, not available"),
            "{err}"
        );
        assert!(err.is_transient());
        let serverless = ServerlessCache::builder()
            .serverless_cache_name("wisp-cache")
            .status("modifying")
            .build();
        let err = check_serverless(&lookup(AuthMode::Iam), &serverless).expect_err("modifying");
        assert!(
            err.to_string().contains("is modifying, not available"),
            "{err}"
        );
    }

    #[test]
    fn serverless_caches_are_tls_with_user_groups() {
        let cache = ServerlessCache::builder()
            .serverless_cache_name("wisp-cache")
            .status("available")
            .user_group_id("wisp-users")
            .endpoint(
                Endpoint::builder()
                    .address("wisp-cache-abc.serverless.euw1.cache.amazonaws.com")
                    .port(6379)
                    .build(),
            )
            .build();
        let found = check_serverless(&lookup(AuthMode::Iam), &cache).expect("usable");
        assert_eq!(
            found.url(),
            "rediss://wisp-cache-abc.serverless.euw1.cache.amazonaws.com:6379"
        );
        let err = check_serverless(&lookup(AuthMode::Token), &cache).expect_err("token");
        assert!(err.to_string().contains("take no AUTH token"), "{err}");
    }

    #[test]
    fn each_mismatch_names_its_fix() {
        let ok = check_replication_group(
            &lookup(AuthMode::Token),
            &group("available", true, true, false),
        )
        .expect("token group");
        assert_eq!(
            ok.url(),
            "rediss://master.wisp-cache.abc.euw1.cache.amazonaws.com:6379"
        );
        let err = check_replication_group(
            &lookup(AuthMode::Iam),
            &group("available", true, true, false),
        )
        .expect_err("iam on a token group");
        assert!(
            err.to_string()
                .contains("uses an AUTH token, but Wisp is configured for IAM auth"),
            "{err}"
        );
        let err = check_replication_group(
            &lookup(AuthMode::Iam),
            &group("available", false, false, true),
        )
        .expect_err("tls off");
        assert!(matches!(err, DiscoveryError::TlsOff { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
    }
}
