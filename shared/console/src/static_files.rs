//! The console's built files (upstream's `web/` build output) from a directory. Every
//! GET that names no file and has no extension is a client-side route and gets
//! `index.html`; a missing asset (with an extension) is a 404.

use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use crate::plain;

pub struct StaticFiles {
    root: PathBuf,
}

impl StaticFiles {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StaticFiles { root: root.into() }
    }

    pub async fn serve(&self, path: &str, head_only: bool) -> Response<Bytes> {
        let Some(relative) = safe_relative(path) else {
            return plain(StatusCode::NOT_FOUND, "not found");
        };
        let candidate = self.root.join(&relative);
        let (file, is_index) = if !relative.as_os_str().is_empty() && is_file(&candidate).await {
            (candidate, false)
        } else if relative.extension().is_some() {
            return plain(StatusCode::NOT_FOUND, "not found");
        } else {
            (self.root.join("index.html"), true)
        };
        let body = match tokio::fs::read(&file).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "console file unreadable");
                return plain(StatusCode::NOT_FOUND, "not found");
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

    #[test]
    fn hashed_bundles_are_recognised() {
        assert!(looks_hashed(Path::new("main.3f2a9c1b.js")));
        assert!(!looks_hashed(Path::new("index.html")));
        assert!(!looks_hashed(Path::new("favicon.ico")));
    }
}
