//! The console's HTTP side, as upstream's `httpapi` and static file server: the login
//! forms (`POST /auth/login/static`, `POST /auth/login`), `GET /auth/callback`,
//! `/auth/logout`, the session cookie, and the console's static files with `index.html`
//! for every client-side route. Transport-free: a whole request in, a whole response
//! out; [`ConsoleLayer`] mounts it in front of the gRPC routes.

mod layer;
mod static_files;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use wisp_auth::{SESSION_COOKIE, SessionSigner, WebCaller};
use wisp_services::ServiceError;
use wisp_services::web::WebApi;
use wisp_services::web::rbac::ADMIN;

pub use layer::{ConsoleLayer, ConsoleService};
pub use static_files::StaticFiles;

pub const LOGIN_PATH: &str = "/auth/login";
pub const STATIC_LOGIN_PATH: &str = "/auth/login/static";
pub const CALLBACK_PATH: &str = "/auth/callback";
pub const LOGOUT_PATH: &str = "/auth/logout";
/// The cookie the login page reads (and deletes) to show what went wrong.
pub const ERROR_COOKIE: &str = "error";
const ERROR_COOKIE_MAX_AGE: u64 = 10 * 60;
/// Largest login form accepted.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// Everything the console's HTTP side needs.
pub struct Console {
    web: Arc<WebApi>,
    signer: SessionSigner,
    /// Cookies without `Secure`: only for plain-HTTP local use.
    insecure_cookie: bool,
    files: Option<StaticFiles>,
}

impl Console {
    pub fn new(web: Arc<WebApi>, signer: SessionSigner) -> Self {
        Console {
            web,
            signer,
            insecure_cookie: false,
            files: None,
        }
    }

    /// Lets the cookies travel over plain HTTP (a console on `http://localhost`).
    pub fn insecure_cookie(mut self, insecure: bool) -> Self {
        self.insecure_cookie = insecure;
        self
    }

    /// Serves the console's built static files from `dir`.
    pub fn with_static_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.files = Some(StaticFiles::new(dir));
        self
    }

    /// Whether `path` belongs to the console rather than to a gRPC service.
    pub fn handles(path: &str) -> bool {
        !(path.starts_with("/grpc.") || path.starts_with("/pipe.api.") || path == "/healthz")
    }

    /// Answers one console request.
    pub async fn handle(&self, req: Request<Bytes>) -> Response<Bytes> {
        let path = req.uri().path().to_string();
        match path.as_str() {
            STATIC_LOGIN_PATH => self.static_login(req).await,
            LOGIN_PATH => self.sso_login(req).await,
            CALLBACK_PATH => self.error_redirect(
                "Single sign-on is not available on this control plane; log in with the static admin",
            ),
            LOGOUT_PATH => self.logout(),
            _ => match &self.files {
                Some(files) if req.method() == Method::GET || req.method() == Method::HEAD => {
                    files.serve(&path, req.method() == Method::HEAD).await
                }
                Some(_) => plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
                None => plain(
                    StatusCode::NOT_FOUND,
                    "the console's static files are not configured (wisp serve --web-dir DIR)",
                ),
            },
        }
    }

    async fn static_login(&self, req: Request<Bytes>) -> Response<Bytes> {
        if req.method() != Method::POST {
            return self.error_redirect("Method not allowed");
        }
        let form = Form::parse(req.body());
        let Some(project_id) = form.get("project") else {
            return self.error_redirect("Missing project id");
        };
        let Some(username) = form.get("username") else {
            return self.error_redirect("Missing username");
        };
        let Some(password) = form.get("password") else {
            return self.error_redirect("Missing password");
        };
        let project = match self.web.load_project(project_id).await {
            Ok(p) => p,
            Err(ServiceError::NotFound(_)) => {
                return self.error_redirect(&format!("Unable to find project: {project_id}"));
            }
            Err(e) => {
                tracing::warn!(project = %project_id, error = %e, "login: project lookup failed");
                return self.error_redirect("Unable to log in right now; try again");
            }
        };
        if project.static_admin_disabled {
            return self.error_redirect("Static admin is disabled");
        }
        let admin = project.static_admin.unwrap_or_default();
        let matches = {
            let hash = admin.password_hash.clone();
            let password = password.to_string();
            // bcrypt takes milliseconds of CPU: keep it off the async workers.
            tokio::task::spawn_blocking(move || wisp_auth::verify_secret(&password, &hash))
                .await
                .unwrap_or(false)
        };
        if admin.username.is_empty() || admin.username != username || !matches {
            tracing::info!(project = %project_id, "static admin login refused");
            return self.error_redirect("Unable to login");
        }
        let caller = WebCaller {
            subject: admin.username.clone(),
            avatar_url: String::new(),
            project_id: project_id.to_string(),
            roles: vec![ADMIN.to_string()],
        };
        let token = match self.signer.sign(&caller) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %e, "login: signing the session failed");
                return self.error_redirect("Internal error");
            }
        };
        tracing::info!(project = %project_id, user = %admin.username, "static admin logged in");
        let mut resp = redirect(StatusCode::FOUND, "/");
        self.set_cookie(
            &mut resp,
            &format!(
                "{SESSION_COOKIE}={token}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict",
                self.signer.ttl().as_secs()
            ),
        );
        resp
    }

    async fn sso_login(&self, req: Request<Bytes>) -> Response<Bytes> {
        if req.method() != Method::POST {
            return self.error_redirect("Method not allowed");
        }
        let form = Form::parse(req.body());
        let Some(project_id) = form.get("project") else {
            return self.error_redirect("Missing project id");
        };
        match self.web.load_project(project_id).await {
            Ok(_) => self.error_redirect(
                "Single sign-on is not available on this control plane; log in with the static admin",
            ),
            Err(_) => self.error_redirect(&format!("Unable to find project {project_id}")),
        }
    }

    fn logout(&self) -> Response<Bytes> {
        let mut resp = redirect(StatusCode::FOUND, "/");
        self.set_cookie(
            &mut resp,
            &format!("{SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"),
        );
        resp
    }

    /// Upstream's failure answer: the message in the readable `error` cookie, and back to
    /// the console's root (which shows the login page).
    fn error_redirect(&self, message: &str) -> Response<Bytes> {
        let mut resp = redirect(StatusCode::SEE_OTHER, "/");
        let value: String = form_urlencoded::byte_serialize(message.as_bytes()).collect();
        // `+` is the form encoding of a space; the console reads the cookie with
        // decodeURIComponent, which only knows `%20`.
        let value = value.replace('+', "%20");
        self.set_cookie(
            &mut resp,
            &format!("{ERROR_COOKIE}={value}; Path=/; Max-Age={ERROR_COOKIE_MAX_AGE}"),
        );
        resp
    }

    fn set_cookie(&self, resp: &mut Response<Bytes>, cookie: &str) {
        let cookie = if self.insecure_cookie {
            cookie.to_string()
        } else {
            format!("{cookie}; Secure")
        };
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            resp.headers_mut().append(header::SET_COOKIE, value);
        }
    }
}

/// A parsed `application/x-www-form-urlencoded` body.
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Form {
        Form(form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first non-empty value of `key`.
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }
}

fn redirect(status: StatusCode, location: &'static str) -> Response<Bytes> {
    let mut resp = Response::new(Bytes::new());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    resp
}

pub(crate) fn plain(status: StatusCode, text: &'static str) -> Response<Bytes> {
    let mut resp = Response::new(Bytes::from_static(text.as_bytes()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
