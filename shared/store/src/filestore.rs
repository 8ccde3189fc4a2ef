//! Object storage: stage logs, live state, shared objects, command outputs, insights.
//! Keys follow upstream's layout (see the domain stores).

use async_trait::async_trait;

use crate::error::Result;

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

#[async_trait]
pub trait Filestore: Send + Sync + 'static {
    /// `NotFound` when absent.
    async fn get(&self, path: &str) -> Result<Object>;
    /// Returns the new etag.
    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String>;
    /// Objects whose path starts with `prefix`, in path order.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage>;
    /// Deleting an absent object is not an error.
    async fn delete(&self, path: &str) -> Result<()>;
}
