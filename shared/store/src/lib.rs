//! Store traits — datastore, filestore, cache — and everything built on them that does
//! not depend on a backend: typed collections, domain stores, the conformance suite.

pub mod cache;
pub mod collection;
pub mod content;
pub mod cursor;
// A test suite for the backends' tests: it asserts by panicking.
#[cfg(feature = "conformance")]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub mod conformance;
pub mod datastore;
pub mod entities;
pub mod error;
pub mod filestore;
pub mod memory_cache;
pub mod metered;
pub mod migrate;
mod optimistic;
pub mod projects;

// Domain stores built on the traits.
pub mod analysis;
pub mod audit;
pub mod commandoutput;
pub mod insight;
pub mod livestate;
pub mod pipedstat;
pub mod polls;
pub mod revocations;
pub mod sharedobject;
pub mod stagelog;
pub mod stores;
mod support;
pub mod unregistered;

pub use cache::Cache;
pub use collection::{Collection, Entity, EntityPage, ListOptions};
pub use datastore::{Datastore, INDEX_SLOTS, IndexKey, Kind, Page, Query, Record};
pub use error::StoreError;
pub use filestore::{
    Filestore, ListPage, Object, ObjectAttrs, ObjectMeta, PresignedGet, PutCondition,
};
pub use memory_cache::MemoryCache;
pub use stores::Stores;
pub use support::escape_part;
