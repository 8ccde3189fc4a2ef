//! The console's built files (upstream's `web/` build output) from a directory or from a
//! prefix of the filestore (S3 on AWS). Every GET that names no file and has no
//! extension is a client-side route and gets `index.html`; a missing asset (with an
//! extension) is a 404.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use wisp_store::{Filestore, StoreError};

use crate::plain;

pub struct StaticFiles {
    source: Source,
}

enum Source {
    Dir(PathBuf),
    /// Objects under this prefix of the filestore.
    Store(Arc<dyn Filestore>, String),
}

impl StaticFiles {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StaticFiles {
            source: Source::Dir(root.into()),
        }
    }

    /// The files under `prefix` (e.g. `console/`) of `filestore`.
    pub fn from_filestore(filestore: Arc<dyn Filestore>, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        StaticFiles {
            source: Source::Store(filestore, prefix),
        }
    }

    /// The file's content, `None` when there is none.
    async fn read(&self, relative: &Path) -> Option<Vec<u8>> {
        match &self.source {
            Source::Dir(root) => {
                let path = root.join(relative);
                if !is_file(&path).await {
                    return None;
                }
                match tokio::fs::read(&path).await {
                    Ok(b) => Some(b),
                    Err(e) => {
                        tracing::warn!(file = %path.display(), error = %e, "console file unreadable");
                        None
                    }
                }
            }
            Source::Store(store, prefix) => {
                let key = format!("{prefix}{}", relative.to_string_lossy());
                match store.get(&key).await {
                    Ok(object) => Some(object.data),
                    Err(StoreError::NotFound(_)) => None,
                    Err(e) => {
                        tracing::warn!(file = %key, error = %e, "console file unreadable");
                        None
                    }
                }
            }
        }
    }

    pub async fn serve(&self, path: &str, head_only: bool) -> Response<Bytes> {
        let Some(relative) = safe_relative(path) else {
            return plain(StatusCode::NOT_FOUND, "not found");
        };
        let found = if relative.as_os_str().is_empty() {
            None
        } else {
            self.read(&relative).await
        };
        let (file, body, is_index) = match found {
            Some(body) => (relative, body, false),
            None if relative.extension().is_some() => {
                return plain(StatusCode::NOT_FOUND, "not found");
            }
            None => {
                let index = PathBuf::from("index.html");
                match self.read(&index).await {
                    Some(body) => (index, body, true),
                    None => return plain(StatusCode::NOT_FOUND, "the console has no index.html"),
                }
            }
        };
        let mime = mime_guess::from_path(&file).first_or_octet_stream();
        let mut resp = Response::new(if head_only {
            Bytes::new()
        } else {
            Bytes::from(body)
        });
        let headers = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(mime.as_ref()) {
            headers.insert(header::CONTENT_TYPE, v);
        }
        // Bundles carry a content hash in their names and never change; index.html
        // names the current ones, so it must always be revalidated.
        let cache = if !is_index && looks_hashed(&file) {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        };
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        resp
    }
}

async fn is_file(path: &Path) -> bool {
    tokio::fs::metadata(path)
        .await
        .map(|m| m.is_file())
        .unwrap_or(false)
}

/// The request path as a path under the root, or `None` when it tries to leave it.
fn safe_relative(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in Path::new(path.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// `main.3f2a9c1b.js`-style names: a dot-separated part of 8+ hex digits.
fn looks_hashed(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|name| {
            name.split('.')
                .any(|part| part.len() >= 8 && part.chars().all(|c| c.is_ascii_hexdigit()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_leave_the_root() {
        assert_eq!(safe_relative("/a/b.js"), Some(PathBuf::from("a/b.js")));
        assert_eq!(safe_relative("/"), Some(PathBuf::new()));
        assert_eq!(safe_relative("/../etc/passwd"), None);
        assert_eq!(safe_relative("/a/../../x"), None);
    }

    #[tokio::test]
    async fn files_from_a_filestore_prefix() {
        use wisp_store::PutCondition;
        let dir = tempfile::tempdir().expect("dir");
        let store = Arc::new(wisp_store_embedded::LocalFilestore::open(dir.path()).expect("store"));
        for (path, body) in [
            ("console/index.html", "<html>"),
            ("console/assets/app.0123abcd.js", "app()"),
            ("elsewhere/secret.txt", "no"),
        ] {
            store
                .put(path, body.as_bytes().to_vec(), PutCondition::Any)
                .await
                .expect("put");
        }
        let files = StaticFiles::from_filestore(store, "console");
        let page = files.serve("/deployments/42", false).await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(page.body().as_ref(), b"<html>");
        assert_eq!(page.headers()[header::CACHE_CONTROL], "no-cache");
        let bundle = files.serve("/assets/app.0123abcd.js", false).await;
        assert_eq!(bundle.body().as_ref(), b"app()");
        assert!(
            bundle.headers()[header::CACHE_CONTROL]
                .to_str()
                .unwrap_or("")
                .contains("immutable")
        );
        let outside = files.serve("/../elsewhere/secret.txt", false).await;
        assert_eq!(outside.status(), StatusCode::NOT_FOUND);
        let missing = files.serve("/assets/gone.js", false).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn hashed_bundles_are_recognised() {
        assert!(looks_hashed(Path::new("main.3f2a9c1b.js")));
        assert!(!looks_hashed(Path::new("index.html")));
        assert!(!looks_hashed(Path::new("favicon.ico")));
    }
}
