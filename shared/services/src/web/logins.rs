//! Login throttling: failed static-admin logins are counted per project and user name in
//! the cache (shared by the instances when it is Redis), and past
//! [`MAX_FAILED_LOGINS`] within [`FAILED_LOGIN_WINDOW`] further attempts are refused
//! without checking the password. A success clears the count.
//!
//! This bounds password guessing (and the bcrypt work each guess costs) at the price of
//! letting a guesser keep the account's owner out for the window; the owner can still
//! reset the password with `wisp project reset-password`, which clears nothing but does
//! not need the console. Counting is read-then-write: two instances failing at the same
//! instant may count one failure once, which only loosens the bound slightly.

use std::time::Duration;

use super::WebApi;

/// Failed logins allowed per project and user name per window.
pub const MAX_FAILED_LOGINS: u32 = 10;
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

fn failures_key(project_id: &str, username: &str) -> String {
    cache_key("wisp-failed-logins", &[project_id, username])
}

impl WebApi {
    /// Failed logins of `username` to `project_id` in the current window; at
    /// [`MAX_FAILED_LOGINS`] its logins are refused.
    pub async fn failed_logins(&self, project_id: &str, username: &str) -> u32 {
        match self
            .stores
            .cache
            .get(&failures_key(project_id, username))
            .await
        {
            Ok(Some(raw)) => std::str::from_utf8(&raw)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            Ok(None) => 0,
            Err(e) => {
                tracing::warn!(error = %e, "login throttling: cache unreadable");
                0
            }
        }
    }

    /// Counts one more failed login after the `before` that [`WebApi::failed_logins`]
    /// read.
    pub async fn record_failed_login(&self, project_id: &str, username: &str, before: u32) {
        let failed = before.saturating_add(1);
        let key = failures_key(project_id, username);
        if let Err(e) = self
            .stores
            .cache
            .put(
                &key,
                failed.to_string().into_bytes(),
                Some(FAILED_LOGIN_WINDOW),
            )
            .await
        {
            tracing::warn!(error = %e, "login throttling: cache unwritable");
        }
        if failed == MAX_FAILED_LOGINS {
            tracing::warn!(
                project = %project_id,
                "{MAX_FAILED_LOGINS} failed logins in a row; refusing this user's logins for {} min",
                FAILED_LOGIN_WINDOW.as_secs() / 60
            );
        }
    }

    /// Forgets the failed logins of a user who logged in.
    pub async fn clear_failed_logins(&self, project_id: &str, username: &str) {
        let _ = self
            .stores
            .cache
            .delete(&failures_key(project_id, username))
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
