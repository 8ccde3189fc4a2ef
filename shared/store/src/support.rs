//! Helpers shared by the domain stores: object-path segments, JSON documents, and cache
//! calls whose failures are logged and swallowed (the cache is never the only copy).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::Cache;
use crate::error::{Result, StoreError};

/// How long the TTL caches keep an entry (upstream's `spec.cache.ttl` default).
pub const CACHE_TTL: Duration = Duration::from_secs(5 * 60);

/// Refuses a value that would not stay one path segment under its prefix: empty, `.`,
/// or containing `..`, `/`, `\` or NUL.
/// `part` with `%` and `sep` percent-escaped, so that parts joined with `sep` split back
/// one way only ("a:b" + "c" and "a" + "b:c" stay two keys). Borrowed when there is
/// nothing to escape: ordinary ids and names keep the keys they always had.
pub fn escape_part(part: &str, sep: char) -> std::borrow::Cow<'_, str> {
    if !part.contains(['%', sep]) {
        return std::borrow::Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len() + 6);
    for c in part.chars() {
        if c == '%' || c == sep {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

pub(crate) fn check_segment(what: &str, value: &str) -> Result<()> {
    let bad = value.is_empty()
        || value == "."
        || value.contains("..")
        || value.contains(['/', '\\', '\0']);
    if bad {
        return Err(StoreError::InvalidArgument(format!(
            "invalid {what}: {value:?}"
        )));
    }
    Ok(())
}

pub(crate) fn to_json<T: Serialize>(what: &str, value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| StoreError::internal_from(format!("encoding {what}"), e))
}

pub(crate) fn from_json<T: DeserializeOwned>(what: &str, data: &[u8]) -> Result<T> {
    serde_json::from_slice(data)
        .map_err(|e| StoreError::internal_from(format!("corrupt {what}"), e))
}

/// `None` on a miss and on any cache error (logged).
pub(crate) async fn cache_get(cache: &dyn Cache, key: &str) -> Option<Vec<u8>> {
    match cache.get(key).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(key, error = %crate::error::chain(&e), "cache get failed; reading the store");
            None
        }
    }
}

/// Best effort: a failure is logged and otherwise ignored. Returns whether it worked.
pub(crate) async fn cache_put(
    cache: &dyn Cache,
    key: &str,
    value: Vec<u8>,
    ttl: Option<Duration>,
) -> bool {
    match cache.put(key, value, ttl).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(key, error = %crate::error::chain(&e), "cache put failed; ignored");
            false
        }
    }
}

/// `None` on a miss and on any cache error (logged).
pub(crate) async fn cache_hash_get(cache: &dyn Cache, key: &str, field: &str) -> Option<Vec<u8>> {
    match cache.hash_get(key, field).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(key, field, error = %crate::error::chain(&e), "cache hash get failed; reading the store");
            None
        }
    }
}

/// Best effort: a failure is logged and ignored.
pub(crate) async fn cache_hash_set(cache: &dyn Cache, key: &str, field: &str, value: Vec<u8>) {
    if let Err(e) = cache.hash_set(key, field, value).await {
        tracing::warn!(key, field, error = %crate::error::chain(&e), "cache hash set failed; ignored");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments() {
        for ok in ["a", "app-1", "x.y", ".a"] {
            assert!(check_segment("key", ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "..a", "a..b", "a/b", "/a", "a\\b", "a\0"] {
            assert!(check_segment("key", bad).is_err(), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod escape_tests {
    use super::escape_part;

    #[test]
    fn joined_parts_cannot_be_forged() {
        let join = |a: &str, b: &str| format!("{}#{}", escape_part(a, '#'), escape_part(b, '#'));
        assert_eq!(join("p", "app"), "p#app");
        assert_ne!(join("a#b", "c"), join("a", "b#c"));
        assert_ne!(join("a%23b", "c"), join("a#b", "c"));
        assert_eq!(escape_part("50%:x", ':'), "50%25%3Ax");
    }
}
