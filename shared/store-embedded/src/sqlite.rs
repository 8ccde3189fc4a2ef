//! `Datastore` on one SQLite file.
//!
//! All records live in one table keyed by `(kind, id)`. Each of the [`INDEX_SLOTS`] index
//! slots is a pair of nullable columns `iN_pk`/`iN_sk` with a partial index
//! `(kind, iN_pk, iN_sk, id) WHERE iN_pk IS NOT NULL`, so a query is one indexed range
//! read and a record whose slot is `None` takes no room in that index (sparse index).
//!
//! The file is opened in WAL mode with a busy timeout, so the `wisp` admin CLI can write
//! while `wisp serve` runs: each process opens its own [`SqliteDatastore`], and every
//! write is a short `BEGIN IMMEDIATE` transaction.
//!
//! The database is a `Db` (`db.rs`): WAL, one writer thread committing in groups, read
//! connections beside it.

use std::path::Path;

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use wisp_store::cursor::{self, QueryCursor, ScanCursor};
use wisp_store::datastore::{Datastore, INDEX_SLOTS, IndexKey, Kind, Page, Query, Record};
use wisp_store::error::{Result, StoreError};

use wisp_store::collection::now_unix;

use crate::db::{Db, map_err};

/// Pages are capped so one query cannot read an unbounded range into memory.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Schema migrations, applied in order; the schema version is the number applied.
/// Never edit a released entry: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: the records table and one partial index per slot.
    "CREATE TABLE records (
        kind       TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        project_id TEXT    NOT NULL,
        version    INTEGER NOT NULL,
        data       BLOB    NOT NULL,
        i0_pk      TEXT,
        i0_sk      TEXT,
        i1_pk      TEXT,
        i1_sk      TEXT,
        i2_pk      TEXT,
        i2_sk      TEXT,
        expires_at INTEGER,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX records_i0 ON records (kind, i0_pk, i0_sk, id) WHERE i0_pk IS NOT NULL;
    CREATE INDEX records_i1 ON records (kind, i1_pk, i1_sk, id) WHERE i1_pk IS NOT NULL;
    CREATE INDEX records_i2 ON records (kind, i2_pk, i2_sk, id) WHERE i2_pk IS NOT NULL;
    CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;",
];

/// The columns every record read selects, in the order [`read_row`] expects.
const RECORD_COLUMNS: &str =
    "id, project_id, version, data, i0_pk, i0_sk, i1_pk, i1_sk, i2_pk, i2_sk, expires_at";

/// A record is live while `expires_at` is unset or still in the future.
const LIVE: &str = "(expires_at IS NULL OR expires_at > ?)";

/// A cheaply cloneable handle on one SQLite database file.
#[derive(Clone)]
pub struct SqliteDatastore {
    db: Db,
}

impl std::fmt::Debug for SqliteDatastore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteDatastore")
            .field("path", &self.db.path())
            .finish()
    }
}

impl SqliteDatastore {
    /// Opens (creating it and its directory if needed) the database at `path` and brings
    /// its schema up to date.
    /// Blocks briefly: call it at startup, not on a request path.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Ok(SqliteDatastore {
            db: Db::open(path, MIGRATIONS)?,
        })
    }

    /// A private in-memory database, for tests of code built on the datastore.
    pub fn open_in_memory() -> Result<Self> {
        Ok(SqliteDatastore {
            db: Db::open_in_memory(MIGRATIONS)?,
        })
    }

    /// The database file, `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.db.path()
    }

    /// Deletes records whose `expires_at` has passed (they are already invisible).
    /// Returns how many were removed. For a periodic batch job.
    pub async fn purge_expired(&self) -> Result<usize> {
        let now = now_unix();
        self.db
            .write(move |conn| {
                conn.execute(
                    "DELETE FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                    [now],
                )
                .map_err(map_err)
            })
            .await
    }
}

/// A record row as read from SQLite, before validation.
struct RawRow {
    id: String,
    project_id: String,
    version: i64,
    data: Vec<u8>,
    keys: [(Option<String>, Option<String>); INDEX_SLOTS],
    expires_at: Option<i64>,
}

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: row.get(0)?,
        project_id: row.get(1)?,
        version: row.get(2)?,
        data: row.get(3)?,
        keys: [
            (row.get(4)?, row.get(5)?),
            (row.get(6)?, row.get(7)?),
            (row.get(8)?, row.get(9)?),
        ],
        expires_at: row.get(10)?,
    })
}

