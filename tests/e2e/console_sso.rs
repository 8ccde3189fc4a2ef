//! SSO login end to end: `wisp serve`, the console's login form, and fake identity
//! providers this test runs: an OpenID Connect provider (discovery document, JWKS with an
//! RSA and an EC key, token endpoint issuing ID tokens signed as each test sets, a
//! UserInfo endpoint, client authentication by Basic or by the form as its discovery
//! document says) and a GitHub (Enterprise) server (OAuth token endpoint,
//! `/api/v3/user`, paged `/api/v3/user/teams`).

use crate::support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use rsa::pkcs8::DecodePublicKey;
use rsa::traits::PublicKeyParts;
use tonic::Code;
use wisp_proto::model;
use wisp_proto::webservice as web;

use support::web::{cookie_value, set_cookie};
use support::{QUICKSTART, RawResponse, Via, Wisp, assert_status, ok};

const PUBLIC: &str = include_str!("../../shared/services/tests/testdata/piped-public.pem");
const PRIVATE: &str = include_str!("../../shared/services/tests/testdata/piped-private.pem");
const CLIENT_ID: &str = "wisp-console";
const CLIENT_SECRET: &str = "provider-secret";
const GOOD_CODE: &str = "the-code";
/// A P-256 key the fake provider signs ES256 tokens with, and its public point.
const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPxc65YwWOXDaBz50
4/RuX2Sk9msvX1Z2c6bdMWSZUjahRANCAARdhFAl9z5+hL3l+AFzeCjgJb8+mole
BlYD7qKCGat0YWUgf2d9rGM5hUkFIlhX6Q/GfIxea5GXsr8Q2PY+5zIZ
-----END PRIVATE KEY-----
";
const EC_X: &str = "XYRQJfc-foS95fgBc3go4CW_PpqJXgZWA-6ighmrdGE";
const EC_Y: &str = "ZSB_Z32sYzmFSQUiWFfpD8Z8jF5rkZeyvxDY9j7nMhk";
const ACCESS_TOKEN: &str = "the-access-token";

/// How the fake provider signs its next ID token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signing {
    Rs256,
    Ps256,
    Es256,
    /// HS256 with the client secret (OpenID Connect Core 10.1).
    Hs256Secret,
    /// A forgery: HS256 with the RSA public key's PEM bytes as the secret.
    Hs256PublicKey,
}

/// The logins started, as the fake OIDC provider would have seen their authorization
/// requests: PKCE code challenge → nonce.
static OIDC_LOGINS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// A login started at `/auth/login`: the `state` the provider carries back (shown by
/// `Display`) and the ticket the browser keeps in its `state` cookie.
#[derive(Debug, Clone)]
struct LoginState {
    id: String,
    ticket: String,
}

impl std::fmt::Display for LoginState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

impl LoginState {
    fn cookie(&self) -> String {
        format!("state={}", self.ticket)
    }
}

fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Serves HTTP/1.1 on `listener` with `handle`, until the test ends.
fn serve<H, F>(listener: tokio::net::TcpListener, handle: H)
where
    H: Fn(hyper::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = hyper::Response<Full<Bytes>>> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let answer = handle(req);
                    async move { Ok::<_, Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
}

/// What the provider puts in the next ID token.
#[derive(Clone)]
struct Provider {
    addr: SocketAddr,
    claims: Arc<Mutex<serde_json::Value>>,
    /// The discovery document names an issuer other than this provider's address.
    wrong_issuer: Arc<std::sync::atomic::AtomicBool>,
    /// Discovery documents served.
    discoveries: Arc<std::sync::atomic::AtomicUsize>,
    signing: Arc<Mutex<Signing>>,
    /// `id_token_signing_alg_values_supported`, when set.
    algorithms: Arc<Mutex<Option<Vec<&'static str>>>>,
    /// `token_endpoint_auth_methods_supported`, when set; the token endpoint takes the
    /// client's credentials only in the ways it names (Basic when unset).
    auth_methods: Arc<Mutex<Option<Vec<&'static str>>>>,
    /// The token endpoint refuses Basic whatever the discovery document says.
    refuse_basic: Arc<std::sync::atomic::AtomicBool>,
    /// How each token request carried the client's credentials (`basic`, `post`).
    auth_seen: Arc<Mutex<Vec<&'static str>>>,
    /// The UserInfo endpoint's claims; no endpoint when unset.
    userinfo: Arc<Mutex<Option<serde_json::Value>>>,
}

impl Provider {
    async fn start() -> Provider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the provider");
        let addr = listener.local_addr().expect("address");
        let provider = Provider {
            addr,
            claims: Arc::new(Mutex::new(serde_json::json!({}))),
            wrong_issuer: Arc::default(),
            discoveries: Arc::default(),
            signing: Arc::new(Mutex::new(Signing::Rs256)),
            algorithms: Arc::default(),
            auth_methods: Arc::default(),
            auth_seen: Arc::default(),
            refuse_basic: Arc::default(),
            userinfo: Arc::default(),
        };
        let served = provider.clone();
        serve(listener, move |req| {
            let p = served.clone();
            async move { p.handle(req).await }
        });
        provider
    }

    fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    async fn handle(&self, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        let authorization = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let json = |v: serde_json::Value| {
            hyper::Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(v.to_string())))
                .expect("response")
        };
        let issuer = self.issuer();
        match path.as_str() {
            "/.well-known/openid-configuration" => {
                self.discoveries
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut doc = serde_json::json!({
                "issuer": if self.wrong_issuer.load(std::sync::atomic::Ordering::SeqCst) {
                    "https://elsewhere.example.com".to_string()
                } else {
                    issuer.clone()
                },
                "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "jwks_uri": format!("{issuer}/jwks"),
                });
                if let Some(algs) = self.algorithms.lock().expect("algorithms").clone() {
                    doc["id_token_signing_alg_values_supported"] = serde_json::json!(algs);
                }
                if let Some(methods) = self.auth_methods.lock().expect("methods").clone() {
                    doc["token_endpoint_auth_methods_supported"] = serde_json::json!(methods);
                }
                if self.userinfo.lock().expect("userinfo").is_some() {
                    doc["userinfo_endpoint"] = serde_json::json!(format!("{issuer}/userinfo"));
                }
                json(doc)
            }
            "/jwks" => {
                let key = rsa::RsaPublicKey::from_public_key_pem(PUBLIC).expect("public key");
                use base64::Engine;
                let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                json(serde_json::json!({"keys": [{
                    "kty": "RSA", "kid": "k1", "use": "sig",
                    "n": b64.encode(key.n().to_bytes_be()),
                    "e": b64.encode(key.e().to_bytes_be()),
                }, {
                    "kty": "EC", "kid": "k2", "alg": "ES256", "use": "sig", "crv": "P-256",
                    "x": EC_X, "y": EC_Y,
                }]}))
            }
            "/userinfo" => match self.userinfo.lock().expect("userinfo").clone() {
                Some(claims) if authorization == format!("Bearer {ACCESS_TOKEN}") => json(claims),
                _ => hyper::Response::builder()
                    .status(401)
                    .body(Full::new(Bytes::new()))
                    .expect("response"),
            },
            "/token" => {
                let form: Vec<(String, String)> =
                    form_urlencoded::parse(&body).into_owned().collect();
                let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                let methods = self
                    .auth_methods
                    .lock()
                    .expect("methods")
                    .clone()
                    .unwrap_or_else(|| vec!["client_secret_basic"]);
                let basic = {
                    use base64::Engine;
                    let expected = base64::engine::general_purpose::STANDARD
                        .encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"));
                    authorization == format!("Basic {expected}")
                };
                let post = get("client_id") == Some(CLIENT_ID)
                    && get("client_secret") == Some(CLIENT_SECRET);
                let used = if basic {
                    "basic"
                } else if post {
                    "post"
                } else {
                    "none"
                };
                self.auth_seen.lock().expect("seen").push(used);
                let basic_taken = methods.contains(&"client_secret_basic")
                    && !self.refuse_basic.load(std::sync::atomic::Ordering::SeqCst);
                let authenticated =
                    (basic && basic_taken) || (post && methods.contains(&"client_secret_post"));
                if !authenticated {
                    return hyper::Response::builder()
                        .status(401)
                        .body(Full::new(Bytes::from_static(
                            b"{\"error\":\"invalid_client\"}",
                        )))
                        .expect("response");
                }
                if get("code") != Some(GOOD_CODE) {
                    return hyper::Response::builder()
                        .status(400)
                        .body(Full::new(Bytes::from_static(
                            b"{\"error\":\"invalid_grant\"}",
                        )))
                        .expect("response");
                }
                // PKCE: the verifier must hash to the challenge of a login started here.
                use base64::Engine;
                use sha2::Digest;
                let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
                    sha2::Sha256::digest(get("code_verifier").unwrap_or("").as_bytes()),
                );
                let nonce = OIDC_LOGINS
                    .lock()
                    .expect("logins")
                    .iter()
                    .find(|(c, _)| *c == challenge)
                    .map(|(_, n)| n.clone());
                let Some(nonce) = nonce else {
                    return hyper::Response::builder()
                        .status(400)
                        .body(Full::new(Bytes::from_static(
                            b"{\"error\":\"invalid_grant\",\"error_description\":\"PKCE\"}",
                        )))
                        .expect("response");
                };
                let now = support::fixtures::now();
                let mut claims = self.claims.lock().expect("claims").clone();
                let extra = serde_json::json!({
                    "iss": issuer, "aud": CLIENT_ID, "sub": "user-1",
                    "iat": now, "exp": now + 300,
                });
                if let Some(c) = claims.as_object_mut() {
                    c.entry("nonce").or_insert(serde_json::json!(nonce));
                }
                if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
                    c.extend(e.clone());
                }
                use jsonwebtoken::{Algorithm, EncodingKey};
                let rsa = || EncodingKey::from_rsa_pem(PRIVATE.as_bytes()).expect("private key");
                let signing = *self.signing.lock().expect("signing");
                let (alg, kid, key) = match signing {
                    Signing::Rs256 => (Algorithm::RS256, "k1", rsa()),
                    Signing::Ps256 => (Algorithm::PS256, "k1", rsa()),
                    Signing::Es256 => (
                        Algorithm::ES256,
                        "k2",
                        EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).expect("EC key"),
                    ),
                    Signing::Hs256Secret => (
                        Algorithm::HS256,
                        "k1",
                        EncodingKey::from_secret(CLIENT_SECRET.as_bytes()),
                    ),
                    Signing::Hs256PublicKey => (
                        Algorithm::HS256,
                        "k1",
                        EncodingKey::from_secret(PUBLIC.as_bytes()),
                    ),
                };
                let mut header = jsonwebtoken::Header::new(alg);
                header.kid = Some(kid.into());
                let id_token = jsonwebtoken::encode(&header, &claims, &key).expect("sign");
                json(serde_json::json!({
                    "access_token": ACCESS_TOKEN, "token_type": "Bearer", "id_token": id_token,
                }))
            }
            _ => hyper::Response::builder()
                .status(404)
                .body(Full::new(Bytes::new()))
                .expect("response"),
        }
    }
}

