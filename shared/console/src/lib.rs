//! The console's HTTP side, as upstream's `httpapi` and static file server: the login
//! forms (`POST /auth/login/static`, `POST /auth/login`), `GET /auth/callback`,
//! `/auth/logout`, the session cookie, and the console's static files with `index.html`
//! for every client-side route. Transport-free: a whole request in, a whole response
//! out; [`ConsoleLayer`] mounts it in front of the gRPC routes.

mod layer;
pub mod oidc;
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
/// The cookie holding an SSO login's `state` between `/auth/login` and the callback.
pub const STATE_COOKIE: &str = "state";
/// How long an SSO login may take from the form to the callback.
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(30 * 60);
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
    /// Opens the SSO client secrets stored in projects (the encryption key's AES key).
    sso_key: Option<[u8; 32]>,
}

impl Console {
    pub fn new(web: Arc<WebApi>, signer: SessionSigner) -> Self {
        Console {
            web,
            signer,
            insecure_cookie: false,
            files: None,
            sso_key: None,
        }
    }

    /// Enables SSO login with the key that opens the projects' stored client secrets.
    pub fn with_sso_key(mut self, key: [u8; 32]) -> Self {
        self.sso_key = Some(key);
        self
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

    /// Serves the console's built static files from `prefix` of the filestore (S3 on
    /// AWS).
    pub fn with_static_filestore(
        mut self,
        filestore: std::sync::Arc<dyn wisp_store::Filestore>,
        prefix: impl Into<String>,
    ) -> Self {
        self.files = Some(StaticFiles::from_filestore(filestore, prefix));
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
            CALLBACK_PATH => self.sso_callback(req).await,
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
        let project = match self.web.load_project(project_id).await {
            Ok(p) => p,
            Err(_) => return self.error_redirect(&format!("Unable to find project {project_id}")),
        };
        let (oidc, client_id, _) = match self.oidc_settings(&project) {
            Ok(s) => s,
            Err(e) => return self.error_redirect(&e.to_string()),
        };
        // The state names the project and expires; the callback checks it against the
        // cookie, so a login cannot be started by someone else's page.
        let state = match self.signer.clone().with_ttl(STATE_TTL).sign(&WebCaller {
            subject: format!("sso-state-{}", wisp_auth::keys::generate_random_string(16)),
            avatar_url: String::new(),
            project_id: project.id.clone(),
            roles: vec![],
        }) {
            Ok(s) => s,
            Err(_) => return self.error_redirect("Internal error"),
        };
        let client = match oidc::OidcClient::new() {
            Ok(c) => c,
            Err(e) => return self.error_redirect(&e.to_string()),
        };
        match client.authorization_url(&oidc, &client_id, &state).await {
            Ok(url) => {
                let mut resp = Response::new(Bytes::new());
                *resp.status_mut() = StatusCode::FOUND;
                if let Ok(v) = HeaderValue::from_str(&url) {
                    resp.headers_mut().insert(header::LOCATION, v);
                }
                self.set_cookie(
                    &mut resp,
                    &format!(
                        "{STATE_COOKIE}={state}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax",
                        STATE_TTL.as_secs()
                    ),
                );
                resp
            }
            Err(e) => {
                tracing::warn!(project = %project.id, error = %e, "SSO login could not start");
                self.error_redirect(&e.to_string())
            }
        }
    }

    async fn sso_callback(&self, req: Request<Bytes>) -> Response<Bytes> {
        let query = Form::parse(req.uri().query().unwrap_or_default().as_bytes());
        let (Some(code), Some(state)) = (query.get("code"), query.get("state")) else {
            return self.error_redirect("Missing code or state");
        };
        let cookie_state = req
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|h| wisp_auth::credentials::find_cookie(h, STATE_COOKIE));
        if cookie_state != Some(state) {
            return self.error_redirect("The login expired or was not started here; try again");
        }
        let Ok(started) = self.signer.verify(state) else {
            return self.error_redirect("The login expired; try again");
        };
        let project = match self.web.load_project(&started.project_id).await {
            Ok(p) => p,
            Err(_) => {
                return self
                    .error_redirect(&format!("Unable to find project {}", started.project_id));
            }
        };
        let (oidc, client_id, client_secret) = match self.oidc_settings(&project) {
            Ok(s) => s,
            Err(e) => return self.error_redirect(&e.to_string()),
        };
        let user = match oidc::OidcClient::new() {
            Ok(client) => {
                client
                    .user(&oidc, &client_id, &client_secret, code, &project)
                    .await
            }
            Err(e) => Err(e),
        };
        let user = match user {
            Ok(u) => u,
            Err(e) => {
                tracing::info!(project = %project.id, error = %e, "SSO login refused");
                return self.error_redirect(&e.to_string());
            }
        };
        let caller = WebCaller {
            subject: user.username,
            avatar_url: user.avatar_url,
            project_id: project.id.clone(),
            roles: user.roles,
        };
        let Ok(token) = self.signer.sign(&caller) else {
            return self.error_redirect("Internal error");
        };
        tracing::info!(project = %project.id, user = %caller.subject, roles = ?caller.roles, "SSO user logged in");
        let mut resp = redirect(StatusCode::FOUND, "/");
        self.set_cookie(
            &mut resp,
            &format!(
                "{SESSION_COOKIE}={token}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict",
                self.signer.ttl().as_secs()
            ),
        );
        self.set_cookie(
            &mut resp,
            &format!("{STATE_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"),
        );
        resp
    }

    /// The project's OIDC settings with the client id and secret opened.
    fn oidc_settings(
        &self,
        project: &wisp_proto::model::Project,
    ) -> Result<(wisp_proto::model::project_sso_config::Oidc, String, String), oidc::SsoError> {
        use wisp_proto::model::project_sso_config::Provider;
        let sso = project.sso.as_ref().ok_or_else(|| {
            oidc::SsoError::Config("Single sign-on is not configured for this project".into())
        })?;
        if sso.provider != Provider::Oidc as i32 {
            return Err(oidc::SsoError::Config(
                "Only OIDC single sign-on is available on this control plane".into(),
            ));
        }
        let settings = sso.oidc.clone().ok_or_else(|| {
            oidc::SsoError::Config("The project's OIDC settings are missing".into())
        })?;
        let key = self
            .sso_key
            .as_ref()
            .ok_or_else(|| oidc::SsoError::Config("Single sign-on is not enabled".into()))?;
        let open = |v: &str| {
            wisp_services::web::unseal(key, v).map_err(|_| {
                oidc::SsoError::Config("The project's SSO secrets are unreadable".into())
            })
        };
        let client_id = open(&settings.client_id)?;
        let client_secret = open(&settings.client_secret)?;
        Ok((settings, client_id, client_secret))
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