impl RawRow {
    fn into_record(self) -> Result<Record> {
        let version = u64::try_from(self.version).map_err(|_| {
            StoreError::internal(format!(
                "record {} has invalid version {}",
                self.id, self.version
            ))
        })?;
        let mut indexes: [Option<IndexKey>; INDEX_SLOTS] = Default::default();
        for (slot, (pk, sk)) in self.keys.into_iter().enumerate() {
            indexes[slot] = match (pk, sk) {
                (Some(pk), Some(sk)) => Some(IndexKey { pk, sk }),
                (None, _) => None,
                (Some(_), None) => {
                    return Err(StoreError::internal(format!(
                        "record {} has index slot {slot} without a sort key",
                        self.id
                    )));
                }
            };
        }
        Ok(Record {
            id: self.id,
            project_id: self.project_id,
            version,
            data: self.data,
            indexes,
            expires_at: self.expires_at,
        })
    }
}

/// Values bound for `project_id, data, i0_pk, i0_sk, ..., expires_at`.
fn record_values(record: Record) -> Vec<Value> {
    let mut values = Vec::with_capacity(3 + 2 * INDEX_SLOTS);
    values.push(Value::Text(record.project_id));
    values.push(Value::Blob(record.data));
    for key in record.indexes {
        match key {
            Some(IndexKey { pk, sk }) => {
                values.push(Value::Text(pk));
                values.push(Value::Text(sk));
            }
            None => {
                values.push(Value::Null);
                values.push(Value::Null);
            }
        }
    }
    values.push(record.expires_at.map_or(Value::Null, Value::Integer));
    values
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(StoreError::InvalidArgument("record id is empty".into()));
    }
    Ok(())
}

/// The live version of `(kind, id)`, if any.
fn live_version(conn: &Connection, kind: Kind, id: &str, now: i64) -> Result<Option<i64>> {
    conn.prepare_cached(&format!(
        "SELECT version FROM records WHERE kind = ? AND id = ? AND {LIVE}"
    ))
    .map_err(map_err)?
    .query_row(rusqlite::params![kind.as_str(), id, now], |row| row.get(0))
    .optional()
    .map_err(map_err)
}

/// Why a write expecting `(kind, id)` at `expected_version` changed nothing: the record is
/// gone (`NotFound`) or at another version (`Conflict`).
fn not_at_version(
    conn: &Connection,
    kind: Kind,
    id: &str,
    expected_version: u64,
    now: i64,
) -> Result<StoreError> {
    Ok(match live_version(conn, kind, id, now)? {
        None => StoreError::NotFound(format!("{kind} {id}")),
        Some(found) => StoreError::Conflict(format!(
            "{kind} {id}: expected version {expected_version}, found {found}"
        )),
    })
}

fn check_page_size(page_size: usize) -> Result<usize> {
    if page_size == 0 {
        return Err(StoreError::InvalidArgument(
            "page size must be at least 1".into(),
        ));
    }
    Ok(page_size.min(MAX_PAGE_SIZE))
}

/// SQL and parameters for one query page (`page_size + 1` rows, to tell whether there is
/// more). Only the constraints in use are emitted, so SQLite can turn them all into an
/// index range on `(kind, iN_pk, iN_sk, id)`.
fn query_sql(
    query: &Query,
    after: Option<QueryCursor>,
    now: i64,
    page_size: usize,
) -> (String, Vec<Value>) {
    // The caller checked `slot`: a small integer, so formatting column names is safe.
    let slot = query.slot;
    let (pk_col, sk_col) = (format!("i{slot}_pk"), format!("i{slot}_sk"));
    let mut sql =
        format!("SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND {pk_col} = ? AND {LIVE}");
    let mut values = vec![
        Value::Text(query.kind.as_str().into()),
        Value::Text(query.pk.clone()),
        Value::Integer(now),
    ];
    if let Some(from) = &query.sk_from {
        sql.push_str(&format!(" AND {sk_col} >= ?"));
        values.push(Value::Text(from.clone()));
    }
    if let Some(to) = &query.sk_to {
        sql.push_str(&format!(" AND {sk_col} < ?"));
        values.push(Value::Text(to.clone()));
    }
    let (cmp, dir) = if query.descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    if let Some(after) = after {
        sql.push_str(&format!(" AND ({sk_col}, id) {cmp} (?, ?)"));
        values.push(Value::Text(after.s));
        values.push(Value::Text(after.i));
    }
    sql.push_str(&format!(" ORDER BY {sk_col} {dir}, id {dir} LIMIT ?"));
    values.push(Value::Integer(
        i64::try_from(page_size + 1).unwrap_or(i64::MAX),
    ));
    (sql, values)
}