/// A GET with a cookie header, as the browser sends the provider's redirect back.
async fn get_with_cookie(wisp: &Wisp, path: &str, cookie: &str) -> RawResponse {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = http::Request::get(format!("http://{}{path}", wisp.addr()))
        .header("cookie", cookie)
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = client.request(req).await.expect("callback");
    let (parts, body) = resp.into_parts();
    RawResponse {
        status: parts.status,
        version: parts.version,
        headers: parts.headers,
        body: body.collect().await.expect("body").to_bytes().to_vec(),
    }
}

/// Starts an SSO login for the quickstart project; the provider URL it redirected to
/// and the state cookie.
/// `wisp serve` whose operator lets SSO settings reach private addresses: the fake
/// providers of these tests listen on loopback.
fn start_allowing_loopback_providers() -> Wisp {
    Wisp::start_with_serve_args(&["--sso-allow-private-addresses".into()])
}

async fn start_login(wisp: &Wisp) -> (String, LoginState) {
    start_login_for(wisp, QUICKSTART).await
}

async fn start_login_for(wisp: &Wisp, project: &str) -> (String, LoginState) {
    let resp = wisp
        .http_post(
            "/auth/login",
            &[("content-type", "application/x-www-form-urlencoded")],
            format!("project={project}").into_bytes(),
        )
        .await;
    assert_eq!(resp.status, http::StatusCode::FOUND, "{resp:?}");
    let location = resp.headers["location"]
        .to_str()
        .expect("location")
        .to_string();
    let ticket = cookie_value(set_cookie(&resp, "state").expect("a state cookie")).to_string();
    let id = query_param(&location, "state").expect("a state in the provider URL");
    assert_ne!(
        id, ticket,
        "the provider sees the state's id, not the ticket"
    );
    if let (Some(challenge), Some(nonce)) = (
        query_param(&location, "code_challenge"),
        query_param(&location, "nonce"),
    ) {
        OIDC_LOGINS.lock().expect("logins").push((challenge, nonce));
    }
    (location, LoginState { id, ticket })
}

/// The quickstart project set up for OIDC logins at `issuer` (roles from its `groups`
/// claim); the admin's console client.
async fn oidc_project(wisp: &Wisp, issuer: &str) -> support::web::WebClient {
    let admin = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&admin)).await;
    ok(console
        .update_project_sso_config(web::UpdateProjectSsoConfigRequest {
            sso: Some(model::ProjectSsoConfig {
                provider: model::project_sso_config::Provider::Oidc as i32,
                session_ttl: 24,
                oidc: Some(model::project_sso_config::Oidc {
                    client_id: CLIENT_ID.into(),
                    client_secret: CLIENT_SECRET.into(),
                    issuer: issuer.into(),
                    redirect_uri: "http://localhost:8080/auth/callback".into(),
                    roles_claim_key: "groups".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await);
    console
}

/// Maps SSO group `group` to `role` in the admin's project.
async fn map_group(console: &mut support::web::WebClient, group: &str, role: &str) {
    ok(console
        .add_project_user_group(web::AddProjectUserGroupRequest {
            sso_group: group.into(),
            role: role.into(),
        })
        .await);
}

#[tokio::test]
async fn oidc_login_maps_groups_to_roles() {
    let provider = Provider::start().await;
    let wisp = start_allowing_loopback_providers();
    let mut console = oidc_project(&wisp, &provider.issuer()).await;
    map_group(&mut console, "acme/ops", "Editor").await;

    // A member of acme/ops logs in and is an Editor.
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["acme/ops"]});
    let (location, state) = start_login(&wisp).await;
    assert!(
        location.starts_with(&format!("{}/authorize?", provider.issuer())),
        "{location}"
    );
    assert!(
        location.contains(&format!("client_id={CLIENT_ID}")),
        "{location}"
    );
    assert!(location.contains("scope=openid"), "{location}");
    let resp = get_with_cookie(
        &wisp,
        &format!("/auth/callback?code={GOOD_CODE}&state={state}"),
        &state.cookie(),
    )
    .await;
    assert_eq!(resp.status, http::StatusCode::FOUND, "{resp:?}");
    let session = set_cookie(&resp, "token").expect("a session");
    // The project's session_ttl (24 hours) sets the session's lifetime.
    assert!(session.contains("Max-Age=86400"), "{session}");
    let token = cookie_value(session).to_string();
    let mut olivia = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    assert_eq!(
        ok(olivia.get_me(web::GetMeRequest {}).await).subject,
        "olivia"
    );
    ok(olivia
        .list_applications(web::ListApplicationsRequest::default())
        .await);
    assert_status(
        olivia
            .list_api_keys(web::ListApiKeysRequest::default())
            .await,
        Code::PermissionDenied,
        "",
    );

    // The project maps the group to another role: the open session follows at once.
    ok(console
        .delete_project_user_group(web::DeleteProjectUserGroupRequest {
            sso_group: "acme/ops".into(),
        })
        .await);
    map_group(&mut console, "acme/ops", "Admin").await;
    ok(olivia
        .list_api_keys(web::ListApiKeysRequest::default())
        .await);
    // No mapping left (and no stray viewers): the session ends.
    ok(console
        .delete_project_user_group(web::DeleteProjectUserGroupRequest {
            sso_group: "acme/ops".into(),
        })
        .await);
    assert_status(
        olivia.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "no role",
    );
    map_group(&mut console, "acme/ops", "Editor").await;

    // Someone in no mapped group is refused, with the reason in the error cookie.
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "mallory", "groups": ["elsewhere"]});
    let (_, state) = start_login(&wisp).await;
    let resp = get_with_cookie(
        &wisp,
        &format!("/auth/callback?code={GOOD_CODE}&state={state}"),
        &state.cookie(),
    )
    .await;
    assert!(set_cookie(&resp, "token").is_none());
    let error = set_cookie(&resp, "error").expect("an error cookie");
    assert!(error.contains("no%20role"), "{error}");

    // A callback whose state is not the browser's own is refused.
    let (_, state) = start_login(&wisp).await;
    let resp = get_with_cookie(
        &wisp,
        &format!("/auth/callback?code={GOOD_CODE}&state={state}"),
        "state=someone-elses",
    )
    .await;
    assert!(set_cookie(&resp, "token").is_none());
    assert!(set_cookie(&resp, "error").is_some());

    // A code the provider does not know is refused.
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["acme/ops"]});
    let (_, state) = start_login(&wisp).await;
    let resp = get_with_cookie(
        &wisp,
        &format!("/auth/callback?code=stolen&state={state}"),
        &state.cookie(),
    )
    .await;
    assert!(set_cookie(&resp, "token").is_none());
}

