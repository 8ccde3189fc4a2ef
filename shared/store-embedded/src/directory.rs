//! A read-only `Filestore` over a directory of files, object `a/b/c.txt` being the file
//! `<root>/a/b/c.txt`: how `wisp import pipecd` reads an upstream filestore copied to a
//! directory (a GCS bucket through `gcloud storage rsync`), which it must never change.
//! Wisp's own `LOCAL` filestore keeps its objects in a database ([`crate::filestore`]).

use std::collections::BinaryHeap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use wisp_store::error::{Result, StoreError};
use wisp_store::filestore::{
    Filestore, ListPage, Object, ObjectAttrs, PutCondition, RESERVED_SEGMENT_PREFIX, validate_path,
    validate_prefix,
};

use crate::filestore::etag_of;

/// Names an earlier Wisp used for its temporary and lock files: never objects.
const TMP_PREFIX: &str = RESERVED_SEGMENT_PREFIX;

/// A directory of files, read as objects; puts and deletes are refused.
#[derive(Clone, Debug)]
pub struct DirectoryFilestore {
    root: Arc<PathBuf>,
}

impl DirectoryFilestore {
    /// Reads `root`, which must be a directory.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        if !root.is_dir() {
            return Err(StoreError::NotFound(format!(
                "directory {}",
                root.display()
            )));
        }
        Ok(DirectoryFilestore {
            root: Arc::new(root),
        })
    }

    /// Runs `f` on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Path) -> Result<T> + Send + 'static,
    {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || f(&root))
            .await
            .map_err(|e| StoreError::internal_from("filestore task failed", e))?
    }

    fn read_only(&self, path: &str) -> StoreError {
        StoreError::FailedPrecondition(format!(
            "object {path}: the directory {} is only read",
            self.root.display()
        ))
    }
}

fn io_err(path: &str, e: io::Error) -> StoreError {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::IsADirectory | io::ErrorKind::NotADirectory => {
            StoreError::NotFound(format!("object {path}"))
        }
        _ => StoreError::internal_from(format!("object {path}"), e),
    }
}

/// Content of the object at `full`, `None` if there is none.
fn read_object(path: &str, full: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(full) {
        Ok(data) => Ok(Some(data)),
        Err(e) => match io_err(path, e) {
            StoreError::NotFound(_) => Ok(None),
            other => Err(other),
        },
    }
}

fn attrs(path: String, full: &Path) -> Result<Option<ObjectAttrs>> {
    let Some(data) = read_object(&path, full)? else {
        return Ok(None);
    };
    let updated_at = fs::metadata(full)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(Some(ObjectAttrs {
        path,
        size: data.len() as u64,
        etag: etag_of(&data),
        updated_at,
    }))
}

struct Walk<'a> {
    root: &'a Path,
    prefix: &'a str,
    after: Option<&'a str>,
    limit: usize,
    out: Vec<ObjectAttrs>,
    more: bool,
}

/// Part of a directory, for a listing page.
struct Candidates {
    /// Keys in order (a directory's ending in `/`), each with whether it is a directory.
    keys: Vec<(String, bool)>,
    /// Whether entries past these were left out.
    truncated: bool,
}

impl Walk<'_> {
    /// Depth-first over `rel_dir` (`""` or ending in `/`). Entries are visited in order of
    /// `name` for files and `name/` for directories, which is exactly the order of the
    /// full paths, so objects come out sorted and the walk can stop after `limit`.
    ///
    /// Only the smallest entries a page can still use are held, not the whole directory
    /// (one of 100,000 deployments' logs would be megabytes of names per page); a
    /// directory is read again, past the last entry handled, in the rare case those ran
    /// out early (directories holding fewer objects than entries).
    fn dir(&mut self, rel_dir: &str) -> Result<()> {
        let mut handled: Option<String> = None;
        loop {
            // One more than the objects still wanted, so that `more` can be told.
            let budget = (self.limit - self.out.len()).saturating_add(1);
            let Some(Candidates { keys, truncated }) =
                self.smallest_entries(rel_dir, handled.as_deref(), budget)?
            else {
                return Ok(());
            };
            for (key, is_dir) in keys {
                if self.more {
                    return Ok(());
                }
                if is_dir {
                    self.dir(&key)?;
                } else {
                    if self.out.len() == self.limit {
                        self.more = true;
                        return Ok(());
                    }
                    let full = self.root.join(&key);
                    // Gone since read_dir: a concurrent delete.
                    if let Some(attrs) = attrs(key.clone(), &full)? {
                        self.out.push(attrs);
                    }
                }
                handled = Some(key);
            }
            if !truncated || self.more {
                return Ok(());
            }
        }
    }

    /// The `budget` smallest keys of `rel_dir` after `handled` that can hold or be a match
    /// (sorted), and whether any were left out; `None` if the directory is gone.
    fn smallest_entries(
        &self,
        rel_dir: &str,
        handled: Option<&str>,
        budget: usize,
    ) -> Result<Option<Candidates>> {
        let full_dir = self.root.join(rel_dir);
        let entries = match fs::read_dir(&full_dir) {
            Ok(entries) => entries,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(StoreError::internal_from(format!("listing {rel_dir:?}"), e)),
        };
        // A max-heap of the smallest keys seen: the largest is dropped past the budget.
        let mut keep: BinaryHeap<(String, bool)> = BinaryHeap::new();
        let mut truncated = false;
        for entry in entries {
            let entry =
                entry.map_err(|e| StoreError::internal_from(format!("listing {rel_dir:?}"), e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: not written by us
            };
            if name.starts_with(TMP_PREFIX) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let key = if kind.is_dir() {
                format!("{rel_dir}{name}/")
            } else if kind.is_file() {
                format!("{rel_dir}{name}")
            } else {
                continue;
            };
            if handled.is_some_and(|h| key.as_str() <= h) || !self.wanted(&key, kind.is_dir()) {
                continue;
            }
            if keep.len() == budget {
                match keep.peek() {
                    Some((largest, _)) if key < *largest => {
                        keep.pop();
                    }
                    _ => {
                        truncated = true;
                        continue;
                    }
                }
                truncated = true;
            }
            keep.push((key, kind.is_dir()));
        }
        Ok(Some(Candidates {
            keys: keep.into_sorted_vec(),
            truncated,
        }))
    }

    /// Whether a file is a match, or a directory can hold one, given the prefix and the
    /// position to list after.
    fn wanted(&self, key: &str, is_dir: bool) -> bool {
        if is_dir {
            (key.starts_with(self.prefix) || self.prefix.starts_with(key))
                && !self.after.is_some_and(|a| key < a && !a.starts_with(key))
        } else {
            key.starts_with(self.prefix) && self.after.is_none_or(|a| key > a)
        }
    }
}