/// SQL and parameters for one scan page, in id order on the primary key.
fn scan_sql(kind: Kind, after: Option<String>, now: i64, page_size: usize) -> (String, Vec<Value>) {
    let mut sql = format!("SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND {LIVE}");
    let mut values = vec![Value::Text(kind.as_str().into()), Value::Integer(now)];
    if let Some(after) = after {
        sql.push_str(" AND id > ?");
        values.push(Value::Text(after));
    }
    sql.push_str(" ORDER BY id ASC LIMIT ?");
    values.push(Value::Integer(
        i64::try_from(page_size + 1).unwrap_or(i64::MAX),
    ));
    (sql, values)
}

#[async_trait]
impl Datastore for SqliteDatastore {
    async fn get(&self, kind: Kind, id: &str) -> Result<Record> {
        let id = id.to_string();
        let now = now_unix();
        self.db
            .run_read(move |conn| {
                let raw = conn
                    .prepare_cached(&format!(
                        "SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND id = ? AND {LIVE}"
                    ))
                    .map_err(map_err)?
                    .query_row(rusqlite::params![kind.as_str(), id, now], read_row)
                    .optional()
                    .map_err(map_err)?;
                match raw {
                    Some(raw) => raw.into_record(),
                    None => Err(StoreError::NotFound(format!("{kind} {id}"))),
                }
            })
            .await
    }