const GH_CLIENT_ID: &str = "gh-client";
const GH_CLIENT_SECRET: &str = "gh-secret";
const GH_TOKEN: &str = "gho_token";

/// Team `(org, slug)` pairs, one list per page of `/user/teams`.
type TeamPages = Vec<Vec<(&'static str, &'static str)>>;
/// The forms the token endpoint received.
type Forms = Vec<Vec<(String, String)>>;

/// A fake GitHub Enterprise server: who logs in, their teams by page, and what the token
/// endpoint was sent.
#[derive(Clone)]
struct FakeGithub {
    addr: SocketAddr,
    login: Arc<Mutex<String>>,
    team_pages: Arc<Mutex<TeamPages>>,
    token_requests: Arc<Mutex<Forms>>,
}

impl FakeGithub {
    async fn start() -> FakeGithub {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake GitHub");
        let fake = FakeGithub {
            addr: listener.local_addr().expect("address"),
            login: Arc::new(Mutex::new(String::new())),
            team_pages: Arc::new(Mutex::new(Vec::new())),
            token_requests: Arc::new(Mutex::new(Vec::new())),
        };
        let served = fake.clone();
        serve(listener, move |req| {
            let f = served.clone();
            async move { f.handle(req).await }
        });
        fake
    }

    fn base_url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    async fn handle(&self, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let authorized = req
            .headers()
            .get("authorization")
            .is_some_and(|v| v.as_bytes() == format!("Bearer {GH_TOKEN}").as_bytes())
            && req.headers().contains_key("user-agent");
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let json = |v: serde_json::Value| {
            hyper::Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(v.to_string())))
                .expect("response")
        };
        let status = |code: u16| {
            hyper::Response::builder()
                .status(code)
                .body(Full::new(Bytes::new()))
                .expect("response")
        };
        match path.as_str() {
            "/login/oauth/access_token" => {
                let form: Vec<(String, String)> =
                    form_urlencoded::parse(&body).into_owned().collect();
                let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                self.token_requests
                    .lock()
                    .expect("requests")
                    .push(form.clone());
                if get("code").as_deref() != Some(GOOD_CODE)
                    || get("client_id").as_deref() != Some(GH_CLIENT_ID)
                    || get("client_secret").as_deref() != Some(GH_CLIENT_SECRET)
                {
                    // GitHub refuses a code with 200 and an error field.
                    return json(serde_json::json!({
                        "error": "bad_verification_code",
                        "error_description": "The code passed is incorrect or expired.",
                    }));
                }
                json(serde_json::json!({
                    "access_token": GH_TOKEN, "token_type": "bearer", "scope": "read:org",
                }))
            }
            _ if !authorized => status(401),
            "/api/v3/user" => {
                let login = self.login.lock().expect("login").clone();
                json(serde_json::json!({
                    "login": login,
                    "avatar_url": format!("https://avatars.example/{login}"),
                }))
            }
            "/api/v3/user/teams" => {
                let page: usize = form_urlencoded::parse(query.as_bytes())
                    .find(|(k, _)| k == "page")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(1);
                let pages = self.team_pages.lock().expect("teams").clone();
                let teams: Vec<serde_json::Value> = pages
                    .get(page - 1)
                    .into_iter()
                    .flatten()
                    .map(|(org, slug)| serde_json::json!({"slug": slug, "organization": {"login": org}}))
                    .collect();
                let mut resp = json(serde_json::Value::Array(teams));
                if page < pages.len() {
                    let next = format!(
                        "<{}api/v3/user/teams?per_page=100&page={}>; rel=\"next\"",
                        self.base_url(),
                        page + 1
                    );
                    resp.headers_mut()
                        .insert("link", next.parse().expect("link header"));
                }
                resp
            }
            _ => status(404),
        }
    }
}

