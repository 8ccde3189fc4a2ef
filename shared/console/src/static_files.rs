//! The console's built files (upstream's `web/` build output) from a directory or from a
//! prefix of the filestore (S3 on AWS). Every GET that names no file and has no
//! extension is a client-side route and gets `index.html`; a missing asset (with an
//! extension) is a 404.
//!
//! Text goes out as UTF-8 (`charset=utf-8`): upstream's bundles hold UTF-8 text, and a
//! browser decodes a script without a charset as the page's encoding, windows-1252 when
//! the page has none either.
//!
//! Behind the ALB a Lambda response holds at most 1 MB, and the console's scripts are
//! larger (v0.57.0: 1.0 MB entry script, 2.05 MB lazy chunk). So in
//! [`StaticFiles::redirect_assets`] mode every file but `index.html` is answered with a
//! redirect to a short-lived presigned URL of the filestore (S3): the bucket stays
//! private, no file passes through the function, and the browser caches the redirect
//! and, for the hashed bundles, the file itself.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use wisp_store::{Filestore, ObjectMeta, PresignedGet, StoreError};

use crate::plain;

/// Presigned URLs are signed as of the start of a window of this length, so every
/// redirect within it hands out the same URL and the browser's cache of the file holds.
const PRESIGN_WINDOW: Duration = Duration::from_secs(3600);
/// How long a presigned URL works after its window starts: at least an hour after it is
/// handed out.
const PRESIGN_EXPIRES: Duration = Duration::from_secs(2 * 3600);
/// How long a browser may reuse a redirect without asking again. Short, because the
/// URL also stops working when the signing credentials (a Lambda role's session)
/// expire, which can be before `PRESIGN_EXPIRES`.
const REDIRECT_MAX_AGE: Duration = Duration::from_secs(600);
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const REVALIDATE: &str = "no-cache";

pub struct StaticFiles {
    source: Source,
    /// Answer files other than `index.html` with a redirect to a presigned URL, when the
    /// source can make one.
    redirect_assets: bool,
}

impl std::fmt::Debug for StaticFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticFiles").finish_non_exhaustive()
    }
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
            redirect_assets: false,
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
            redirect_assets: false,
        }
    }

    /// Answers every file but `index.html` with a redirect to a presigned download URL
    /// (when the filestore has them: S3), so that no file has to fit through the caller.
    pub fn redirect_assets(mut self, redirect: bool) -> Self {
        self.redirect_assets = redirect;
        self
    }

    /// A redirect to a presigned URL of `relative`: `Some` when this source makes them,
    /// with a 404 when the file does not exist.
    async fn redirect(&self, relative: &Path) -> Option<Response<Bytes>> {
        let Source::Store(store, prefix) = &self.source else {
            return None;
        };
        // index.html, and paths without an extension (client-side routes, which get
        // index.html), are answered inline.
        if !self.redirect_assets
            || relative == Path::new("index.html")
            || relative.extension().is_none()
        {
            return None;
        }
        let key = format!("{prefix}{}", relative.to_string_lossy());
        // The object must exist: a missing file is our 404, not the bucket's XML error.
        match store.list(&key, None, 1).await {
            Ok(page) if page.objects.first().is_some_and(|o| o.path == key) => {}
            Ok(_) => return Some(plain(StatusCode::NOT_FOUND, "not found")),
            Err(e) => {
                tracing::warn!(file = %key, error = %wisp_telemetry::chain(&e), "console file lookup failed");
                return Some(plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the console's files cannot be read right now; try again",
                ));
            }
        }
        let request = PresignedGet {
            signed_at: window_start(SystemTime::now()),
            expires_in: PRESIGN_EXPIRES,
            content_type: Some(content_type(relative)),
            cache_control: Some(cache_control(relative, false).to_string()),
        };
        match store.presigned_get(&key, &request).await {
            Ok(Some(url)) => {
                let mut resp = Response::new(Bytes::new());
                *resp.status_mut() = StatusCode::FOUND;
                let Ok(location) = HeaderValue::from_str(&url) else {
                    tracing::error!(file = %key, "presigned URL is not a valid header value");
                    return None;
                };
                let headers = resp.headers_mut();
                headers.insert(header::LOCATION, location);
                headers.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_str(&format!(
                        "private, max-age={}",
                        REDIRECT_MAX_AGE.as_secs()
                    ))
                    .unwrap_or(HeaderValue::from_static(REVALIDATE)),
                );
                Some(resp)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(file = %key, error = %wisp_telemetry::chain(&e), "presigning a console file failed");
                None
            }
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
                        tracing::warn!(file = %path.display(), error = %wisp_telemetry::chain(&e), "console file unreadable");
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
                        tracing::warn!(file = %key, error = %wisp_telemetry::chain(&e), "console file unreadable");
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
        if !relative.as_os_str().is_empty()
            && let Some(redirect) = self.redirect(&relative).await
        {
            return redirect;
        }
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
                    None => return crate::no_console(),
                }
            }
        };
        let mut resp = Response::new(if head_only {
            Bytes::new()
        } else {
            Bytes::from(body)
        });
        let headers = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&content_type(&file)) {
            headers.insert(header::CONTENT_TYPE, v);
        }
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(cache_control(&file, is_index)),
        );
        resp
    }
}

