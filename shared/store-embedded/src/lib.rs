//! Embedded store backends for single-node Wisp: a SQLite `Datastore` in one file, a
//! `Filestore` in a directory (its objects in a SQLite file there), a read-only
//! `Filestore` over a directory of files (an upstream filestore to import), and a bounded
//! in-process `Cache`.
//!
//! The in-process cache lives in `wisp-store` (`wisp_store::memory_cache`), so that the
//! AWS backends can fall back on it without linking SQLite; it is re-exported here.

mod db;
pub mod directory;
pub mod filestore;
mod private_fs;
pub mod sqlite;

pub use wisp_store::memory_cache as cache;

pub use cache::MemoryCache;
pub use directory::DirectoryFilestore;
pub use filestore::LocalFilestore;
pub use sqlite::SqliteDatastore;