/// Completes a login at the callback with `code`: the session cookie as set, or the
/// error cookie's text.
async fn finish_login(wisp: &Wisp, state: &LoginState, code: &str) -> Result<String, String> {
    let resp = get_with_cookie(
        wisp,
        &format!("/auth/callback?code={code}&state={state}&project=ignored"),
        &state.cookie(),
    )
    .await;
    match set_cookie(&resp, "token") {
        Some(c) => Ok(c.to_string()),
        None => Err(set_cookie(&resp, "error")
            .map(|c| cookie_value(c).to_string())
            .unwrap_or_default()),
    }
}

#[tokio::test]
async fn github_login_maps_teams_through_user_groups() {
    let github = FakeGithub::start().await;
    let wisp = start_allowing_loopback_providers();
    let admin = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&admin)).await;
    ok(console
        .update_project_sso_config(web::UpdateProjectSsoConfigRequest {
            sso: Some(model::ProjectSsoConfig {
                provider: model::project_sso_config::Provider::Github as i32,
                // Upstream's validation wants a session lifetime (hours): a week.
                session_ttl: 168,
                github: Some(model::project_sso_config::GitHub {
                    client_id: GH_CLIENT_ID.into(),
                    client_secret: GH_CLIENT_SECRET.into(),
                    base_url: github.base_url(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await);
    map_group(&mut console, "acme/ops", "Editor").await;

    // octo's mapped team is on the second page of their teams.
    *github.login.lock().expect("login") = "octo".into();
    *github.team_pages.lock().expect("teams") = vec![vec![("acme", "dev")], vec![("acme", "ops")]];
    let (location, state) = start_login(&wisp).await;
    let authorize = format!("{}login/oauth/authorize?", github.base_url());
    assert!(location.starts_with(&authorize), "{location}");
    assert!(
        location.contains(&format!("client_id={GH_CLIENT_ID}")),
        "{location}"
    );
    assert!(location.contains("scope=read%3Aorg"), "{location}");
    let session = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect("octo logs in");
    assert!(session.contains("Max-Age=604800"), "{session}");
    let mut octo = wisp
        .web_client(Via::GrpcWeb, Some(cookie_value(&session)))
        .await;
    let me = ok(octo.get_me(web::GetMeRequest {}).await);
    assert_eq!(me.subject, "octo");
    assert_eq!(me.avatar_url, "https://avatars.example/octo");
    // Editor: can list applications, cannot manage API keys.
    ok(octo
        .list_applications(web::ListApplicationsRequest::default())
        .await);
    assert_status(
        octo.list_api_keys(web::ListApiKeysRequest::default()).await,
        Code::PermissionDenied,
        "",
    );
    // The client secret went to the token endpoint, opened from its sealed form.
    let sent = github.token_requests.lock().expect("requests").clone();
    assert!(
        sent.iter()
            .any(|f| f.contains(&("client_secret".into(), GH_CLIENT_SECRET.into())))
    );

    // In no mapped team: refused, saying why.
    *github.login.lock().expect("login") = "mallory".into();
    *github.team_pages.lock().expect("teams") = vec![vec![("acme", "dev")]];
    let (_, state) = start_login(&wisp).await;
    let refused = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect_err("mallory has no role");
    assert!(refused.contains("mallory"), "{refused}");

    // A code GitHub refuses (200 with an error field) gives no session.
    *github.login.lock().expect("login") = "octo".into();
    *github.team_pages.lock().expect("teams") = vec![vec![("acme", "ops")]];
    let (_, state) = start_login(&wisp).await;
    let refused = finish_login(&wisp, &state, "stolen")
        .await
        .expect_err("a refused code");
    // The browser gets a generic message; the reason is in the server's log.
    assert!(
        refused.starts_with("Single%20sign-on%20failed"),
        "{refused}"
    );
    assert!(
        wisp.server().log_text().contains("incorrect or expired"),
        "the reason is logged"
    );
}

#[tokio::test]
async fn shared_github_sso_from_the_config() {
    let github = FakeGithub::start().await;
    let dir = support::empty_data_dir();
    let config = dir.path().join("control-plane.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  address: https://wisp.example/\n  sharedSSOConfigs:\n    - name: corp\n      provider: GITHUB\n      sessionTtl: 2\n      github:\n        clientId: {GH_CLIENT_ID}\n        clientSecret: {GH_CLIENT_SECRET}\n        baseUrl: {}\n",
            github.base_url()
        ),
    )
    .expect("write the config");
    let config = config.to_string_lossy().into_owned();
    let unknown = support::run_cli(
        dir.path(),
        &[
            "project",
            "add",
            "team",
            "--shared-sso",
            "nope",
            "--config",
            &config,
        ],
    );
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(unknown.stderr.contains("nope"), "{unknown:?}");
    let added = support::run_cli(
        dir.path(),
        &[
            "project",
            "add",
            "team",
            "--shared-sso",
            "corp",
            "--config",
            &config,
            "--json",
        ],
    );
    assert_eq!(added.code, 0, "{added:?}");
    let added: serde_json::Value = serde_json::from_str(&added.stdout).expect("json");
    let (username, password) = (
        added["username"].as_str().expect("username").to_string(),
        added["password"].as_str().expect("password").to_string(),
    );

    let wisp = Wisp::start_in(
        dir,
        &[
            "--config".into(),
            config.into(),
            "--sso-allow-private-addresses".into(),
        ],
    );
    // Stray users are refused until the project allows them as Viewers; this project maps
    // no team, so everyone is a stray.
    *github.login.lock().expect("login") = "octo".into();
    *github.team_pages.lock().expect("teams") = vec![vec![("acme", "ops")]];
    let (location, state) = start_login_for(&wisp, "team").await;
    // The callback is the configured address's, with the project.
    assert!(
        location
            .contains("redirect_uri=https%3A%2F%2Fwisp.example%2Fauth%2Fcallback%3Fproject%3Dteam"),
        "{location}"
    );
    let refused = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect_err("no role in team");
    assert!(refused.contains("octo"), "{refused}");
    let sent = github.token_requests.lock().expect("requests").clone();
    assert!(
        sent.iter().all(|f| f.contains(&(
            "redirect_uri".into(),
            "https://wisp.example/auth/callback?project=team".into()
        ))),
        "{sent:?}"
    );

    // Once the project maps acme/ops, octo is an Editor there, for the shared config's
    // session lifetime (2 hours).
    let resp = wisp.login_static("team", &username, &password).await;
    let admin = cookie_value(set_cookie(&resp, "token").expect("team admin")).to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&admin)).await;
    map_group(&mut console, "acme/ops", "Editor").await;
    let (_, state) = start_login_for(&wisp, "team").await;
    let session = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect("octo logs in");
    assert!(session.contains("Max-Age=7200"), "{session}");
    let mut octo = wisp
        .web_client(Via::GrpcWeb, Some(cookie_value(&session)))
        .await;
    let me = ok(octo.get_me(web::GetMeRequest {}).await);
    assert_eq!(
        (me.subject.as_str(), me.project_id.as_str()),
        ("octo", "team")
    );
}

/// A `CONNECT` proxy: records each request head, then relays bytes both ways.
async fn start_connect_proxy() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let addr = listener.local_addr().expect("address");
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head
                    .strip_prefix("CONNECT ")
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_string);
                seen.lock().expect("heads").push(head);
                let Some(target) = target else { return };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                if client
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await
                    .is_ok()
                {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (addr, heads)
}

#[tokio::test]
async fn github_login_goes_through_the_projects_proxy() {
    let github = FakeGithub::start().await;
    let (proxy, heads) = start_connect_proxy().await;
    let wisp = start_allowing_loopback_providers();
    let admin = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&admin)).await;
    ok(console
        .update_project_sso_config(web::UpdateProjectSsoConfigRequest {
            sso: Some(model::ProjectSsoConfig {
                provider: model::project_sso_config::Provider::Github as i32,
                session_ttl: 1,
                github: Some(model::project_sso_config::GitHub {
                    client_id: GH_CLIENT_ID.into(),
                    client_secret: GH_CLIENT_SECRET.into(),
                    base_url: github.base_url(),
                    proxy_url: format!("http://corp:s%40cret@{proxy}"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await);
    ok(console
        .update_project_rbac_config(web::UpdateProjectRbacConfigRequest {
            rbac: Some(model::ProjectRbacConfig {
                viewer: "acme/all".into(),
                ..Default::default()
            }),
        })
        .await);
    *github.login.lock().expect("login") = "octo".into();
    *github.team_pages.lock().expect("teams") = vec![vec![("acme", "all")]];
    let (_, state) = start_login(&wisp).await;
    let session = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect("octo logs in through the proxy");
    let mut octo = wisp
        .web_client(Via::GrpcWeb, Some(cookie_value(&session)))
        .await;
    assert_eq!(ok(octo.get_me(web::GetMeRequest {}).await).subject, "octo");
    // Every call to GitHub was tunnelled, with the proxy's credentials.
    let heads = heads.lock().expect("heads").clone();
    let target = format!("CONNECT {} ", github.addr);
    assert!(!heads.is_empty());
    for head in &heads {
        assert!(head.starts_with(&target), "{head}");
        // base64("corp:s@cret")
        assert!(head.contains("Basic Y29ycDpzQGNyZXQ="), "{head}");
    }
}

/// The login's state is its own single-use ticket, never a session; the ID token must
/// carry the login's nonce; the provider must name the configured issuer; and what the
/// browser learns of a failure says nothing about the network.
#[tokio::test]
async fn oidc_state_nonce_issuer_and_errors() {
    let provider = Provider::start().await;
    let wisp = start_allowing_loopback_providers();
    let mut console = oidc_project(&wisp, &provider.issuer()).await;
    map_group(&mut console, "acme/ops", "Editor").await;
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["acme/ops"]});

    // The authorization request carries a nonce and an S256 PKCE challenge.
    let (location, state) = start_login(&wisp).await;
    assert_eq!(
        query_param(&location, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert!(query_param(&location, "nonce").is_some(), "{location}");

    // The ticket in the state cookie never works as a session.
    let mut with_ticket = wisp.web_client(Via::GrpcWeb, Some(&state.ticket)).await;
    assert_status(
        with_ticket
            .get_command(web::GetCommandRequest {
                command_id: "x".into(),
            })
            .await,
        Code::Unauthenticated,
        "",
    );

    // One login per state: the first callback signs in, a replay does not.
    assert!(finish_login(&wisp, &state, GOOD_CODE).await.is_ok());
    let replay = finish_login(&wisp, &state, GOOD_CODE).await;
    assert!(replay.is_err(), "{replay:?}");

    // An ID token minted for another login (another nonce) is refused, generically.
    *provider.claims.lock().expect("claims") = serde_json::json!({
        "preferred_username": "olivia", "groups": ["acme/ops"], "nonce": "someone-elses",
    });
    let (_, state) = start_login(&wisp).await;
    let error = finish_login(&wisp, &state, GOOD_CODE).await.unwrap_err();
    assert!(error.starts_with("Single%20sign-on%20failed"), "{error}");
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["acme/ops"]});

    // Logins start without credentials: the discovery document is fetched once, not
    // per login.
    for _ in 0..5 {
        let resp = post_login(&wisp).await;
        assert_eq!(resp.status, http::StatusCode::FOUND, "{resp:?}");
    }
    assert_eq!(
        provider
            .discoveries
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );

    // A discovery document naming another issuer is refused (another provider: the
    // first one's document is cached).
    let liar = Provider::start().await;
    liar.wrong_issuer
        .store(true, std::sync::atomic::Ordering::SeqCst);
    oidc_project(&wisp, &liar.issuer()).await;
    let resp = post_login(&wisp).await;
    let error = set_cookie(&resp, "error").expect("an error cookie");
    assert!(error.contains("Single%20sign-on%20failed"), "{error}");

    // An issuer nobody answers at: the browser is not told how the connection failed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let closed_issuer = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    oidc_project(&wisp, &closed_issuer).await;
    let resp = post_login(&wisp).await;
    let error = set_cookie(&resp, "error").expect("an error cookie");
    assert!(error.contains("Single%20sign-on%20failed"), "{error}");
    assert!(!error.to_lowercase().contains("refused"), "{error}");

    // Plain HTTP to anything but loopback is not even saved.
    let admin = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&admin)).await;
    assert_status(
        console
            .update_project_sso_config(web::UpdateProjectSsoConfigRequest {
                sso: Some(model::ProjectSsoConfig {
                    provider: model::project_sso_config::Provider::Oidc as i32,
                    oidc: Some(model::project_sso_config::Oidc {
                        issuer: "http://10.0.0.1:8080".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            })
            .await,
        Code::InvalidArgument,
        "https",
    );
}

async fn post_login(wisp: &Wisp) -> RawResponse {
    wisp.http_post(
        "/auth/login",
        &[("content-type", "application/x-www-form-urlencoded")],
        format!("project={QUICKSTART}").into_bytes(),
    )
    .await
}

/// A whole OIDC login of the quickstart project: the session cookie, or the error
/// cookie's text.
async fn oidc_login(wisp: &Wisp) -> Result<String, String> {
    let (_, state) = start_login(wisp).await;
    finish_login(wisp, &state, GOOD_CODE).await
}

/// The signed-in user's name, from their session cookie.
async fn me(wisp: &Wisp, session: &str) -> (String, String) {
    let mut client = wisp
        .web_client(Via::GrpcWeb, Some(cookie_value(session)))
        .await;
    let me = ok(client.get_me(web::GetMeRequest {}).await);
    (me.subject, me.project_id)
}

/// The UserInfo endpoint's claims join the ID token's (groups only there, as some Okta
/// and Keycloak set-ups do); the ID token's win a conflict; an answer about another
/// subject is refused; the client authenticated with Basic.
#[tokio::test]
async fn oidc_userinfo_claims_are_merged_for_the_same_subject() {
    let provider = Provider::start().await;
    let wisp = start_allowing_loopback_providers();
    let mut console = oidc_project(&wisp, &provider.issuer()).await;
    map_group(&mut console, "acme/ops", "Editor").await;
    *provider.claims.lock().expect("claims") = serde_json::json!({"preferred_username": "olivia"});
    *provider.userinfo.lock().expect("userinfo") = Some(serde_json::json!({
        "sub": "user-1", "preferred_username": "mallory", "groups": ["acme/ops"],
    }));
    let session = oidc_login(&wisp).await.expect("olivia logs in");
    // Her role came from the UserInfo groups: without them she has none (no strays).
    assert_eq!(
        me(&wisp, &session).await.0,
        "olivia",
        "the ID token's claim wins"
    );
    assert_eq!(*provider.auth_seen.lock().expect("seen"), vec!["basic"]);

    // A UserInfo answer about someone else is refused.
    *provider.userinfo.lock().expect("userinfo") = Some(serde_json::json!({
        "sub": "user-2", "groups": ["acme/ops"],
    }));
    let refused = oidc_login(&wisp).await.expect_err("another subject");
    assert!(
        refused.starts_with("Single%20sign-on%20failed"),
        "{refused}"
    );
    assert!(
        wisp.server()
            .log_text()
            .contains("subject is not the ID token"),
        "the reason is logged"
    );
}

/// ID tokens signed with any algorithm the discovery document advertises are accepted,
/// each checked with a key of its own kind; an HS256 token "signed" with the provider's
/// public key is a forgery and refused, as is an algorithm the document does not name.
#[tokio::test]
async fn oidc_accepts_the_advertised_algorithms_with_their_own_keys() {
    let wisp = start_allowing_loopback_providers();
    let advertises_all = Provider::start().await;
    *advertises_all.algorithms.lock().expect("algorithms") =
        Some(vec!["RS256", "PS256", "ES256", "HS256"]);
    let mut console = oidc_project(&wisp, &advertises_all.issuer()).await;
    map_group(&mut console, "acme/ops", "Editor").await;
    *advertises_all.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["acme/ops"]});
    for signing in [
        Signing::Rs256,
        Signing::Ps256,
        Signing::Es256,
        Signing::Hs256Secret,
    ] {
        *advertises_all.signing.lock().expect("signing") = signing;
        let session = oidc_login(&wisp)
            .await
            .unwrap_or_else(|e| panic!("{signing:?}: {e}"));
        assert_eq!(me(&wisp, &session).await.0, "olivia", "{signing:?}");
    }
    *advertises_all.signing.lock().expect("signing") = Signing::Hs256PublicKey;
    let forged = oidc_login(&wisp).await.expect_err("a forged token");
    assert!(forged.starts_with("Single%20sign-on%20failed"), "{forged}");

    // A provider advertising nothing: RS256 only.
    let plain = Provider::start().await;
    *plain.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["acme/ops"]});
    oidc_project(&wisp, &plain.issuer()).await;
    assert!(oidc_login(&wisp).await.is_ok());
    for signing in [
        Signing::Es256,
        Signing::Hs256Secret,
        Signing::Hs256PublicKey,
    ] {
        *plain.signing.lock().expect("signing") = signing;
        assert!(oidc_login(&wisp).await.is_err(), "{signing:?}");
    }
    assert!(
        wisp.server().log_text().contains("does not advertise"),
        "the reason is logged"
    );
}

/// The client secret goes by Basic, as upstream sends it; by the form only when the
/// discovery document says the provider takes that.
#[tokio::test]
async fn oidc_client_secret_basic_first_post_when_discovery_says_so() {
    let wisp = start_allowing_loopback_providers();
    let cases: [(Option<Vec<&'static str>>, Vec<&'static str>); 3] = [
        (None, vec!["basic"]),
        (
            Some(vec!["client_secret_basic", "client_secret_post"]),
            vec!["basic"],
        ),
        (Some(vec!["client_secret_post"]), vec!["post"]),
    ];
    for (methods, seen) in cases {
        let provider = Provider::start().await;
        *provider.auth_methods.lock().expect("methods") = methods.clone();
        *provider.claims.lock().expect("claims") =
            serde_json::json!({"preferred_username": "olivia", "groups": ["Viewer"]});
        oidc_project(&wisp, &provider.issuer()).await;
        oidc_login(&wisp)
            .await
            .unwrap_or_else(|e| panic!("{methods:?}: {e}"));
        assert_eq!(
            *provider.auth_seen.lock().expect("seen"),
            seen,
            "{methods:?}"
        );
    }
    // A provider that names both but refuses Basic: tried again with the form.
    let provider = Provider::start().await;
    *provider.auth_methods.lock().expect("methods") =
        Some(vec!["client_secret_basic", "client_secret_post"]);
    provider
        .refuse_basic
        .store(true, std::sync::atomic::Ordering::SeqCst);
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["Viewer"]});
    oidc_project(&wisp, &provider.issuer()).await;
    assert!(oidc_login(&wisp).await.is_ok());
    assert_eq!(
        *provider.auth_seen.lock().expect("seen"),
        vec!["basic", "post"]
    );
    // Naming only Basic, a refusal is final: the form is never tried.
    let provider = Provider::start().await;
    provider
        .refuse_basic
        .store(true, std::sync::atomic::Ordering::SeqCst);
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "groups": ["Viewer"]});
    oidc_project(&wisp, &provider.issuer()).await;
    assert!(oidc_login(&wisp).await.is_err());
    assert_eq!(*provider.auth_seen.lock().expect("seen"), vec!["basic"]);
}