#[async_trait]
impl Filestore for DirectoryFilestore {
    async fn get(&self, path: &str) -> Result<Object> {
        validate_path(path)?;
        let path = path.to_string();
        self.run(move |root| match read_object(&path, &root.join(&path))? {
            Some(data) => Ok(Object {
                etag: etag_of(&data),
                data,
            }),
            None => Err(StoreError::NotFound(format!("object {path}"))),
        })
        .await
    }

    /// `limit == 0` means no limit.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage> {
        validate_prefix(prefix)?;
        let prefix = prefix.to_string();
        let after = after.map(str::to_string);
        self.run(move |root| {
            let mut walk = Walk {
                root,
                prefix: &prefix,
                after: after.as_deref(),
                limit: if limit == 0 { usize::MAX } else { limit },
                out: Vec::new(),
                more: false,
            };
            // Start at the deepest directory the prefix names.
            let start = match prefix.rfind('/') {
                Some(i) => &prefix[..=i],
                None => "",
            };
            walk.dir(start)?;
            let next = if walk.more {
                walk.out.last().map(|o| o.path.clone())
            } else {
                None
            };
            Ok(ListPage {
                objects: walk.out,
                next,
            })
        })
        .await
    }

    async fn put(&self, path: &str, _data: Vec<u8>, _condition: PutCondition) -> Result<String> {
        Err(self.read_only(path))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        Err(self.read_only(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, data: &[u8]) {
        let full = root.join(path);
        fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        fs::write(full, data).expect("write");
    }

    /// Pages hold only the entries they can use; directories without objects make the walk
    /// read a directory again past them; temporary files are no objects.
    #[tokio::test]
    async fn pages_come_out_in_order_past_empty_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut expected = Vec::new();
        for d in 0..30 {
            if d % 3 == 0 {
                fs::create_dir_all(dir.path().join(format!("log/{d:02}/empty"))).expect("mkdir");
                continue;
            }
            for f in 0..(d % 4) {
                let path = format!("log/{d:02}/s/{f}.txt");
                write(dir.path(), &path, b"x");
                expected.push(path);
            }
        }
        write(dir.path(), "log0", b"x");
        write(dir.path(), "log/01/s/.wisp-tmp.1.1", b"torn");
        let fs = DirectoryFilestore::open(dir.path()).expect("open");
        for limit in [1, 2, 3, 7, 100] {
            let mut listed = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = fs
                    .list("log/", after.as_deref(), limit)
                    .await
                    .expect("list");
                assert!(page.objects.len() <= limit);
                listed.extend(page.objects.into_iter().map(|o| o.path));
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            assert_eq!(listed, expected, "limit {limit}");
        }
        let all = fs.list("", None, 0).await.expect("list all");
        assert_eq!(all.objects.len(), expected.len() + 1);
        assert_eq!(all.next, None);
    }

    /// The directory is read, never changed.
    #[tokio::test]
    async fn objects_are_read_and_never_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "log/d/s/0.txt", b"hello");
        let fs = DirectoryFilestore::open(dir.path()).expect("open");
        let object = fs.get("log/d/s/0.txt").await.expect("get");
        assert_eq!(object.data, b"hello");
        assert_eq!(object.etag, etag_of(b"hello"));
        assert!(matches!(
            fs.get("log/d/s/1.txt").await,
            Err(StoreError::NotFound(_))
        ));
        let put = fs
            .put("log/d/s/0.txt", b"x".to_vec(), PutCondition::Any)
            .await;
        assert!(
            matches!(put, Err(StoreError::FailedPrecondition(_))),
            "{put:?}"
        );
        let delete = fs.delete("log/d/s/0.txt").await;
        assert!(
            matches!(delete, Err(StoreError::FailedPrecondition(_))),
            "{delete:?}"
        );
        assert_eq!(
            fs::read(dir.path().join("log/d/s/0.txt")).expect("file"),
            b"hello"
        );
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("log")]);
    }
}
