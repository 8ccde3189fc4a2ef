//! Embedded store backends for single-node Wisp: a SQLite `Datastore` in one file, a
//! `Filestore` over a local directory, and a bounded in-process `Cache`.

pub mod cache;
pub mod filestore;
pub mod sqlite;

pub use cache::MemoryCache;
pub use filestore::LocalFilestore;
pub use sqlite::SqliteDatastore;