/// Without `rolesClaimKey`, roles come from upstream's default claims, unless the config
/// opts the project out (`oidcNoDefaultRoleClaims`).
#[tokio::test]
async fn oidc_default_role_claims_unless_the_project_opts_out() {
    let provider = Provider::start().await;
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "olivia", "roles": ["Editor"]});
    let dir = support::empty_data_dir();
    let config = dir.path().join("control-plane.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  address: https://wisp.example/\n  oidcNoDefaultRoleClaims: [strict]\n  sharedSSOConfigs:\n    - name: corp\n      provider: OIDC\n      oidc:\n        clientId: {CLIENT_ID}\n        clientSecret: {CLIENT_SECRET}\n        issuer: {}\n        redirectUri: https://wisp.example/auth/callback\n",
            provider.issuer()
        ),
    )
    .expect("write the config");
    let config = config.to_string_lossy().into_owned();
    for project in ["team", "strict"] {
        let added = support::run_cli(
            dir.path(),
            &[
                "project",
                "add",
                project,
                "--shared-sso",
                "corp",
                "--config",
                &config,
            ],
        );
        assert_eq!(added.code, 0, "{added:?}");
    }
    let wisp = Wisp::start_in(
        dir,
        &[
            "--config".into(),
            config.into(),
            "--sso-allow-private-addresses".into(),
        ],
    );
    let (_, state) = start_login_for(&wisp, "team").await;
    let session = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect("olivia is an Editor of team");
    assert_eq!(
        me(&wisp, &session).await,
        ("olivia".to_string(), "team".to_string())
    );

    let (_, state) = start_login_for(&wisp, "strict").await;
    let refused = finish_login(&wisp, &state, GOOD_CODE)
        .await
        .expect_err("strict reads no default claim");
    assert!(refused.contains("no%20role"), "{refused}");
}
