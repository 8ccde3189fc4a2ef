//! The console's HTTP side, as upstream's `httpapi` and static file server: the login
//! forms (`POST /auth/login/static`, `POST /auth/login`), `GET /auth/callback`,
//! `/auth/logout`, the session cookie, and the console's static files with `index.html`
//! for every client-side route. Transport-free: a whole request in, a whole response
//! out; [`ConsoleLayer`] mounts it in front of the gRPC routes.

pub mod github;
mod layer;
pub mod login_guard;
pub mod oidc;
mod provider;
mod static_files;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use wisp_auth::{
    SESSION_COOKIE, SSO_STATE_TTL, SessionSigner, SsoState, SsoStateSigner, WebCaller,
};
use wisp_proto::model::ProjectSsoConfig;
use wisp_proto::model::project_sso_config::{self, Provider};
use wisp_services::ServiceError;
use wisp_services::web::WebApi;
use wisp_services::web::rbac::ADMIN;
use wisp_services::web::sso_policy::ProviderPolicy;

use crate::oidc::SsoError;

pub use layer::{ConsoleLayer, ConsoleService};
pub use static_files::{StaticFiles, object_meta};

pub const LOGIN_PATH: &str = "/auth/login";
pub const STATIC_LOGIN_PATH: &str = "/auth/login/static";
pub const CALLBACK_PATH: &str = "/auth/callback";
pub const LOGOUT_PATH: &str = "/auth/logout";
/// The cookie the login page reads (and deletes) to show what went wrong.
pub const ERROR_COOKIE: &str = "error";
/// The cookie holding an SSO login's signed ticket between `/auth/login` and the
/// callback.
pub const STATE_COOKIE: &str = "state";
/// What the browser is told when an SSO login fails for a reason that is the provider's
/// or the configuration's: the details (status codes, addresses, token errors) go to the
/// log only, so the login page is no oracle for probing hosts.
pub const SSO_FAILED: &str = "Single sign-on failed; the control plane's log says why";
const ERROR_COOKIE_MAX_AGE: u64 = 10 * 60;
/// What the browser is told when a static login is refused, whatever the reason.
pub const LOGIN_FAILED: &str = "Unable to login";
/// Largest login form accepted.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// Everything the console's HTTP side needs.
pub struct Console {
    web: Arc<WebApi>,
    signer: SessionSigner,
    sso_states: SsoStateSigner,
    /// Cookies without `Secure`: only for plain-HTTP local use.
    insecure_cookie: bool,
    files: Option<StaticFiles>,
    /// Opens the SSO client secrets stored in projects (the encryption key's AES key).
    sso_key: Option<[u8; 32]>,
    /// `<address>/auth/callback`, the OAuth redirect for GitHub logins.
    callback_url: Option<String>,
    /// The config's `sharedSSOConfigs` by name, secrets in clear.
    shared_sso: HashMap<String, ProjectSsoConfig>,
    /// Proxies whose `X-Forwarded-For` names a login's source.
    trusted_proxies: Vec<login_guard::Cidr>,
    /// The static logins' bcrypt checks.
    password_checks: login_guard::PasswordChecks,
    /// What SSO settings may make the console reach.
    sso_policy: ProviderPolicy,
    /// Projects (or `*`) whose OIDC logins read no default role claim
    /// (`oidcNoDefaultRoleClaims`).
    no_default_role_claims: Vec<String>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

/// Whether the user name typed is the admin's: compared as SHA-256 digests, in constant
/// time, so that the time taken says nothing about how much of it matched.
fn same_user_name(admin: &str, typed: &str) -> bool {
    use sha2::Digest;
    let a = sha2::Sha256::digest(admin.as_bytes());
    let b = sha2::Sha256::digest(typed.as_bytes());
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// A project's SSO settings ready for a login: the provider's section with the client
/// id and secret opened.
enum Sso {
    Oidc(project_sso_config::Oidc),
    Github(project_sso_config::GitHub),
}

struct ResolvedSso {
    sso: Sso,
    /// What the provider's addresses may be.
    policy: ProviderPolicy,
    client_id: String,
    client_secret: String,
    /// `session_ttl` hours, when set.
    session_ttl: Option<std::time::Duration>,
    /// Whether an OIDC project without `roles_claim_key` reads upstream's default role
    /// claims.
    default_role_claims: bool,
}

impl ResolvedSso {
    /// Where to send the browser. `github_redirect` is GitHub's callback (OIDC settings
    /// carry their own redirect URI).
    async fn authorization_url(
        &self,
        state: &SsoState,
        github_redirect: Option<&str>,
    ) -> Result<String, SsoError> {
        match &self.sso {
            Sso::Oidc(oidc) => {
                oidc::OidcClient::new(&oidc.proxy_url, self.policy)?
                    .authorization_url(oidc, &self.client_id, state)
                    .await
            }
            Sso::Github(gh) => github::authorization_url(
                gh,
                &self.client_id,
                github_redirect,
                &state.id,
                self.policy,
            ),
        }
    }

    /// Trades the provider's `code` for the signed-in user and their roles in `project`.
    async fn user(
        &self,
        code: &str,
        state: &SsoState,
        github_redirect: Option<&str>,
        project: &wisp_proto::model::Project,
    ) -> Result<oidc::SsoUser, SsoError> {
        match &self.sso {
            Sso::Oidc(oidc) => {
                oidc::OidcClient::new(&oidc.proxy_url, self.policy)?
                    .user(
                        oidc,
                        &oidc::Client {
                            id: &self.client_id,
                            secret: &self.client_secret,
                        },
                        code,
                        state,
                        project,
                        self.default_role_claims,
                    )
                    .await
            }
            Sso::Github(gh) => {
                github::GithubClient::new(gh, self.policy)?
                    .user(
                        &self.client_id,
                        &self.client_secret,
                        code,
                        github_redirect,
                        project,
                    )
                    .await
            }
        }
    }
}

impl Console {
    pub fn new(web: Arc<WebApi>, signer: SessionSigner, sso_states: SsoStateSigner) -> Self {
        Console {
            web,
            signer,
            sso_states,
            insecure_cookie: false,
            files: None,
            sso_key: None,
            callback_url: None,
            shared_sso: HashMap::new(),
            trusted_proxies: Vec::new(),
            password_checks: login_guard::PasswordChecks::default(),
            sso_policy: ProviderPolicy::default(),
            no_default_role_claims: Vec::new(),
        }
    }

    /// Projects (ids, or `*` for all) whose OIDC logins read roles from the project's
    /// `rolesClaimKey` only (the config's `oidcNoDefaultRoleClaims`).
    pub fn with_no_default_role_claims(mut self, projects: &[String]) -> Self {
        self.no_default_role_claims = projects.to_vec();
        self
    }

    /// What SSO settings may make the console reach (`wisp serve
    /// --sso-allow-private-addresses` allows private addresses).
    pub fn with_sso_policy(mut self, policy: ProviderPolicy) -> Self {
        self.sso_policy = policy;
        self
    }

    /// Believes `X-Forwarded-For` from these proxies (`wisp serve --trusted-proxy`): a
    /// login's source is then the address they saw.
    pub fn with_trusted_proxies(mut self, proxies: Vec<login_guard::Cidr>) -> Self {
        self.trusted_proxies = proxies;
        self
    }

    /// The control plane's public address (`spec.address`): GitHub logins come back to
    /// `<address>/auth/callback`.
    pub fn with_address(mut self, address: &str) -> Self {
        let address = address.trim().trim_end_matches('/');
        self.callback_url = (!address.is_empty()).then(|| format!("{address}{CALLBACK_PATH}"));
        self
    }

    /// The config's shared SSO settings, which projects name in `shared_sso_name`.
    pub fn with_shared_sso(mut self, configs: &[wisp_config::SharedSsoConfig]) -> Self {
        self.shared_sso = configs
            .iter()
            .map(|c| (c.name.clone(), shared_sso_as_model(c)))
            .collect();
        self
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

    /// Serves the console's built static files as `files` says.
    pub fn with_static_files(mut self, files: StaticFiles) -> Self {
        self.files = Some(files);
        self
    }

    /// Whether `path` belongs to the console rather than to a gRPC service.
    pub fn handles(path: &str) -> bool {
        !(path.starts_with("/grpc.")
            || path.starts_with("/pipe.api.")
            || path.starts_with("/opentelemetry.proto.")
            || path == "/healthz")
    }

    /// Answers one console request, with the security headers every console response
    /// carries.
    pub async fn handle(&self, req: Request<Bytes>) -> Response<Bytes> {
        let mut resp = self.route(req).await;
        self.security_headers(resp.headers_mut());
        resp
    }

    /// Headers the upstream console works with: no framing by other sites (clickjacking),
    /// no MIME sniffing, no referrer across origins, and, when cookies are `Secure` (the
    /// console is served over HTTPS), HSTS. No script or style policy: the upstream
    /// console's bundle injects styles at run time.
    fn security_headers(&self, headers: &mut http::HeaderMap) {
        let set = |headers: &mut http::HeaderMap, name: &'static str, value: &'static str| {
            headers
                .entry(name)
                .or_insert_with(|| HeaderValue::from_static(value));
        };
        set(headers, "content-security-policy", "frame-ancestors 'none'");
        set(headers, "x-frame-options", "DENY");
        set(headers, "x-content-type-options", "nosniff");
        set(headers, "referrer-policy", "same-origin");
        if !self.insecure_cookie {
            set(
                headers,
                "strict-transport-security",
                "max-age=31536000; includeSubDomains",
            );
        }
    }

    async fn route(&self, req: Request<Bytes>) -> Response<Bytes> {
        let path = req.uri().path().to_string();
        match path.as_str() {
            STATIC_LOGIN_PATH => self.static_login(req).await,
            LOGIN_PATH => self.sso_login(req).await,
            CALLBACK_PATH => self.sso_callback(req).await,
            LOGOUT_PATH if req.method() == Method::POST => self.logout(&req).await,
            // The upstream console's logout is a link: GET answers a page whose button
            // posts the logout, so that no other site can log a user out with a link.
            LOGOUT_PATH if req.method() == Method::GET || req.method() == Method::HEAD => {
                html(StatusCode::OK, LOGOUT_PAGE)
            }
            LOGOUT_PATH => plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
            _ => match &self.files {
                Some(files) if req.method() == Method::GET || req.method() == Method::HEAD => {
                    files.serve(&path, req.method() == Method::HEAD).await
                }
                Some(_) => plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
                None => no_console(),
            },
        }
    }

    /// The static admin's login. Every refusal that could tell a stranger something
    /// (no such project, static admin disabled, wrong user name or password) answers the
    /// same [`LOGIN_FAILED`], after the same work: one bcrypt whatever the user name
    /// ([`login_guard::decoy_hash`]), so that the answer's time does not tell whether a
    /// name is the admin's. bcrypt runs within [`login_guard::PasswordChecks`]' slots;
    /// failures are counted per project, user name and source, and per source
    /// ([`wisp_services::web::logins`]), so one source buys at most
    /// `MAX_FAILED_LOGINS_PER_SOURCE` bcrypts per window.
    async fn static_login(&self, req: Request<Bytes>) -> Response<Bytes> {
        if req.method() != Method::POST {
            return self.error_redirect("Method not allowed");
        }
        if cross_site(&req) {
            return self.error_redirect("Log in from the console's own page");
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
        let source = login_guard::client_source(&req, &self.trusted_proxies);
        let failed_before = self.web.failed_logins(project_id, username, &source).await;
        if failed_before.too_many() {
            tracing::warn!(project = %project_id, source = %source, "static admin login refused: too many failures");
            return self.error_redirect("Too many failed logins; try again later");
        }
        // Deviation: upstream answers "Unable to find project" and "Static admin is
        // disabled"; one answer for every refusal tells a stranger nothing.
        let project = match self.web.load_project(project_id).await {
            Ok(p) => Some(p),
            Err(ServiceError::NotFound(_)) => None,
            Err(e) => {
                tracing::warn!(project = %project_id, error = %wisp_telemetry::chain(&e), "login: project lookup failed");
                return self.error_redirect("Unable to log in right now; try again");
            }
        };
        let admin = project
            .filter(|p| !p.static_admin_disabled)
            .and_then(|p| p.static_admin)
            .filter(|a| !a.username.is_empty());
        // Deviation: upstream compares the user name first and runs bcrypt only for the
        // admin's, so the answer's time tells whether a name is the admin's (issue 33.6).
        // Here a wrong name is checked against the admin's own hash (the same cost) and
        // an unknown project or disabled admin against a decoy of the default cost; the
        // result counts only for the admin's own name.
        let is_admin = admin
            .as_ref()
            .is_some_and(|a| same_user_name(&a.username, username));
        let hash = admin.as_ref().map(|a| a.password_hash.clone());
        let password = password.to_string();
        let matches = match self
            .password_checks
            .run(move || match hash {
                Some(hash) => wisp_auth::verify_secret(&password, &hash),
                None => wisp_auth::verify_secret(&password, login_guard::decoy_hash()),
            })
            .await
        {
            Ok(matches) => matches,
            Err(login_guard::Busy) => {
                tracing::warn!(project = %project_id, "static admin login turned away: too many at once");
                return self.error_redirect("Too many logins at once; try again in a moment");
            }
        };
        wisp_telemetry::record_slow_hashes("static_admin", 1);
        let Some(admin) = admin.filter(|_| is_admin && matches) else {
            return self
                .login_refused(project_id, username, &source, failed_before)
                .await;
        };
        if failed_before.user > 0 {
            self.web
                .clear_failed_logins(project_id, username, &source)
                .await;
        }
        let caller = WebCaller {
            subject: admin.username.clone(),
            avatar_url: String::new(),
            project_id: project_id.to_string(),
            roles: vec![ADMIN.to_string()],
            static_admin: wisp_auth::static_admin_fingerprint(&admin.password_hash),
            ..Default::default()
        };
        let token = match self.signer.sign(&caller) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %wisp_telemetry::chain(&e), "login: signing the session failed");
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

    /// Counts a refused static login and answers [`LOGIN_FAILED`].
    async fn login_refused(
        &self,
        project_id: &str,
        username: &str,
        source: &str,
        before: wisp_services::web::logins::FailedLogins,
    ) -> Response<Bytes> {
        tracing::info!(project = %project_id, source = %source, "static admin login refused");
        self.web
            .record_failed_login(project_id, username, source, before)
            .await;
        self.error_redirect(LOGIN_FAILED)
    }

    async fn sso_login(&self, req: Request<Bytes>) -> Response<Bytes> {
        if req.method() != Method::POST {
            return self.error_redirect("Method not allowed");
        }
        if cross_site(&req) {
            return self.error_redirect("Log in from the console's own page");
        }
        let form = Form::parse(req.body());
        let Some(project_id) = form.get("project") else {
            return self.error_redirect("Missing project id");
        };
        let project = match self.web.load_project(project_id).await {
            Ok(p) => p,
            Err(_) => return self.error_redirect(&format!("Unable to find project {project_id}")),
        };
        let resolved = match self.sso_settings(&project) {
            Ok(s) => s,
            Err(e) => return self.sso_failed(&project.id, &e),
        };
        // The state is a ticket of its own kind (never a session), in an HttpOnly cookie;
        // the provider sees only its id.
        let Ok((state, ticket)) = self.sso_states.start(&project.id) else {
            return self.error_redirect("Internal error");
        };
        let url = resolved
            .authorization_url(&state, self.github_redirect(&project.id).as_deref())
            .await;
        match url {
            Ok(url) => {
                let mut resp = Response::new(Bytes::new());
                *resp.status_mut() = StatusCode::FOUND;
                if let Ok(v) = HeaderValue::from_str(&url) {
                    resp.headers_mut().insert(header::LOCATION, v);
                }
                self.set_cookie(
                    &mut resp,
                    &format!(
                        "{STATE_COOKIE}={ticket}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax",
                        SSO_STATE_TTL.as_secs()
                    ),
                );
                resp
            }
            Err(e) => self.sso_failed(&project.id, &e),
        }
    }

    /// An SSO failure: the details to the log, a message without them to the browser
    /// (except a refusal, which tells the user what to ask for).
    fn sso_failed(&self, project_id: &str, err: &SsoError) -> Response<Bytes> {
        match err {
            SsoError::Denied(why) => {
                tracing::info!(project = %project_id, reason = %why, "SSO login refused");
                self.error_redirect(why)
            }
            // The administrator's settings, not the network: safe and useful to show.
            SsoError::Config { message: why, .. } => {
                tracing::warn!(project = %project_id, reason = %why, "SSO is misconfigured");
                self.error_redirect(why)
            }
            other => {
                tracing::warn!(project = %project_id, error = %wisp_telemetry::chain(&other), "SSO login failed");
                self.error_redirect(SSO_FAILED)
            }
        }
    }

    /// GitHub's `redirect_uri`: the callback with the project, as upstream.
    fn github_redirect(&self, project_id: &str) -> Option<String> {
        let project: String = form_urlencoded::byte_serialize(project_id.as_bytes()).collect();
        self.callback_url
            .as_ref()
            .map(|c| format!("{c}?project={project}"))
    }

    async fn sso_callback(&self, req: Request<Bytes>) -> Response<Bytes> {
        let query = Form::parse(req.uri().query().unwrap_or_default().as_bytes());
        let (Some(code), Some(state)) = (query.get("code"), query.get("state")) else {
            return self.error_redirect("Missing code or state");
        };
        let ticket = req
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|h| wisp_auth::credentials::find_cookie(h, STATE_COOKIE));
        let Some(started) = ticket.and_then(|t| self.sso_states.open(t, state).ok()) else {
            return self.error_redirect("The login expired or was not started here; try again");
        };
        // Each state finishes one login at most.
        if !self.web.claim_sso_state(&started.id, SSO_STATE_TTL).await {
            return self.error_redirect("The login expired or was not started here; try again");
        }
        let project = match self.web.load_project(&started.project_id).await {
            Ok(p) => p,
            Err(_) => {
                return self
                    .error_redirect(&format!("Unable to find project {}", started.project_id));
            }
        };
        let resolved = match self.sso_settings(&project) {
            Ok(s) => s,
            Err(e) => return self.sso_failed(&project.id, &e),
        };
        let user = resolved
            .user(
                code,
                &started,
                self.github_redirect(&project.id).as_deref(),
                &project,
            )
            .await;
        let user = match user {
            Ok(u) => u,
            Err(e) => return self.sso_failed(&project.id, &e),
        };
        let caller = WebCaller {
            subject: user.username,
            avatar_url: user.avatar_url,
            project_id: project.id.clone(),
            roles: user.roles,
            sso: Some(wisp_auth::SsoGroups {
                groups: user.groups,
                role_names: user.role_names,
            }),
            ..Default::default()
        };
        let signer = match resolved.session_ttl {
            Some(ttl) => self.signer.clone().with_ttl(ttl),
            None => self.signer.clone(),
        };
        let Ok(token) = signer.sign(&caller) else {
            return self.error_redirect("Internal error");
        };
        tracing::info!(project = %project.id, user = %caller.subject, roles = ?caller.roles, "SSO user logged in");
        let mut resp = redirect(StatusCode::FOUND, "/");
        self.set_cookie(
            &mut resp,
            &format!(
                "{SESSION_COOKIE}={token}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict",
                signer.ttl().as_secs()
            ),
        );
        self.set_cookie(
            &mut resp,
            &format!("{STATE_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"),
        );
        resp
    }

    /// The SSO settings a login of `project` uses: the shared configuration it names
    /// (`shared_sso_name`, secrets in clear in the config), else its own (secrets sealed
    /// with the encryption key).
    fn sso_settings(&self, project: &wisp_proto::model::Project) -> Result<ResolvedSso, SsoError> {
        let config = |m: &str| SsoError::config(m.to_string());
        let (sso, sealed) =
            if project.shared_sso_name.is_empty() {
                let sso = project
                    .sso
                    .as_ref()
                    .ok_or_else(|| config("Single sign-on is not configured for this project"))?;
                (sso, true)
            } else {
                let sso = self.shared_sso.get(&project.shared_sso_name).ok_or_else(|| {
                SsoError::config(format!(
                    "The shared SSO configuration {:?} is not in the control plane's config",
                    project.shared_sso_name
                ))
            })?;
                (sso, false)
            };
        let open = |v: &str| -> Result<String, SsoError> {
            match (sealed, &self.sso_key) {
                (false, _) => Ok(v.to_string()),
                (true, Some(key)) => wisp_services::web::unseal(key, v)
                    .map_err(|_| config("The project's SSO secrets are unreadable")),
                (true, None) => Err(config("Single sign-on is not enabled")),
            }
        };
        let session_ttl = u64::try_from(sso.session_ttl)
            .ok()
            .filter(|h| *h > 0)
            .map(|h| std::time::Duration::from_secs(h.saturating_mul(3600)));
        let (sso, client_id, client_secret) = match Provider::try_from(sso.provider) {
            Ok(Provider::Oidc) => {
                let s = sso
                    .oidc
                    .clone()
                    .ok_or_else(|| config("The project's OIDC settings are missing"))?;
                let (id, secret) = (open(&s.client_id)?, open(&s.client_secret)?);
                (Sso::Oidc(s), id, secret)
            }
            Ok(Provider::Github) => {
                let s = sso
                    .github
                    .clone()
                    .ok_or_else(|| config("The project's GitHub settings are missing"))?;
                let (id, secret) = (open(&s.client_id)?, open(&s.client_secret)?);
                (Sso::Github(s), id, secret)
            }
            Ok(Provider::Google) => {
                return Err(config(
                    "Google single sign-on is not available (upstream PipeCD has none either); use OIDC",
                ));
            }
            Err(_) => return Err(config("The project's SSO provider is unknown")),
        };
        Ok(ResolvedSso {
            sso,
            policy: self.sso_policy,
            client_id,
            client_secret,
            session_ttl,
            default_role_claims: !self
                .no_default_role_claims
                .iter()
                .any(|p| p == "*" || *p == project.id),
        })
    }

    /// Ends the session on the server too: its id is revoked, so the token stops
    /// working even where the cookie was kept.
    async fn logout(&self, req: &Request<Bytes>) -> Response<Bytes> {
        if cross_site(req) {
            return plain(StatusCode::FORBIDDEN, "log out from the console's own page");
        }
        let token = req
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .find_map(|h| wisp_auth::credentials::find_cookie(h, SESSION_COOKIE));
        if let Some(caller) = token.and_then(|t| self.signer.verify(t).ok())
            && let Err(e) = self.web.end_session(&caller).await
        {
            // The cookie is kept: the session may still work on other instances, and
            // logging out again retries.
            tracing::warn!(error = %wisp_telemetry::chain(&e), "logout failed");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Logout failed: {e}"),
            );
        }
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

/// The page `GET /auth/logout` answers: a button that posts the logout.
const LOGOUT_PAGE: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>Log out of PipeCD</title>\
<style>body{font-family:sans-serif;display:flex;justify-content:center;margin-top:20vh}\
button{font-size:1rem;padding:.6em 1.4em;margin:0 .4em}</style></head><body>\
<form method=\"post\" action=\"/auth/logout\"><p>Log out of PipeCD?</p>\
<button type=\"submit\">Log out</button><a href=\"/\">Cancel</a></form></body></html>\n";

/// Whether a browser sent `req` from another site: `Sec-Fetch-Site: cross-site`, or an
/// `Origin` whose host is not the one the request went to. Requests without either
/// header (non-browser clients) are not cross-site.
fn cross_site(req: &Request<Bytes>) -> bool {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    if header("sec-fetch-site") == Some("cross-site") {
        return true;
    }
    let Some(origin) = header("origin") else {
        return false;
    };
    let origin_host = origin
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.authority().map(|a| a.as_str().to_ascii_lowercase()));
    let host = header("host").map(str::to_ascii_lowercase).or_else(|| {
        req.uri()
            .authority()
            .map(|a| a.as_str().to_ascii_lowercase())
    });
    match (origin_host, host) {
        (Some(origin), Some(host)) => {
            // The default ports may be left out on either side.
            let bare = |h: &str| {
                h.trim_end_matches(":443")
                    .trim_end_matches(":80")
                    .to_string()
            };
            bare(&origin) != bare(&host)
        }
        // `Origin: null` (a sandboxed or privacy-sensitive context), or no host to compare.
        _ => true,
    }
}

fn html(status: StatusCode, page: &'static str) -> Response<Bytes> {
    let mut resp = Response::new(Bytes::from_static(page.as_bytes()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    resp
}

/// What a page of the console answers while no console is installed (no `index.html`):
/// how to get one in one command, and that the APIs work meanwhile. A page, not a bare
/// 404 text: the browser is where a new user looks first.
const NO_CONSOLE_PAGE: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Wisp: no web console yet</title>
<style>body{font-family:sans-serif;max-width:44em;margin:3em auto;padding:0 1em;line-height:1.5}
code,pre{background:#f3f3f3;padding:.15em .3em}pre{padding:.6em}</style></head>
<body><h1>The control plane is running; its web console is not installed yet</h1>
<p>Get PipeCD's web console in one command (it downloads upstream's release image, so it
needs the internet), then reload this page:</p>
<pre>wisp console fetch</pre>
<p>Give it the same <code>--data-dir</code> as <code>wisp serve</code> if you set one. A
console of another release: <code>wisp serve --console v0.57.1</code>; one you built:
<code>wisp serve --console DIR</code>. On the AWS deployment:
<code>wisp console upload --version VERSION --config-secret NAME</code>.</p>
<p>Meanwhile the APIs work: pipeds and <code>pipectl</code> connect as usual.</p>
</body></html>
"#;

/// [`NO_CONSOLE_PAGE`], as a 404.
pub(crate) fn no_console() -> Response<Bytes> {
    html(StatusCode::NOT_FOUND, NO_CONSOLE_PAGE)
}

pub(crate) fn plain(status: StatusCode, text: impl Into<Bytes>) -> Response<Bytes> {
    let mut resp = Response::new(text.into());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// A `sharedSSOConfigs` entry in the model's shape, secrets in clear.
fn shared_sso_as_model(c: &wisp_config::SharedSsoConfig) -> ProjectSsoConfig {
    use wisp_config::SsoProvider;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    ProjectSsoConfig {
        provider: match c.provider {
            SsoProvider::Github => Provider::Github,
            SsoProvider::Google => Provider::Google,
            SsoProvider::Oidc => Provider::Oidc,
        } as i32,
        session_ttl: c
            .session_ttl
            .and_then(|h| i64::try_from(h).ok())
            .unwrap_or(0),
        github: c.github.as_ref().map(|g| project_sso_config::GitHub {
            client_id: g.client_id.clone(),
            client_secret: g.client_secret.expose().to_string(),
            base_url: text(&g.base_url),
            upload_url: text(&g.upload_url),
            proxy_url: text(&g.proxy_url),
        }),
        google: c.google.as_ref().map(|g| project_sso_config::Google {
            client_id: g.client_id.clone(),
            client_secret: g.client_secret.expose().to_string(),
        }),
        oidc: c.oidc.as_ref().map(|o| project_sso_config::Oidc {
            client_id: o.client_id.clone(),
            client_secret: o.client_secret.expose().to_string(),
            issuer: o.issuer.clone(),
            redirect_uri: text(&o.redirect_uri),
            authorization_endpoint: text(&o.authorization_endpoint),
            token_endpoint: text(&o.token_endpoint),
            user_info_endpoint: text(&o.user_info_endpoint),
            proxy_url: text(&o.proxy_url),
            scopes: o.scopes.clone(),
            roles_claim_key: text(&o.roles_claim_key),
            username_claim_key: text(&o.username_claim_key),
            avatar_url_claim_key: text(&o.avatar_url_claim_key),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(headers: &[(&str, &str)]) -> Request<Bytes> {
        let mut req = Request::post("/auth/logout");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(Bytes::new()).unwrap()
    }

    #[test]
    fn cross_site_posts_are_recognised() {
        assert!(!cross_site(&post(&[])));
        assert!(!cross_site(&post(&[
            ("host", "pipecd.example.com"),
            ("origin", "https://pipecd.example.com"),
        ])));
        assert!(!cross_site(&post(&[
            ("host", "localhost:8080"),
            ("origin", "http://localhost:8080"),
            ("sec-fetch-site", "same-origin"),
        ])));
        assert!(cross_site(&post(&[
            ("host", "pipecd.example.com"),
            ("origin", "https://evil.example.com"),
        ])));
        assert!(cross_site(&post(&[
            ("host", "pipecd.example.com"),
            ("origin", "null"),
        ])));
        assert!(cross_site(&post(&[("sec-fetch-site", "cross-site")])));
    }
}
