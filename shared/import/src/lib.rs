//! Reading an upstream PipeCD control plane's state, for `wisp import pipecd`.
//!
//! Upstream's MySQL datastore keeps one table per kind (`Project`, `Application`,
//! `Command`, `Deployment`, `Piped`, `APIKey`, `Event`, `DeploymentChain`,
//! `DeploymentTrace`), each row an `Id` (the entity's UUID as `BINARY(16)`) and a `Data`
//! JSON document: the model message as Go's `encoding/json` writes it (the proto's field
//! names, enums as numbers, empty fields left out) plus an `_extra` field. Columns beyond
//! those two are generated from `Data` and differ between upstream versions; only `Id`
//! and `Data` are read.
//!
//! [`UpstreamMysql`] is such a datastore seen as a read-only [`Datastore`] whose `scan`
//! turns each row into the record Wisp stores for the entity (its own index entries),
//! so that the copying, resuming and counting of `wisp migrate`
//! ([`wisp_store::migrate`]) do the import. Upstream's filestore needs no translation:
//! Wisp keeps the same paths and formats (stage logs, live states, command outputs,
//! insights, shared objects, analysis results). Both are read through [`guard`], which
//! leaves out what a dump must not change on Wisp's side.

pub mod convert;
pub mod dsn;
pub mod guard;
pub mod sso;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use wisp_store::datastore::{Datastore, Kind, Page, Query, Record};
use wisp_store::error::{Result as StoreResult, StoreError};

/// Why the import cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}")]
    Config(String),
    /// The MySQL driver's error is the source (its Display names no password: the pool
    /// is built from options, not a URL).
    #[error("cannot reach the upstream MySQL datastore")]
    Connect(#[source] mysql_async::Error),
}

/// Upstream's table for `kind`; `None` for what only Wisp keeps (piped stats and
/// unregistered applications live in upstream's cache, not its datastore).
pub fn upstream_table(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::PipedStat | Kind::UnregisteredApps => None,
        other => Some(other.as_str()),
    }
}

/// An upstream MySQL datastore, read page by page in `Id` order.
pub struct UpstreamMysql {
    pool: mysql_async::Pool,
}

impl std::fmt::Debug for UpstreamMysql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamMysql").finish_non_exhaustive()
    }
}

impl UpstreamMysql {
    /// Connects to the datastore `config` names and checks that it answers.
    pub async fn connect(config: &wisp_config::MySqlConfig) -> Result<Self, ImportError> {
        let pool = mysql_async::Pool::new(dsn::options(config)?);
        let mut conn = pool.get_conn().await.map_err(ImportError::Connect)?;
        conn.ping().await.map_err(ImportError::Connect)?;
        Ok(UpstreamMysql { pool })
    }

    /// Closes the connections.
    pub async fn disconnect(self) {
        let _ = self.pool.disconnect().await;
    }
}

/// MySQL's error for a table that does not exist.
const ER_NO_SUCH_TABLE: u16 = 1146;

fn read_only() -> StoreError {
    StoreError::FailedPrecondition("the upstream datastore is only read".into())
}

fn unavailable(table: &str, e: mysql_async::Error) -> StoreError {
    StoreError::unavailable_from(format!("upstream table {table}"), e)
}

#[async_trait]
impl Datastore for UpstreamMysql {
    async fn get(&self, _kind: Kind, _id: &str) -> StoreResult<Record> {
        Err(read_only())
    }

    async fn create(&self, _kind: Kind, _record: Record) -> StoreResult<()> {
        Err(read_only())
    }

    async fn put(&self, _kind: Kind, _record: Record, _expected_version: u64) -> StoreResult<()> {
        Err(read_only())
    }

    async fn delete(&self, _kind: Kind, _id: &str, _expected_version: u64) -> StoreResult<()> {
        Err(read_only())
    }

    async fn query(&self, _query: &Query) -> StoreResult<Page> {
        Err(read_only())
    }

    /// Rows after the `Id` (hex) `after`, converted. The cursor of each record is its
    /// row's `Id` in hex.
    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> StoreResult<Page> {
        let Some(table) = upstream_table(kind) else {
            return Ok(Page {
                records: Vec::new(),
                more: false,
            });
        };
        let limit = page_size.max(1) + 1;
        let mut conn = self
            .pool
            .get_conn()
            .await
            .map_err(|e| unavailable(table, e))?;
        // `Data` is read as bytes: MySQL's JSON type comes back as binary-collated text.
        let rows: Result<Vec<(Vec<u8>, Vec<u8>)>, mysql_async::Error> = match after {
            None => {
                conn.exec(
                    format!("SELECT Id, Data FROM `{table}` ORDER BY Id LIMIT ?"),
                    (limit as u64,),
                )
                .await
            }
            Some(after) => {
                let after = hex::decode(after).map_err(|_| StoreError::InvalidCursor)?;
                conn.exec(
                    format!("SELECT Id, Data FROM `{table}` WHERE Id > ? ORDER BY Id LIMIT ?"),
                    (after, limit as u64),
                )
                .await
            }
        };
        let rows = match rows {
            Ok(rows) => rows,
            // Older upstream versions have no table for the kinds added later
            // (DeploymentChain, DeploymentTrace): nothing of that kind to import.
            Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_TABLE => {
                return Ok(Page {
                    records: Vec::new(),
                    more: false,
                });
            }
            Err(e) => return Err(unavailable(table, e)),
        };
        let more = rows.len() > page_size.max(1);
        let mut records = Vec::with_capacity(rows.len().min(page_size.max(1)));
        for (id, data) in rows.into_iter().take(page_size.max(1)) {
            let cursor = hex::encode(&id);
            let record = convert::record(kind, &data).map_err(|why| {
                StoreError::internal_from(format!("upstream table {table}, row Id 0x{cursor}"), why)
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }
}