/// The file's media type; text types (HTML, JavaScript, CSS, JSON, SVG, XML, plain
/// text, ...) with `charset=utf-8`.
pub fn content_type(file: &Path) -> String {
    let mime = mime_guess::from_path(file).first_or_octet_stream();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || matches!(
            mime.subtype().as_str(),
            "javascript" | "ecmascript" | "json" | "xml" | "manifest+json"
        )
        || mime
            .suffix()
            .is_some_and(|s| s == mime_guess::mime::XML || s == mime_guess::mime::JSON);
    if textual && mime.get_param(mime_guess::mime::CHARSET).is_none() {
        format!("{}; charset=utf-8", mime.essence_str())
    } else {
        mime.to_string()
    }
}

/// What a console file is stored with where the filestore serves it itself (S3): the same
/// `Content-Type` and `Cache-Control` as [`StaticFiles`] answers with.
pub fn object_meta(file: &Path) -> ObjectMeta {
    ObjectMeta {
        content_type: Some(content_type(file)),
        cache_control: Some(cache_control(file, file == Path::new("index.html")).to_string()),
    }
}

/// Bundles carry a content hash in their names and never change; index.html names the
/// current ones, so it (and anything unhashed) must always be revalidated.
fn cache_control(file: &Path, is_index: bool) -> &'static str {
    if !is_index && looks_hashed(file) {
        IMMUTABLE
    } else {
        REVALIDATE
    }
}

/// The start of the presigning window `now` falls in.
fn window_start(now: SystemTime) -> SystemTime {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let window = PRESIGN_WINDOW.as_secs();
    UNIX_EPOCH + Duration::from_secs(secs - secs % window)
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
    fn text_types_say_utf8() {
        for (file, expected) in [
            ("index.html", "text/html; charset=utf-8"),
            (
                "assets/index.0123abcd9.js",
                "text/javascript; charset=utf-8",
            ),
            ("assets/app.css", "text/css; charset=utf-8"),
            ("manifest.json", "application/json; charset=utf-8"),
            ("assets/logo.12345678.svg", "image/svg+xml; charset=utf-8"),
            ("robots.txt", "text/plain; charset=utf-8"),
            ("favicon.ico", "image/x-icon"),
            ("assets/logo.png", "image/png"),
            ("font.woff2", "font/woff2"),
            ("no-extension", "application/octet-stream"),
        ] {
            assert_eq!(content_type(Path::new(file)), expected, "{file}");
        }
    }

    #[test]
    fn presigning_windows_are_stable() {
        let at = UNIX_EPOCH + Duration::from_secs(10 * 3600 + 1234);
        assert_eq!(
            window_start(at),
            UNIX_EPOCH + Duration::from_secs(10 * 3600)
        );
        assert_eq!(window_start(at + Duration::from_secs(60)), window_start(at));
        assert!(PRESIGN_EXPIRES >= PRESIGN_WINDOW + REDIRECT_MAX_AGE);
    }

    #[tokio::test]
    async fn a_store_without_presigned_urls_serves_inline() {
        use wisp_store::PutCondition;
        let dir = tempfile::tempdir().expect("dir");
        let store = Arc::new(wisp_store_embedded::LocalFilestore::open(dir.path()).expect("store"));
        store
            .put(
                "console/assets/app.0123abcd.js",
                "app()".into(),
                PutCondition::Any,
            )
            .await
            .expect("put");
        let files = StaticFiles::from_filestore(store, "console").redirect_assets(true);
        let bundle = files.serve("/assets/app.0123abcd.js", false).await;
        assert_eq!(bundle.status(), StatusCode::OK);
        assert_eq!(bundle.body().as_ref(), b"app()");
        assert_eq!(
            bundle.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
    }

    #[test]
    fn hashed_bundles_are_recognised() {
        assert!(looks_hashed(Path::new("main.3f2a9c1b.js")));
        assert!(!looks_hashed(Path::new("index.html")));
        assert!(!looks_hashed(Path::new("favicon.ico")));
    }
}
