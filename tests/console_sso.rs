//! SSO login through OpenID Connect, end to end: `wisp serve`, the console's login form,
//! and a fake identity provider this test runs (discovery document, JWKS with an RSA key,
//! token endpoint issuing signed ID tokens with a groups claim).

mod support;

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

const PUBLIC: &str = include_str!("../shared/services/tests/testdata/piped-public.pem");
const PRIVATE: &str = include_str!("../shared/services/tests/testdata/piped-private.pem");
const CLIENT_ID: &str = "wisp-console";
const CLIENT_SECRET: &str = "provider-secret";
const GOOD_CODE: &str = "the-code";

/// What the provider puts in the next ID token.
#[derive(Clone)]
struct Provider {
    addr: SocketAddr,
    claims: Arc<Mutex<serde_json::Value>>,
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
        };
        let served = provider.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let p = served.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let p = p.clone();
                        async move { Ok::<_, Infallible>(p.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        provider
    }

    fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    async fn handle(&self, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
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
            "/.well-known/openid-configuration" => json(serde_json::json!({
                "issuer": issuer,
                "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "jwks_uri": format!("{issuer}/jwks"),
            })),
            "/jwks" => {
                let key = rsa::RsaPublicKey::from_public_key_pem(PUBLIC).expect("public key");
                use base64::Engine;
                let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                json(serde_json::json!({"keys": [{
                    "kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
                    "n": b64.encode(key.n().to_bytes_be()),
                    "e": b64.encode(key.e().to_bytes_be()),
                }]}))
            }
            "/token" => {
                let form: Vec<(String, String)> =
                    form_urlencoded::parse(&body).into_owned().collect();
                let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                if get("code") != Some(GOOD_CODE)
                    || get("client_id") != Some(CLIENT_ID)
                    || get("client_secret") != Some(CLIENT_SECRET)
                {
                    return hyper::Response::builder()
                        .status(400)
                        .body(Full::new(Bytes::from_static(
                            b"{\"error\":\"invalid_grant\"}",
                        )))
                        .expect("response");
                }
                let now = support::fixtures::now();
                let mut claims = self.claims.lock().expect("claims").clone();
                let extra = serde_json::json!({
                    "iss": issuer, "aud": CLIENT_ID, "sub": "user-1",
                    "iat": now, "exp": now + 300,
                });
                if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
                    c.extend(e.clone());
                }
                let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
                header.kid = Some("k1".into());
                let key = jsonwebtoken::EncodingKey::from_rsa_pem(PRIVATE.as_bytes())
                    .expect("private key");
                let id_token = jsonwebtoken::encode(&header, &claims, &key).expect("sign");
                json(serde_json::json!({
                    "access_token": "at", "token_type": "Bearer", "id_token": id_token,
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
async fn start_login(wisp: &Wisp) -> (String, String) {
    let resp = wisp
        .http_post(
            "/auth/login",
            &[("content-type", "application/x-www-form-urlencoded")],
            format!("project={QUICKSTART}").into_bytes(),
        )
        .await;
    assert_eq!(resp.status, http::StatusCode::FOUND, "{resp:?}");
    let location = resp.headers["location"]
        .to_str()
        .expect("location")
        .to_string();
    let state = cookie_value(set_cookie(&resp, "state").expect("a state cookie")).to_string();
    (location, state)
}

#[tokio::test]
async fn oidc_login_maps_groups_to_roles() {
    let provider = Provider::start().await;
    let wisp = Wisp::start();
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
                    issuer: provider.issuer(),
                    redirect_uri: "http://localhost:8080/auth/callback".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await);
    ok(console
        .add_project_user_group(web::AddProjectUserGroupRequest {
            sso_group: "acme/ops".into(),
            role: "Editor".into(),
        })
        .await);

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
        &format!("state={state}"),
    )
    .await;
    assert_eq!(resp.status, http::StatusCode::FOUND, "{resp:?}");
    let token = cookie_value(set_cookie(&resp, "token").expect("a session")).to_string();
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

    // Someone in no mapped group is refused, with the reason in the error cookie.
    *provider.claims.lock().expect("claims") =
        serde_json::json!({"preferred_username": "mallory", "groups": ["elsewhere"]});
    let (_, state) = start_login(&wisp).await;
    let resp = get_with_cookie(
        &wisp,
        &format!("/auth/callback?code={GOOD_CODE}&state={state}"),
        &format!("state={state}"),
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
        &format!("state={state}"),
    )
    .await;
    assert!(set_cookie(&resp, "token").is_none());
}