    async fn create(&self, kind: Kind, record: Record) -> Result<()> {
        check_id(&record.id)?;
        let now = now_unix();
        self.db
            .write(move |conn| {
                let id = record.id.clone();
                let mut values = vec![Value::Text(kind.as_str().into()), Value::Text(id.clone())];
                values.extend(record_values(record));
                values.push(Value::Integer(now));
                // An expired record is absent: creating over it replaces it.
                let changed = conn
                .prepare_cached(
                    "INSERT INTO records (kind, id, project_id, data, i0_pk, i0_sk, i1_pk, i1_sk,
                                          i2_pk, i2_sk, expires_at, version)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1)
                     ON CONFLICT (kind, id) DO UPDATE SET
                        project_id = excluded.project_id, data = excluded.data,
                        i0_pk = excluded.i0_pk, i0_sk = excluded.i0_sk,
                        i1_pk = excluded.i1_pk, i1_sk = excluded.i1_sk,
                        i2_pk = excluded.i2_pk, i2_sk = excluded.i2_sk,
                        expires_at = excluded.expires_at, version = 1
                     WHERE records.expires_at IS NOT NULL AND records.expires_at <= ?12",
                )
                .map_err(map_err)?
                .execute(params_from_iter(values))
                .map_err(map_err)?;
                if changed == 0 {
                    return Err(StoreError::AlreadyExists(format!("{kind} {id}")));
                }
                Ok(())
            })
            .await
    }

    async fn put(&self, kind: Kind, record: Record, expected_version: u64) -> Result<()> {
        check_id(&record.id)?;
        let now = now_unix();
        self.db
            .write(move |tx| {
                let id = record.id.clone();
                // A version beyond i64 cannot be stored, so it can only mismatch.
                let changed = match i64::try_from(expected_version) {
                    Ok(expected) => {
                        let mut values = record_values(record);
                        values.push(Value::Text(kind.as_str().into()));
                        values.push(Value::Text(id.clone()));
                        values.push(Value::Integer(expected));
                        values.push(Value::Integer(now));
                        tx.prepare_cached(&format!(
                            "UPDATE records SET project_id = ?, data = ?, i0_pk = ?, i0_sk = ?,
                            i1_pk = ?, i1_sk = ?, i2_pk = ?, i2_sk = ?, expires_at = ?,
                            version = version + 1
                         WHERE kind = ? AND id = ? AND version = ? AND {LIVE}"
                        ))
                        .map_err(map_err)?
                        .execute(params_from_iter(values))
                        .map_err(map_err)?
                    }
                    Err(_) => 0,
                };
                if changed == 0 {
                    return Err(not_at_version(tx, kind, &id, expected_version, now)?);
                }
                Ok(())
            })
            .await
    }

    async fn delete(&self, kind: Kind, id: &str, expected_version: u64) -> Result<()> {
        let id = id.to_string();
        let now = now_unix();
        self.db
            .write(move |tx| {
                let changed = match i64::try_from(expected_version) {
                Ok(expected) => tx
                    .prepare_cached(&format!(
                        "DELETE FROM records WHERE kind = ? AND id = ? AND version = ? AND {LIVE}"
                    ))
                    .map_err(map_err)?
                    .execute(rusqlite::params![kind.as_str(), id, expected, now])
                    .map_err(map_err)?,
                Err(_) => 0,
            };
                if changed == 0 {
                    return Err(not_at_version(tx, kind, &id, expected_version, now)?);
                }
                Ok(())
            })
            .await
    }

    async fn query(&self, query: &Query) -> Result<Page> {
        let slot = query.slot;
        if slot >= INDEX_SLOTS {
            return Err(StoreError::InvalidArgument(format!(
                "index slot {slot} out of range (0..{INDEX_SLOTS})"
            )));
        }
        let page_size = check_page_size(query.page_size)?;
        let after = match &query.after {
            Some(cursor) => Some(cursor::decode::<QueryCursor>(cursor)?),
            None => None,
        };

        let (sql, values) = query_sql(query, after, now_unix(), page_size);
        let rows = self
            .db
            .run_read(move |conn| {
                let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
                let rows = stmt
                    .query_map(params_from_iter(values), read_row)
                    .map_err(map_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(map_err)?;
                Ok(rows)
            })
            .await?;

        let more = rows.len() > page_size;
        let mut records = Vec::with_capacity(rows.len().min(page_size));
        for raw in rows.into_iter().take(page_size) {
            let record = raw.into_record()?;
            let sk = match &record.indexes[slot] {
                Some(key) => key.sk.clone(),
                None => {
                    return Err(StoreError::internal(format!(
                        "record {} matched slot {slot} without a key",
                        record.id
                    )));
                }
            };
            let cursor = cursor::encode(&QueryCursor {
                s: sk,
                i: record.id.clone(),
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }

    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> Result<Page> {
        let page_size = check_page_size(page_size)?;
        let after = match after {
            Some(cursor) => Some(cursor::decode::<ScanCursor>(cursor)?.i),
            None => None,
        };
        let (sql, values) = scan_sql(kind, after, now_unix(), page_size);
        let rows = self
            .db
            .run_read(move |conn| {
                let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
                let rows = stmt
                    .query_map(params_from_iter(values), read_row)
                    .map_err(map_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(map_err)?;
                Ok(rows)
            })
            .await?;
        let more = rows.len() > page_size;
        let mut records = Vec::with_capacity(rows.len().min(page_size));
        for raw in rows.into_iter().take(page_size) {
            let record = raw.into_record()?;
            let cursor = cursor::encode(&ScanCursor {
                i: record.id.clone(),
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn plan(conn: &Connection, sql: &str, values: Vec<Value>) -> String {
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("prepare");
        let rows = stmt
            .query_map(params_from_iter(values), |row| row.get::<_, String>(3))
            .expect("query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("rows");
        rows.join("\n")
    }

    /// A cached statement is planned once: binding another key or time does not make
    /// SQLite parse and plan it again (it did on every poll before QPSG).
    #[test]
    fn cached_queries_are_not_prepared_again_for_new_values() {
        let mut conn = Connection::open_in_memory().expect("open");
        crate::db::migrate(&mut conn, MIGRATIONS).expect("migrate");
        crate::db::configure(&conn).expect("configure");
        let q = Query::new(Kind::Command, 1, "p");
        let (sql, _) = query_sql(&q, None, 0, 10);
        for n in 0..20 {
            let mut q = Query::new(Kind::Command, 1, format!("project/piped-{n}"));
            q.page_size = 10;
            let (_, values) = query_sql(&q, None, n, 10);
            let mut stmt = conn.prepare_cached(&sql).expect("prepare");
            let rows = stmt
                .query_map(params_from_iter(values), read_row)
                .expect("query")
                .count();
            assert_eq!(rows, 0);
            assert_eq!(
                stmt.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "call {n} prepared the statement again"
            );
        }
    }

    /// Every query shape is an index range read, never a table scan or a sort.
    #[test]
    fn queries_use_the_slot_index() {
        let mut conn = Connection::open_in_memory().expect("open");
        crate::db::migrate(&mut conn, MIGRATIONS).expect("migrate");
        crate::db::configure(&conn).expect("configure");
        let cursor = || {
            Some(QueryCursor {
                s: "m".into(),
                i: "x".into(),
            })
        };
        for slot in 0..INDEX_SLOTS {
            for descending in [false, true] {
                for (from, to, after) in [
                    (None, None, None),
                    (Some("a"), None, None),
                    (None, Some("z"), cursor()),
                    (Some("a"), Some("z"), cursor()),
                ] {
                    let mut q = Query::new(Kind::Deployment, slot, "p");
                    q.descending = descending;
                    q.sk_from = from.map(String::from);
                    q.sk_to = to.map(String::from);
                    let (sql, values) = query_sql(&q, after, 0, 10);
                    let plan = plan(&conn, &sql, values);
                    assert!(
                        plan.contains(&format!("USING INDEX records_i{slot}")),
                        "slot {slot}: {plan}"
                    );
                    assert!(!plan.contains("TEMP B-TREE"), "slot {slot} sorts: {plan}");
                }
            }
        }
        for after in [None, Some("x".to_string())] {
            let (sql, values) = scan_sql(Kind::Deployment, after, 0, 10);
            let plan = plan(&conn, &sql, values);
            assert!(plan.contains("USING INDEX"), "scan: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "scan sorts: {plan}");
        }
    }

    /// The writer's commits do not checkpoint (SQLite's automatic checkpoint made every
    /// write queued behind the commit crossing its threshold wait for two `fsync`s); the
    /// checkpoint thread does: what is written reaches the database file itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_run_beside_the_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        let ds = SqliteDatastore::open(&path).expect("open");
        let autocheckpoint: i64 = ds
            .db
            .write_connection()
            .query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))
            .expect("pragma");
        assert_eq!(
            autocheckpoint, 0,
            "the writer's commits must not checkpoint"
        );
        const RECORDS: usize = 2000;
        const BYTES: usize = 1000;
        let writes: Vec<_> = (0..RECORDS)
            .map(|i| {
                let ds = ds.clone();
                tokio::spawn(async move {
                    let record = Record {
                        id: format!("r{i:05}"),
                        project_id: "p".into(),
                        version: 0,
                        data: vec![(i % 251) as u8; BYTES],
                        indexes: Default::default(),
                        expires_at: None,
                    };
                    ds.create(Kind::Event, record).await
                })
            })
            .collect();
        for write in writes {
            write.await.expect("task").expect("create");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let size = std::fs::metadata(&path).expect("database file").len();
            if size >= (RECORDS * BYTES) as u64 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the writes never reached the database file ({size} bytes)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[test]
    fn reopening_keeps_the_schema_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        drop(SqliteDatastore::open(&path).expect("first open"));
        let ds = SqliteDatastore::open(&path).expect("second open");
        let conn = ds.db.write_connection();
        let version: i64 = conn
            .query_row("SELECT version FROM wisp_schema WHERE id = 0", [], |row| {
                row.get(0)
            })
            .expect("version");
        assert_eq!(version, MIGRATIONS.len() as i64);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        drop(SqliteDatastore::open(&path).expect("open"));
        let conn = Connection::open(&path).expect("raw open");
        conn.execute("UPDATE wisp_schema SET version = 999 WHERE id = 0", [])
            .expect("bump");
        drop(conn);
        let err = SqliteDatastore::open(&path).expect_err("newer schema");
        assert!(matches!(err, StoreError::Internal { .. }), "{err:?}");
    }

    /// SQLite's own error stays the source, its code reachable and its words in the
    /// chain the edge logs.
    #[test]
    fn a_sqlite_failure_keeps_the_sqlite_error_as_its_source() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        std::fs::write(&path, vec![b'x'; 8192]).expect("write");
        let err = SqliteDatastore::open(&path).expect_err("not a database");
        let sqlite = std::error::Error::source(&err)
            .and_then(|e| e.downcast_ref::<rusqlite::Error>())
            .unwrap_or_else(|| panic!("no SQLite error below {err:?}"));
        assert_eq!(
            sqlite.sqlite_error_code(),
            Some(rusqlite::ErrorCode::NotADatabase)
        );
        let logged = wisp_store::error::chain(&err).to_string();
        assert!(logged.contains("file is not a database"), "{logged}");
    }
}
