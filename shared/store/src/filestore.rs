//! Object storage: stage logs, live state, shared objects, command outputs, insights.
//! Keys follow upstream's layout (see the domain stores).

use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::error::{Result, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub data: Vec<u8>,
    /// Opaque content version, for conditional writes.
    pub etag: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectAttrs {
    pub path: String,
    pub size: u64,
    pub etag: String,
    /// Unix seconds of the last write.
    pub updated_at: i64,
}

#[derive(Debug, Clone, Default)]
pub struct ListPage {
    pub objects: Vec<ObjectAttrs>,
    /// Resume token; `None` on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCondition {
    /// Unconditional overwrite.
    Any,
    /// Only if no object exists at the path (`AlreadyExists` otherwise).
    Absent,
    /// Only if the current object's etag equals this (`Conflict` otherwise, `NotFound`
    /// when absent).
    Matches(String),
}

/// How a backend that serves objects itself (S3, through presigned URLs) answers for an
/// object: set when it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    pub content_type: Option<String>,
    pub cache_control: Option<String>,
}

/// What a presigned download URL grants: who holds it may GET one object until it expires,
/// without credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedGet {
    /// When the signature becomes valid. The same time (and credentials) give the same
    /// URL, so rounding it down lets browsers cache what the URL points at.
    pub signed_at: SystemTime,
    /// How long after `signed_at` the URL works.
    pub expires_in: Duration,
    /// The `Content-Type` to answer with, whatever the object was stored with.
    pub content_type: Option<String>,
    /// The `Cache-Control` to answer with.
    pub cache_control: Option<String>,
}

#[async_trait]
pub trait Filestore: Send + Sync + 'static {
    /// `NotFound` when absent.
    async fn get(&self, path: &str) -> Result<Object>;
    /// Returns the new etag.
    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String>;
    /// [`Filestore::put`], recording `meta` where the backend serves objects itself;
    /// backends that never do ignore it.
    async fn put_with_meta(
        &self,
        path: &str,
        data: Vec<u8>,
        condition: PutCondition,
        meta: &ObjectMeta,
    ) -> Result<String> {
        let _ = meta;
        self.put(path, data, condition).await
    }
    /// Objects whose path starts with `prefix`, in path order.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage>;
    /// Deleting an absent object is not an error.
    async fn delete(&self, path: &str) -> Result<()>;
    /// A URL from which anyone may download the object as `request` says, for objects
    /// too large to pass through the caller (the console's files behind the load
    /// balancer). `Ok(None)`: this backend has no such URLs. Does not check that the
    /// object exists.
    async fn presigned_get(&self, path: &str, request: &PresignedGet) -> Result<Option<String>> {
        let _ = request;
        validate_path(path)?;
        Ok(None)
    }
}

/// Object names may not have a segment starting with this: the local filestore uses it
/// for its temporary files. Every backend refuses it, so that any object can move between
/// backends (`wisp migrate`).
pub const RESERVED_SEGMENT_PREFIX: &str = ".wisp-tmp.";

/// The object-path rules every backend applies: rejects paths that are empty, absolute,
/// contain backslashes, NULs, empty, `.` or `..` segments, or use the reserved prefix.
pub fn validate_path(path: &str) -> Result<()> {
    let invalid = |why: &str| {
        Err(StoreError::InvalidArgument(format!(
            "object path {path:?}: {why}"
        )))
    };
    if path.is_empty() {
        return invalid("empty");
    }
    if path.starts_with('/') {
        return invalid("absolute");
    }
    if path.contains('\\') {
        return invalid("contains a backslash");
    }
    if path.contains('\0') {
        return invalid("contains NUL");
    }
    for segment in path.split('/') {
        match segment {
            "" => return invalid("empty segment"),
            "." | ".." => return invalid("relative segment"),
            s if s.starts_with(RESERVED_SEGMENT_PREFIX) => return invalid("reserved name"),
            _ => {}
        }
    }
    Ok(())
}

/// A list prefix may be empty or end mid-segment, but must not climb out of the root.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Ok(());
    }
    let invalid = |why: &str| {
        Err(StoreError::InvalidArgument(format!(
            "prefix {prefix:?}: {why}"
        )))
    };
    if prefix.starts_with('/') {
        return invalid("absolute");
    }
    if prefix.contains('\\') || prefix.contains('\0') {
        return invalid("contains a backslash or NUL");
    }
    let mut segments: Vec<&str> = prefix.split('/').collect();
    segments.pop(); // the last, possibly partial, segment only filters names
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return invalid("empty or relative segment");
    }
    Ok(())
}
