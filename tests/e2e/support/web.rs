//! The console's side of the end-to-end tests: logging in through the HTTP form as a
//! browser does, and a WebService client that sends the session cookie (gRPC-web, as the
//! console, or native gRPC).

use std::net::SocketAddr;

use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Status};
use wisp_proto::webservice::web_service_client::WebServiceClient;

use super::{MAX_MESSAGE_BYTES, RawResponse, Transport, Via, Wisp, transport};

/// Sends `cookie: token=<session>` on every call.
#[derive(Clone)]
pub struct SessionCookie(Option<AsciiMetadataValue>);

impl Interceptor for SessionCookie {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            req.metadata_mut().insert("cookie", value.clone());
        }
        Ok(req)
    }
}

pub type WebClient = WebServiceClient<InterceptedService<Transport, SessionCookie>>;

/// A WebService client sending `token` as the session cookie (or no cookie).
pub async fn web_client(addr: SocketAddr, via: Via, token: Option<&str>) -> WebClient {
    let cookie = token.map(|t| {
        format!("theme=dark; token={t}")
            .parse()
            .expect("an ASCII cookie")
    });
    WebServiceClient::with_interceptor(transport(addr, via).await, SessionCookie(cookie))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The value of the `Set-Cookie` named `name`, with its attributes.
pub fn set_cookie<'a>(resp: &'a RawResponse, name: &str) -> Option<&'a str> {
    resp.headers
        .get_all(http::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{name}=")))
}

/// Just the cookie's value.
pub fn cookie_value(set_cookie: &str) -> &str {
    let first = set_cookie.split(';').next().unwrap_or_default();
    first.split_once('=').map(|(_, v)| v).unwrap_or_default()
}

/// [`Wisp::login_static`] on the server at `addr`.
pub async fn login_static_at(
    addr: SocketAddr,
    project: &str,
    username: &str,
    password: &str,
) -> RawResponse {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("project", project)
        .append_pair("username", username)
        .append_pair("password", password)
        .finish();
    super::http_post_to(
        addr,
        "/auth/login/static",
        &[("content-type", "application/x-www-form-urlencoded")],
        body.into_bytes(),
    )
    .await
}

impl Wisp {
    /// Posts the static admin login form, as the console's login page does.
    pub async fn login_static(&self, project: &str, username: &str, password: &str) -> RawResponse {
        login_static_at(self.addr(), project, username, password).await
    }

    /// Logs in as the quickstart project's static admin; the session token.
    pub async fn admin_session(&self) -> String {
        let resp = self
            .login_static(super::QUICKSTART, "hello-pipecd", "hello-pipecd")
            .await;
        let cookie =
            set_cookie(&resp, "token").unwrap_or_else(|| panic!("no session cookie: {resp:?}"));
        cookie_value(cookie).to_string()
    }

    /// A WebService client for this server sending `token`.
    pub async fn web_client(&self, via: Via, token: Option<&str>) -> WebClient {
        web_client(self.endpoint(via), via, token).await
    }
}

impl Wisp {
    /// [`Wisp::start`] with extra `wisp serve` flags (e.g. `--web-dir`).
    pub fn start_with_serve_args(args: &[std::ffi::OsString]) -> Wisp {
        Self::start_in(tempfile::tempdir().expect("create a data dir"), args)
    }

    /// `wisp serve` on a data directory prepared beforehand (e.g. by admin commands).
    pub fn start_in(dir: tempfile::TempDir, args: &[std::ffi::OsString]) -> Wisp {
        let server = super::Server::start_with(dir.path(), args, &[]);
        Wisp {
            server: Some(server),
            ..Wisp::stopped(dir)
        }
    }
}

/// A session for `roles` in `project`, signed with the server's key, as an SSO login
/// with those roles would give.
pub fn session_for(wisp: &Wisp, project: &str, subject: &str, roles: &[&str]) -> String {
    let key = std::fs::read(wisp.data_dir().join("encryption-key")).expect("the server's key");
    wisp_auth::SessionSigner::new(&key)
        .sign(&wisp_auth::WebCaller {
            subject: subject.into(),
            avatar_url: String::new(),
            project_id: project.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            ..Default::default()
        })
        .expect("sign a session")
}
