//! The embedded filestore's objects as an operator's tool sees them beside a running
//! server: rows of `<data-dir>/filestore/objects.db` (SQLite, WAL), read and written with a
//! connection of the test's own, so what the server wrote is checked where it keeps it and
//! the store can be made to fail as a disk would.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use wisp_store_embedded::filestore::{DATABASE_FILE, etag_of};

/// A connection to one data directory's object database.
pub struct Objects {
    conn: Connection,
}

/// The object database of the data directory `data_dir`.
pub fn database(data_dir: &Path) -> PathBuf {
    data_dir.join("filestore").join(DATABASE_FILE)
}

impl Objects {
    /// Opens the object database of `data_dir`, which the server has made.
    pub fn open(data_dir: &Path) -> Self {
        let path = database(data_dir);
        assert!(path.is_file(), "no object database at {}", path.display());
        let conn = Connection::open(&path).expect("open the object database");
        conn.busy_timeout(Duration::from_secs(10))
            .expect("busy timeout");
        Objects { conn }
    }

    /// The content of the object at `path`, if there is one.
    pub fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.conn
            .query_row("SELECT data FROM objects WHERE path = ?1", [path], |row| {
                row.get(0)
            })
            .optional()
            .expect("read an object")
    }

    /// Writes `data` at `path` as any other writer would (a new etag).
    pub fn write(&self, path: &str, data: &[u8]) {
        self.conn
            .execute(
                "INSERT INTO objects (path, size, etag, updated_at, data)
                 VALUES (?1, ?2, ?3, unixepoch(), ?4)
                 ON CONFLICT (path) DO UPDATE SET size = excluded.size, etag = excluded.etag,
                   updated_at = excluded.updated_at, data = excluded.data",
                params![path, data.len() as i64, etag_of(data), data],
            )
            .expect("write an object");
    }

    /// Removes the object at `path`.
    pub fn remove(&self, path: &str) {
        self.conn
            .execute("DELETE FROM objects WHERE path = ?1", [path])
            .expect("remove an object");
    }

    /// The paths of the objects under `prefix`, in order.
    pub fn paths(&self, prefix: &str) -> Vec<String> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT path FROM objects WHERE substr(path, 1, length(?1)) = ?1 ORDER BY path",
            )
            .expect("prepare");
        statement
            .query_map([prefix], |row| row.get(0))
            .expect("list objects")
            .collect::<rusqlite::Result<_>>()
            .expect("paths")
    }

    /// Makes every write of the object at `path` fail, in any process, as a failing disk
    /// would (SQLite answers the writer with an error), until [`Self::unblock_writes`].
    pub fn block_writes(&self, path: &str) {
        let quoted = path.replace('\'', "''");
        self.conn
            .execute_batch(&format!(
                "CREATE TRIGGER test_block_insert BEFORE INSERT ON objects
                   WHEN NEW.path = '{quoted}' BEGIN SELECT RAISE(ABORT, 'blocked by the test'); END;
                 CREATE TRIGGER test_block_update BEFORE UPDATE ON objects
                   WHEN NEW.path = '{quoted}' BEGIN SELECT RAISE(ABORT, 'blocked by the test'); END;"
            ))
            .expect("block writes");
    }

    /// Lets writes through again.
    pub fn unblock_writes(&self) {
        self.conn
            .execute_batch(
                "DROP TRIGGER test_block_insert;
                 DROP TRIGGER test_block_update;",
            )
            .expect("unblock writes");
    }
}
