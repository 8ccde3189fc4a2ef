//! Login throttling: failed static-admin logins are counted in the cache (shared by the
//! instances when it is Redis) per project, user name and source address, and per source
//! address alone. Past [`MAX_FAILED_LOGINS`] for a (project, user, source) within
//! [`FAILED_LOGIN_WINDOW`], or [`MAX_FAILED_LOGINS_PER_SOURCE`] for a source, further
//! attempts from that source are refused without checking the password. A success clears
//! the (project, user, source) count.
//!
//! Keyed by source, a guesser locks out only itself: the project's admin still logs in
//! from elsewhere (issue 33: keyed by project and user alone, one request per window from
//! anyone kept the admin out). The per-source count bounds what one source can try across
//! projects and fresh user names. What the source is, and when a proxy's
//! `X-Forwarded-For` is believed, is the console's to say. Counting is read-then-write:
//! two instances failing at the same instant may count one failure once, which only
//! loosens the bound slightly.

use std::time::Duration;

use super::WebApi;

/// Failed logins allowed per project, user name and source per window.
pub const MAX_FAILED_LOGINS: u32 = 10;
/// Failed logins allowed per source (whatever the project and user name) per window.
pub const MAX_FAILED_LOGINS_PER_SOURCE: u32 = 50;
/// How long failed logins are remembered (from the last one).
pub const FAILED_LOGIN_WINDOW: Duration = Duration::from_secs(15 * 60);

/// A cache key from parts, each escaped so that no part can imitate the separator.
pub fn cache_key(prefix: &str, parts: &[&str]) -> String {
    let mut key = prefix.to_string();
    for part in parts {
        key.push(':');
        key.push_str(&wisp_store::escape_part(part, ':'));
    }
    key
}

fn failures_key(project_id: &str, username: &str, source: &str) -> String {
    cache_key("wisp-failed-logins", &[project_id, username, source])
}

fn source_failures_key(source: &str) -> String {
    cache_key("wisp-failed-logins-from", &[source])
}

/// The failed logins a login attempt is judged by, as [`WebApi::failed_logins`] read them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailedLogins {
    /// Of this project and user name from this source.
    pub user: u32,
    /// From this source, whatever the project and user name.
    pub source: u32,
}

impl FailedLogins {
    /// Whether the attempt is refused without a password check.
    pub fn too_many(&self) -> bool {
        self.user >= MAX_FAILED_LOGINS || self.source >= MAX_FAILED_LOGINS_PER_SOURCE
    }
}

impl WebApi {
    async fn count(&self, key: &str) -> u32 {
        match self.stores.cache.get(key).await {
            Ok(Some(raw)) => std::str::from_utf8(&raw)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            Ok(None) => 0,
            Err(e) => {
                tracing::warn!(error = %wisp_store::error::chain(&e), "login throttling: cache unreadable");
                0
            }
        }
    }

    async fn set_count(&self, key: &str, count: u32) {
        if let Err(e) = self
            .stores
            .cache
            .put(
                key,
                count.to_string().into_bytes(),
                Some(FAILED_LOGIN_WINDOW),
            )
            .await
        {
            tracing::warn!(error = %wisp_store::error::chain(&e), "login throttling: cache unwritable");
        }
    }

    /// Failed logins of `username` to `project_id` from `source`, and from `source` in
    /// all, in the current window.
    pub async fn failed_logins(
        &self,
        project_id: &str,
        username: &str,
        source: &str,
    ) -> FailedLogins {
        let (user_key, source_key) = (
            failures_key(project_id, username, source),
            source_failures_key(source),
        );
        let (user, source) = tokio::join!(self.count(&user_key), self.count(&source_key));
        FailedLogins { user, source }
    }

    /// Counts one more failed login after the `before` that [`WebApi::failed_logins`]
    /// read.
    pub async fn record_failed_login(
        &self,
        project_id: &str,
        username: &str,
        source: &str,
        before: FailedLogins,
    ) {
        let user = before.user.saturating_add(1);
        let from = before.source.saturating_add(1);
        let (user_key, source_key) = (
            failures_key(project_id, username, source),
            source_failures_key(source),
        );
        tokio::join!(
            self.set_count(&user_key, user),
            self.set_count(&source_key, from),
        );
        if user == MAX_FAILED_LOGINS || from == MAX_FAILED_LOGINS_PER_SOURCE {
            tracing::warn!(
                project = %project_id,
                source = %source,
                "too many failed logins from one source; refusing its logins for {} min",
                FAILED_LOGIN_WINDOW.as_secs() / 60
            );
        }
    }

    /// Forgets the failed logins of a user who logged in from `source`.
    pub async fn clear_failed_logins(&self, project_id: &str, username: &str, source: &str) {
        let _ = self
            .stores
            .cache
            .delete(&failures_key(project_id, username, source))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::cache_key;

    #[test]
    fn key_parts_cannot_forge_the_separator() {
        assert_eq!(cache_key("k", &["a", "b"]), "k:a:b");
        assert_ne!(cache_key("k", &["a:b", "c"]), cache_key("k", &["a", "b:c"]));
        assert_eq!(cache_key("k", &["50%:x"]), "k:50%25%3Ax");
    }
}
