//! Hostile callers that hold some credential, or reach what a tenant configures (issue
//! 33): a piped poisoning `/metrics`, static-login floods and lock-outs, SSO issuers that
//! point inside the network, session tokens without `jti` after logout.

use crate::support;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use support::{QUICKSTART, Via, Wisp};
use wisp_proto::pipedservice as ps;

/// A Prometheus server (Debian's `prometheus` package) scraping one target every 10 s (a debug build renders a flooded `/metrics` in seconds);
/// stopped when dropped. Also scrapes `wisp bridge` in tests/e2e/deploy_k8s.rs.
pub(crate) struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Prometheus {
    /// `None` (the test skipped) when there is no `prometheus` binary.
    pub(crate) fn start(test: &str, target: SocketAddr) -> Option<Prometheus> {
        let binary = std::env::var("WISP_TEST_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{ scrape_interval: 10s, scrape_timeout: 10s }}\n\
                 scrape_configs:\n  - job_name: wisp\n    static_configs: [{{ targets: [\"{target}\"] }}]\n"
            ),
        )
        .expect("write the config");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        match child {
            Ok(child) => Some(Prometheus {
                child,
                addr,
                _dir: dir,
            }),
            Err(e) => support::aws::skip(test, &format!("cannot run {binary}: {e}")),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The instant query's result vector (empty when Prometheus is not answering yet).
    pub(crate) async fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let q: String = form_urlencoded::byte_serialize(promql.as_bytes()).collect();
        let Ok(Ok((status, body))) = tokio::time::timeout(
            Duration::from_secs(10),
            try_get(self.addr, &format!("/api/v1/query?query={q}")),
        )
        .await
        else {
            return Vec::new();
        };
        if status != StatusCode::OK {
            return Vec::new();
        }
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits (up to two minutes) until `promql` has a result whose value is `want`.
    pub(crate) async fn wait_for(&self, promql: &str, want: &str) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let result = self.query(promql).await;
            if result.iter().any(|r| r["value"][1] == want) {
                return result;
            }
            if Instant::now() >= deadline {
                let targets = try_get(self.addr, "/api/v1/targets").await;
                panic!(
                    "{promql} never gave {want} (last: {result:?}); targets: {targets:?}; \
                     Prometheus's log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// A GET that may fail (Prometheus still starting).
async fn try_get(addr: SocketAddr, path: &str) -> Result<(StatusCode, String), String> {
    use http_body_util::BodyExt;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client = Client::builder(TokioExecutor::new()).build_http::<String>();
    let req = http::Request::builder()
        .method(Method::GET)
        .uri(format!("http://{addr}{path}"))
        .body(String::new())
        .map_err(|e| e.to_string())?;
    let resp = client.request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A piped that reports what Prometheus refuses (`1e999`, a `__name__` label, a label
/// twice), declares another project's family with its own HELP and TYPE, and floods
/// series, does not blind a real Prometheus: the scrape is taken (`up` is 1), Wisp's own
/// series are there, and so are the other project's piped's series, still without the
/// hostile piped's TYPE.
#[tokio::test]
async fn a_hostile_piped_cannot_blind_prometheus() {
    let test = "hostile_tenants::a_hostile_piped_cannot_blind_prometheus";
    let wisp = Wisp::start();
    let admin = wisp.server().admin_addr().expect("an admin address");
    wisp.cli_json(&["project", "add", "other"]);

    let honest = wisp.add_piped("other", "honest");
    let mut client = wisp.piped_client(Via::Grpc, &honest).await;
    support::ok(
        client
            .report_stat(ps::ReportStatRequest {
                piped_stats: b"# HELP deployments_total Deployments handled.\n\
                    # TYPE deployments_total counter\n\
                    deployments_total{status=\"ok\"} 7\n"
                    .to_vec(),
            })
            .await,
    );

    let hostile = wisp.add_piped(QUICKSTART, "hostile");
    let mut text = String::from(
        "# HELP deployments_total Whatever the hostile piped says.\n\
         # TYPE deployments_total gauge\n\
         deployments_total{status=\"ok\"} 1\n\
         too_big 1e999\n\
         renamed{__name__=\"up\"} 0\n\
         twice{a=\"1\",a=\"2\"} 1\n\
         spelled_inf inf\n",
    );
    // Series past the project's bound, within the bytes a piped may send.
    let mut i = 0;
    while text.len() < wisp_telemetry::reexport::MAX_BYTES_PER_PIPED - 32 {
        text.push_str(&format!("s{i} 1\n"));
        i += 1;
    }
    let mut hostile_client = wisp.piped_client(Via::Grpc, &hostile).await;
    support::ok(
        hostile_client
            .report_stat(ps::ReportStatRequest {
                piped_stats: text.into_bytes(),
            })
            .await,
    );

    // What Wisp serves: the poison is gone, no one's TYPE for the shared family.
    let (status, body) = support::http_request_to(admin, Method::GET, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !body.contains("1e999"),
        "a value Prometheus refuses was kept"
    );
    assert!(!body.contains("__name__"));
    assert!(
        !body.contains("# TYPE deployments_total"),
        "one project typed another's family"
    );
    assert!(body.contains("deployments_total{project_id=\"other\",piped_id=\""));
    let piped_series = body
        .lines()
        .filter(|l| l.starts_with('s') && l.contains("piped_id="))
        .count();
    assert!(
        piped_series <= wisp_telemetry::reexport::MAX_SERIES_PER_PROJECT,
        "{piped_series} series from one project"
    );

    // A real Prometheus takes the scrape.
    let Some(prometheus) = Prometheus::start(test, admin) else {
        return;
    };
    prometheus.wait_for("up{job=\"wisp\"}", "1").await;
    let ours = prometheus
        .wait_for("count(wisp_grpc_requests_total) > bool 0", "1")
        .await;
    assert!(!ours.is_empty());
    let honest_series = prometheus
        .wait_for("deployments_total{project_id=\"other\",status=\"ok\"}", "7")
        .await;
    assert_eq!(honest_series.len(), 1, "{honest_series:?}");
    // The scrape was not cut short by the flood: the hostile project's first series are in.
    prometheus
        .wait_for("s0{project_id=\"quickstart\"}", "1")
        .await;
}

// ---------------------------------------------------------------------------------------
// Static login (issue 33.6)
// ---------------------------------------------------------------------------------------

/// What a login answered: the session cookie's value, or the error cookie's.
#[derive(Debug)]
struct Login {
    token: Option<String>,
    error: Option<String>,
}

/// Posts the static login form to `addr` from the loopback address `from` (127.0.0.x:
/// each a source of its own), with `headers`.
async fn login_from(
    from: [u8; 4],
    addr: SocketAddr,
    project: &str,
    username: &str,
    password: &str,
    headers: &[(&str, &str)],
) -> Login {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(std::net::IpAddr::from(from)));
    let client =
        Client::builder(TokioExecutor::new()).build::<_, Full<tonic::codegen::Bytes>>(connector);
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("project", project)
        .append_pair("username", username)
        .append_pair("password", password)
        .finish();
    let mut req = http::Request::builder()
        .method(Method::POST)
        .uri(format!("http://{addr}/auth/login/static"))
        .header("content-type", "application/x-www-form-urlencoded");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = client
        .request(req.body(Full::new(body.into())).expect("a request"))
        .await
        .expect("POST /auth/login/static");
    let cookie = |name: &str| {
        resp.headers()
            .get_all(http::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|c| {
                c.split(';')
                    .next()
                    .and_then(|kv| kv.strip_prefix(&format!("{name}=")))
                    .map(str::to_owned)
            })
    };
    let login = Login {
        token: cookie("token").filter(|t| !t.is_empty()),
        error: cookie("error"),
    };
    let _ = resp.into_body().collect().await;
    login
}

const STRANGER: [u8; 4] = [127, 0, 0, 2];
const ADMIN: [u8; 4] = [127, 0, 0, 1];

fn refused_with(login: &Login, message: &str) {
    assert!(login.token.is_none(), "{login:?}");
    let error = login.error.as_deref().unwrap_or_default();
    assert!(error.contains(message), "{login:?} does not say {message}");
}

/// A stranger guessing the static admin's password locks out only itself: the admin
/// logs in from elsewhere; an `X-Forwarded-For` of the stranger's own does not move it
/// (no proxy is trusted); fresh user names and unknown projects cost one bcrypt each,
/// as the admin's name does (so the answer's time does not tell a name is the admin's:
/// issue 33.6), and are bounded per source.
#[tokio::test]
async fn a_stranger_cannot_lock_out_the_static_admin() {
    let wisp = Wisp::start();
    let addr = wisp.addr();
    let slow_checks = |m: &crate::metrics::Scrape| {
        m.value(
            "wisp_auth_slow_hash_checks_total",
            &[("credential", "static_admin")],
        )
    };
    for i in 0..10 {
        let login = login_from(
            STRANGER,
            addr,
            QUICKSTART,
            "hello-pipecd",
            &format!("guess-{i}"),
            &[],
        )
        .await;
        refused_with(&login, "Unable%20to%20login");
    }
    let locked = login_from(
        STRANGER,
        addr,
        QUICKSTART,
        "hello-pipecd",
        "hello-pipecd",
        &[],
    )
    .await;
    refused_with(&locked, "Too%20many%20failed%20logins");
    let spoofed = login_from(
        STRANGER,
        addr,
        QUICKSTART,
        "hello-pipecd",
        "hello-pipecd",
        &[("x-forwarded-for", "198.51.100.1")],
    )
    .await;
    refused_with(&spoofed, "Too%20many%20failed%20logins");

    // The admin, elsewhere, is not locked out.
    let admin = login_from(ADMIN, addr, QUICKSTART, "hello-pipecd", "hello-pipecd", &[]).await;
    assert!(admin.token.is_some(), "the admin was locked out: {admin:?}");

    // The ten guesses with the admin's user name each cost a bcrypt; so do fresh user
    // names and unknown projects (the same work, the same answer).
    let before = slow_checks(&crate::metrics::Scrape::from(&wisp).await);
    assert!(before >= 10.0, "{before}");
    let flooder = [127, 0, 0, 3];
    for i in 0..wisp_services::web::logins::MAX_FAILED_LOGINS_PER_SOURCE {
        let (project, user) = if i % 2 == 0 {
            (QUICKSTART.to_string(), format!("fresh-{i}"))
        } else {
            (format!("no-such-project-{i}"), "hello-pipecd".to_string())
        };
        let login = login_from(flooder, addr, &project, &user, "x", &[]).await;
        refused_with(&login, "Unable%20to%20login");
    }
    let after = slow_checks(&crate::metrics::Scrape::from(&wisp).await);
    assert_eq!(
        after - before,
        f64::from(wisp_services::web::logins::MAX_FAILED_LOGINS_PER_SOURCE),
        "a refusal for an unknown user name or project skipped the bcrypt an admin's name costs"
    );
    // Past the source's bound, the source is refused whatever it sends.
    let bounded = login_from(
        flooder,
        addr,
        QUICKSTART,
        "hello-pipecd",
        "hello-pipecd",
        &[],
    )
    .await;
    refused_with(&bounded, "Too%20many%20failed%20logins");
}

/// Behind a proxy the operator names, the address it saw is the source.
#[tokio::test]
async fn a_trusted_proxy_names_the_source() {
    let wisp = Wisp::start_with_serve_args(&["--trusted-proxy".into(), "127.0.0.4/32".into()]);
    let addr = wisp.addr();
    let proxy = [127, 0, 0, 4];
    let behind = |who: &'static str| [("x-forwarded-for", who)];
    for i in 0..10 {
        let login = login_from(
            proxy,
            addr,
            QUICKSTART,
            "hello-pipecd",
            &format!("guess-{i}"),
            &behind("203.0.113.66"),
        )
        .await;
        refused_with(&login, "Unable%20to%20login");
    }
    let stranger = login_from(
        proxy,
        addr,
        QUICKSTART,
        "hello-pipecd",
        "hello-pipecd",
        &behind("203.0.113.66"),
    )
    .await;
    refused_with(&stranger, "Too%20many%20failed%20logins");
    // The same proxy, another client behind it: not locked out.
    let admin = login_from(
        proxy,
        addr,
        QUICKSTART,
        "hello-pipecd",
        "hello-pipecd",
        &behind("192.0.2.10"),
    )
    .await;
    assert!(admin.token.is_some(), "{admin:?}");
}

/// On two instances sharing Redis, a stranger's guesses spread over both lock the
/// stranger out of both, and the admin still logs in on both from elsewhere.
#[tokio::test]
async fn two_instances_with_redis_lock_out_the_stranger_only() {
    let test = "hostile_tenants::two_instances_with_redis_lock_out_the_stranger_only";
    let Some(env) = support::aws::AwsEnv::from_env(test) else {
        return;
    };
    let Some(redis) = support::aws::RedisServer::start(test) else {
        return;
    };
    let (first, second, _second_dir, user, password) =
        crate::instances::two_instances_for_logins(&env, Some(&redis.url()));
    let addrs = [first.addr(), second.addr()];
    for (i, addr) in addrs.iter().cycle().take(10).enumerate() {
        let login = login_from(
            STRANGER,
            *addr,
            QUICKSTART,
            &user,
            &format!("guess-{i}"),
            &[],
        )
        .await;
        refused_with(&login, "Unable%20to%20login");
    }
    for addr in addrs {
        let locked = login_from(STRANGER, addr, QUICKSTART, &user, &password, &[]).await;
        refused_with(&locked, "Too%20many%20failed%20logins");
        let admin = login_from(ADMIN, addr, QUICKSTART, &user, &password, &[]).await;
        assert!(admin.token.is_some(), "{admin:?}");
    }
}

/// Without Redis each instance counts what it saw; the admin logs in on both from
/// elsewhere all the same.
#[tokio::test]
async fn two_instances_without_redis_lock_out_the_stranger_only() {
    let test = "hostile_tenants::two_instances_without_redis_lock_out_the_stranger_only";
    let Some(env) = support::aws::AwsEnv::from_env(test) else {
        return;
    };
    let (first, second, _second_dir, user, password) =
        crate::instances::two_instances_for_logins(&env, None);
    for addr in [first.addr(), second.addr()] {
        for i in 0..10 {
            let login = login_from(
                STRANGER,
                addr,
                QUICKSTART,
                &user,
                &format!("guess-{i}"),
                &[],
            )
            .await;
            refused_with(&login, "Unable%20to%20login");
        }
        let locked = login_from(STRANGER, addr, QUICKSTART, &user, &password, &[]).await;
        refused_with(&locked, "Too%20many%20failed%20logins");
        let admin = login_from(ADMIN, addr, QUICKSTART, &user, &password, &[]).await;
        assert!(admin.token.is_some(), "{admin:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Sessions without `jti` (issue 33.8)
// ---------------------------------------------------------------------------------------

/// A session token without `jti` (an older Wisp's, or minted by upstream with the same
/// key) does not survive its logout.
#[tokio::test]
async fn a_session_without_jti_ends_at_logout() {
    use wisp_proto::webservice::GetMeRequest;

    let wisp = Wisp::start();
    let key = std::fs::read(wisp.data_dir().join("encryption-key")).expect("the server's key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let claims = serde_json::json!({
        "sub": "upstream-user",
        "iss": "PipeCD",
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "role": { "project_id": QUICKSTART, "project_rbac_roles": ["Admin"] },
    });
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(&key),
    )
    .expect("sign");
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    support::ok(console.get_me(GetMeRequest {}).await);

    let cookie = format!("token={token}");
    let origin = format!("http://{}", wisp.addr());
    let resp = wisp
        .http_post(
            "/auth/logout",
            &[("cookie", cookie.as_str()), ("origin", origin.as_str())],
            Vec::new(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::FOUND, "{resp:?}");
    support::assert_status(
        console.get_me(GetMeRequest {}).await,
        tonic::Code::Unauthenticated,
        "",
    );
    // Through the other transport too, and from a fresh client.
    let mut again = wisp.web_client(Via::Grpc, Some(&token)).await;
    support::assert_status(
        again.get_me(GetMeRequest {}).await,
        tonic::Code::Unauthenticated,
        "",
    );
}

// ---------------------------------------------------------------------------------------
// SSO issuers (issue 33.8)
// ---------------------------------------------------------------------------------------

/// A project admin cannot point the control plane inside its network: an OIDC issuer
/// (or endpoint, or GitHub Enterprise address) on a private, link-local or loopback
/// address, or over plain HTTP, is refused when saved, unless the operator allows it.
#[tokio::test]
async fn sso_addresses_inside_the_network_are_refused_when_saved() {
    use wisp_proto::model;
    use wisp_proto::webservice as web;

    let sso = |issuer: &str, endpoint: &str, github: &str| web::UpdateProjectSsoConfigRequest {
        sso: Some(model::ProjectSsoConfig {
            provider: model::project_sso_config::Provider::Oidc as i32,
            session_ttl: 24,
            oidc: Some(model::project_sso_config::Oidc {
                client_id: "cid".into(),
                client_secret: "secret".into(),
                issuer: issuer.into(),
                token_endpoint: endpoint.into(),
                redirect_uri: "https://wisp.example.com/auth/callback".into(),
                ..Default::default()
            }),
            github: (!github.is_empty()).then(|| model::project_sso_config::GitHub {
                base_url: github.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    let wisp = Wisp::start();
    let admin = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&admin)).await;
    for (issuer, endpoint, github) in [
        ("https://169.254.169.254/latest/meta-data", "", ""),
        ("https://10.0.0.7", "", ""),
        ("https://[fd00::7]:8443", "", ""),
        ("https://localhost:8443", "", ""),
        ("http://127.0.0.1:8080", "", ""),
        ("http://idp.example.com", "", ""),
        ("https://idp.example.com", "https://192.168.1.1/token", ""),
        ("https://idp.example.com", "", "https://172.16.0.1"),
    ] {
        support::assert_status(
            console
                .update_project_sso_config(sso(issuer, endpoint, github))
                .await,
            tonic::Code::InvalidArgument,
            "invalid SSO settings",
        );
    }
    support::ok(
        console
            .update_project_sso_config(sso("https://idp.example.com/realms/acme", "", ""))
            .await,
    );

    // The operator may allow a provider inside the network.
    let open = Wisp::start_with_serve_args(&["--sso-allow-private-addresses".into()]);
    let admin = open.admin_session().await;
    let mut console = open.web_client(Via::GrpcWeb, Some(&admin)).await;
    support::ok(
        console
            .update_project_sso_config(sso("http://127.0.0.1:8080", "", ""))
            .await,
    );
    support::ok(
        console
            .update_project_sso_config(sso("https://10.0.0.7", "", ""))
            .await,
    );
}

/// The same switch on the serverless deployment (issue 33.8: `wisp serve` had it, the
/// functions did not): with `WISP_SSO_ALLOW_PRIVATE_ADDRESSES=true` in the web-api and
/// http functions' environment, a project admin saves an issuer on loopback, and the
/// http function fetches its discovery document on `POST /auth/login`.
#[tokio::test]
async fn lambda_functions_take_the_private_sso_switch() {
    use wisp_proto::model;
    use wisp_proto::webservice as web;
    let allow = || {
        vec![(
            "WISP_SSO_ALLOW_PRIVATE_ADDRESSES".to_string(),
            Some("true".to_string()),
        )]
    };
    let env =
        support::lambda::FunctionEnv::from([("wisp-web-api", allow()), ("wisp-http", allow())]);
    let Some(wisp) = Wisp::start_lambda_with("lambda_functions_take_the_private_sso_switch", &env)
    else {
        return;
    };
    // An "identity provider" on loopback that reports the first request it gets.
    let provider = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let issuer = format!("http://{}", provider.local_addr().expect("address"));
    let (seen_tx, seen) = tokio::sync::oneshot::channel::<String>();
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let Ok((mut conn, _)) = provider.accept().await else {
            return;
        };
        let mut buf = vec![0u8; 4096];
        let n = conn.read(&mut buf).await.unwrap_or(0);
        let request = String::from_utf8_lossy(&buf[..n]).into_owned();
        let _ = seen_tx.send(request.lines().next().unwrap_or_default().to_string());
    });

    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let resp = wisp.login_static(QUICKSTART, &username, &password).await;
    let token = support::web::cookie_value(
        support::web::set_cookie(&resp, "token")
            .unwrap_or_else(|| panic!("no session cookie: {resp:?}")),
    )
    .to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    support::ok(
        console
            .update_project_sso_config(web::UpdateProjectSsoConfigRequest {
                sso: Some(model::ProjectSsoConfig {
                    provider: model::project_sso_config::Provider::Oidc as i32,
                    session_ttl: 24,
                    oidc: Some(model::project_sso_config::Oidc {
                        client_id: "cid".into(),
                        client_secret: "secret".into(),
                        issuer: issuer.clone(),
                        redirect_uri: "https://wisp.example.com/auth/callback".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            })
            .await,
    );
    let _ = wisp
        .http_post(
            "/auth/login",
            &[("content-type", "application/x-www-form-urlencoded")],
            format!("project={QUICKSTART}").into_bytes(),
        )
        .await;
    let request = tokio::time::timeout(Duration::from_secs(60), seen)
        .await
        .expect("the http function never reached the issuer on loopback")
        .expect("the provider's task");
    assert!(
        request.contains("/.well-known/openid-configuration"),
        "{request}"
    );
}
