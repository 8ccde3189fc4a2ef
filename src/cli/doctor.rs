//! `wisp doctor URL`: checks a live deployment from where a user runs it, the way a
//! piped, pipectl and a browser reach it. DNS, TLS, that each load-balancer route reaches
//! the function serving it (a gRPC-web call per service, whose answer must be a gRPC
//! answer, not a 404 or a page), the console's `index.html`, one of its files through the
//! redirect to the bucket, the login page, and, given an admin's console session, that a
//! revocation is recorded (a throwaway API key is created, used, disabled and must then be
//! refused by the other function). Each failure is one line saying what is wrong and the
//! fix; the exit status is non-zero when anything failed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use prost::Message;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wisp_proto::grpc::service::{apiservice as api, webservice as web};
use wisp_proto::model;

use crate::error::CliError;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The deployment's address, as the pipeds and the console use it, e.g.
    /// `https://pipecd.example.com`.
    pub url: String,
    /// PEM file of CA certificates to trust besides the system's (a private CA).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// A project admin's console session (the value of the console's `token` cookie):
    /// also check that a revocation is recorded, with a throwaway API key that is created,
    /// used, disabled and must then be refused.
    #[arg(long, env = "WISP_DOCTOR_SESSION", hide_env_values = true)]
    pub session: Option<String>,
    /// The project whose login page is checked (`/login?project=...`).
    #[arg(long)]
    pub project: Option<String>,
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
}

/// How long one request may take (a cold function's init included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of an answer read.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// The gRPC services behind the load balancer: the function serving each, and a method
/// that any caller may reach (its answer without credentials is UNAUTHENTICATED).
const SERVICES: &[(&str, &str, &str)] = &[
    (
        "PipedService",
        "piped-api",
        "grpc.service.pipedservice.PipedService/ListApplications",
    ),
    (
        "APIService",
        "api",
        "grpc.service.apiservice.APIService/ListApplications",
    ),
    (
        "WebService",
        "web-api",
        "grpc.service.webservice.WebService/GetMe",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Failed,
    Skipped,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "FAIL",
            Outcome::Skipped => "skip",
        }
    }
}

#[derive(Debug)]
struct Check {
    name: String,
    outcome: Outcome,
    detail: String,
    fix: Option<String>,
}

#[derive(Default)]
struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn ok(&mut self, name: impl Into<String>, detail: impl Into<String>) {
        self.push(name, Outcome::Ok, detail.into(), None);
    }
    fn fail(&mut self, name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(name, Outcome::Failed, detail.into(), Some(fix.into()));
    }
    fn skip(&mut self, name: impl Into<String>, detail: impl Into<String>) {
        self.push(name, Outcome::Skipped, detail.into(), None);
    }
    fn push(
        &mut self,
        name: impl Into<String>,
        outcome: Outcome,
        detail: String,
        fix: Option<String>,
    ) {
        self.checks.push(Check {
            name: name.into(),
            outcome,
            detail,
            fix,
        });
    }
    fn failed(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.outcome == Outcome::Failed)
            .count()
    }
}

/// Where the deployment is: scheme, host, port.
#[derive(Debug, Clone)]
struct Target {
    https: bool,
    host: String,
    port: u16,
}

impl Target {
    fn parse(raw: &str) -> Result<Target, String> {
        let uri: http::Uri = raw
            .parse()
            .map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(format!(
                    "{raw:?}: expected https://HOST (or http://HOST:PORT)"
                ));
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("{raw:?} has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Target { https, host, port })
    }

    fn authority(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One HTTP answer, read whole.
#[derive(Debug)]
struct Answer {
    status: http::StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The start of the body as text, for a failure line.
    fn snippet(&self) -> String {
        let text = String::from_utf8_lossy(&self.body[..self.body.len().min(120)]);
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// A gRPC-web answer: its status (from the headers or the trailer frame) and message.
#[derive(Debug)]
struct GrpcAnswer {
    status: Option<i32>,
    message: String,
    payload: Option<Bytes>,
}

/// HTTP/1.1 over TCP (and TLS for https), one connection per request: few requests, and
/// each failure is then that request's own.
struct Client {
    tls: Arc<rustls::ClientConfig>,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Client {
    fn new(ca_file: Option<&PathBuf>) -> Result<Client, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        let _ = roots.add_parsable_certificates(native.certs);
        if let Some(path) = ca_file {
            let pem =
                std::fs::read(path).map_err(|e| format!("--ca-file {}: {e}", path.display()))?;
            let mut added = 0;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("--ca-file {}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("--ca-file {}: {e}", path.display()))?;
                added += 1;
            }
            if added == 0 {
                return Err(format!(
                    "--ca-file {}: no PEM certificate in it",
                    path.display()
                ));
            }
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Client { tls: Arc::new(tls) })
    }

    /// TCP, then TLS for https: the stream, or what failed (`tls:` first for TLS).
    async fn connect(&self, target: &Target, addr: SocketAddr) -> Result<Box<dyn Io>, String> {
        let tcp = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("no TCP connection to {addr} within {REQUEST_TIMEOUT:?}"))?
            .map_err(|e| format!("no TCP connection to {addr}: {e}"))?;
        if !target.https {
            return Ok(Box::new(tcp));
        }
        let name = rustls::pki_types::ServerName::try_from(target.host.clone())
            .map_err(|e| format!("tls: {:?} is not a server name: {e}", target.host))?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let tls = tokio::time::timeout(REQUEST_TIMEOUT, connector.connect(name, tcp))
            .await
            .map_err(|_| format!("tls: no TLS handshake with {addr} within {REQUEST_TIMEOUT:?}"))?
            .map_err(|e| format!("tls: {e}"))?;
        Ok(Box::new(tls))
    }

    async fn request(
        &self,
        target: &Target,
        addr: SocketAddr,
        request: http::Request<Full<Bytes>>,
    ) -> Result<Answer, String> {
        let io = self.connect(target, addr).await?;
        let exchange = async {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
                .await
                .map_err(|e| format!("HTTP/1.1: {e}"))?;
            tokio::spawn(connection);
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| format!("no HTTP answer: {e}"))?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_BODY)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
    }
}

/// The deployment as the checks reach it.
struct Deployment {
    client: Client,
    target: Target,
    addr: SocketAddr,
}

impl Deployment {
    async fn get(&self, path: &str) -> Result<Answer, String> {
        let request = http::Request::get(path)
            .header(http::header::HOST, self.target.authority())
            .header(http::header::ACCEPT, "text/html,*/*")
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        self.client.request(&self.target, self.addr, request).await
    }

    /// One gRPC-web call (binary, unary); `Err` when the answer is not gRPC at all.
    async fn grpc_web(
        &self,
        method_path: &str,
        message: &[u8],
        headers: &[(&str, &str)],
    ) -> Result<Result<GrpcAnswer, Answer>, String> {
        let mut body = Vec::with_capacity(message.len() + 5);
        body.push(0);
        body.extend_from_slice(
            &u32::try_from(message.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        body.extend_from_slice(message);
        let mut request = http::Request::post(format!("/{method_path}"))
            .header(http::header::HOST, self.target.authority())
            .header(http::header::CONTENT_TYPE, "application/grpc-web+proto")
            .header(http::header::ACCEPT, "application/grpc-web+proto")
            .header("x-grpc-web", "1");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let answer = self
            .client
            .request(&self.target, self.addr, request)
            .await?;
        if !answer
            .header("content-type")
            .starts_with("application/grpc-web")
        {
            return Ok(Err(answer));
        }
        Ok(Ok(parse_grpc_web(&answer)))
    }
}

/// The status and the first message of a gRPC-web answer (status in the headers for a
/// trailers-only answer, else in the trailer frame).
fn parse_grpc_web(answer: &Answer) -> GrpcAnswer {
    let mut status = answer.header("grpc-status").parse().ok();
    let mut message = answer.header("grpc-message").to_string();
    let mut payload = None;
    let body = &answer.body;
    let mut at = 0;
    while at + 5 <= body.len() {
        let flag = body[at];
        let len = u32::from_be_bytes([body[at + 1], body[at + 2], body[at + 3], body[at + 4]]);
        let (start, end) = (at + 5, at + 5 + usize::try_from(len).unwrap_or(usize::MAX));
        if end > body.len() {
            break;
        }
        if flag & 0x80 != 0 {
            for line in String::from_utf8_lossy(&body[start..end]).lines() {
                if let Some((k, v)) = line.split_once(':') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "grpc-status" => status = v.trim().parse().ok(),
                        "grpc-message" => message = v.trim().to_string(),
                        _ => {}
                    }
                }
            }
        } else if payload.is_none() {
            payload = Some(body.slice(start..end));
        }
        at = end;
    }
    GrpcAnswer {
        status,
        message: percent_decode(&message),
        payload,
    }
}

/// grpc-message is percent-encoded.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

const UNIMPLEMENTED: i32 = 12;
const UNAUTHENTICATED: i32 = 16;

fn code_name(code: i32) -> &'static str {
    tonic::Code::from_i32(code).description()
}

pub async fn run(args: DoctorArgs) -> Result<(), CliError> {
    let target = Target::parse(&args.url).map_err(CliError::Usage)?;
    let client = Client::new(args.ca_file.as_ref()).map_err(CliError::Usage)?;
    let mut report = Report::default();
    check(&args, target, client, &mut report).await;

    if args.json {
        let checks: Vec<_> = report
            .checks
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "outcome": match c.outcome { Outcome::Ok => "ok", Outcome::Failed => "failed", Outcome::Skipped => "skipped" },
                    "detail": c.detail,
                    "fix": c.fix,
                })
            })
            .collect();
        let out = json!({ "url": args.url, "failed": report.failed(), "checks": checks });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        for c in &report.checks {
            match &c.fix {
                Some(fix) => println!(
                    "{:<4} {}: {} Fix: {fix}",
                    c.outcome.as_str(),
                    c.name,
                    c.detail
                ),
                None => println!("{:<4} {}: {}", c.outcome.as_str(), c.name, c.detail),
            }
        }
    }
    match report.failed() {
        0 => Ok(()),
        n => Err(CliError::Failure(anyhow::anyhow!(
            "{n} of {} checks of {} failed",
            report.checks.len(),
            args.url
        ))),
    }
}

async fn check(args: &DoctorArgs, target: Target, client: Client, report: &mut Report) {
    // DNS.
    let addrs: Vec<SocketAddr> = match tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
    {
        Ok(addrs) => addrs.collect(),
        Err(e) => {
            report.fail(
                "dns",
                format!("{} does not resolve: {e}.", target.host),
                "point the name at the load balancer (the module's alias record with route53_zone_id, or a CNAME to the alb_dns_name output / AlbDnsName).",
            );
            return;
        }
    };
    let Some(&addr) = addrs.first() else {
        report.fail(
            "dns",
            format!("{} resolves to no address.", target.host),
            "point the name at the load balancer (alias record or CNAME to alb_dns_name).",
        );
        return;
    };
    let listed: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
    report.ok(
        "dns",
        format!("{} resolves to {}.", target.host, listed.join(", ")),
    );

    // TLS: the handshake alone, so that its failure is named before any route's.
    let deployment = Deployment {
        client,
        target: target.clone(),
        addr,
    };
    let unreachable = |report: &mut Report, e: String| {
        report.fail(
            "connect",
            format!("{e}."),
            format!(
                "the load balancer must listen on port {} and its security group admit this address (alb_ingress_cidrs / AlbIngressCidr).",
                target.port
            ),
        );
    };
    if target.https {
        match deployment.client.connect(&target, addr).await {
            Err(e) if !e.starts_with("tls:") => {
                unreachable(report, e);
                return;
            }
            Ok(_) => report.ok(
                "tls",
                format!("the certificate is valid for {} and trusted.", target.host),
            ),
            Err(e) => {
                let fix = if e.contains("not valid for name") || e.contains("NotValidForName") {
                    format!(
                        "the HTTPS listener's certificate must cover {} (certificate_arn / CertificateArn, or let the deployment request one with route53_zone_id / HostedZoneId).",
                        target.host
                    )
                } else if e.contains("UnknownIssuer") {
                    "use a certificate from a public CA (ACM), or pass --ca-file with your private CA.".to_string()
                } else if e.contains("Expired") || e.contains("expired") {
                    "renew the listener's certificate (an ACM certificate validated through DNS renews itself).".to_string()
                } else {
                    "check that the load balancer listens on HTTPS (port 443) with a valid certificate.".to_string()
                };
                report.fail("tls", format!("{e}."), fix);
                return;
            }
        }
    } else {
        if let Err(e) = deployment.client.connect(&target, addr).await {
            unreachable(report, e);
            return;
        }
        report.skip(
            "tls",
            "http:// given: no TLS checked (the pipeds and browsers need https:// on a deployment).",
        );
    }

    // Each route reaches its function: an unauthenticated call answered by that service.
    for (service, function, method) in SERVICES {
        for prefix in ["grpc.service.", "pipe.api.service."] {
            let path = method.replacen("grpc.service.", prefix, 1);
            let name = format!(
                "route /{}",
                path.rsplit_once('/').map_or(path.as_str(), |(p, _)| p)
            );
            let fix_route = format!(
                "the load balancer must send /{}/* to the {function} function (infra/terraform alb.tf routes, template.yaml listener rules): apply the deployment again.",
                path.rsplit_once('/').map_or(path.as_str(), |(p, _)| p)
            );
            match deployment.grpc_web(&path, &[], &[]).await {
                Err(e) => report.fail(name, format!("no answer: {e}."), fix_route),
                Ok(Err(answer)) if answer.status == http::StatusCode::BAD_GATEWAY => report.fail(
                    name,
                    format!("502 from the load balancer: the {function} function failed ({}).", answer.snippet()),
                    format!("read its log (aws logs tail /aws/lambda/<name>-{function}): an init failure names its cause."),
                ),
                Ok(Err(answer)) => report.fail(
                    name,
                    format!(
                        "not a gRPC answer: HTTP {} {} ({}).",
                        answer.status.as_u16(),
                        answer.header("content-type"),
                        answer.snippet()
                    ),
                    fix_route,
                ),
                Ok(Ok(grpc)) => match grpc.status {
                    Some(UNIMPLEMENTED) => report.fail(
                        name,
                        format!("answered UNIMPLEMENTED: the function there does not serve {service}."),
                        fix_route,
                    ),
                    Some(code) => report.ok(
                        name,
                        format!("{service} answers ({}, as expected without credentials).", code_name(code)),
                    ),
                    None => report.fail(name, "a gRPC-web answer without a status.".to_string(), fix_route),
                },
            }
        }
    }

    // The console: index.html from the function, one file by redirect to the bucket.
    let mut asset = None;
    match deployment.get("/").await {
        Ok(a) if a.status.is_success() && a.header("content-type").starts_with("text/html") => {
            asset = first_asset(&String::from_utf8_lossy(&a.body));
            report.ok("console index.html", format!("{} bytes of HTML.", a.body.len()));
        }
        Ok(a) if a.status == http::StatusCode::SERVICE_UNAVAILABLE => report.fail(
            "console index.html",
            format!("503: the http function cannot read the bucket ({}).", a.snippet()),
            "the http function's role needs s3:GetObject on <prefix>console/* (iam.tf, template.yaml); its log names the error.",
        ),
        Ok(a) => report.fail(
            "console index.html",
            format!("HTTP {} ({}).", a.status.as_u16(), a.snippet()),
            "upload the console: wisp console upload --version <PipeCD release> --config-secret <config secret> (web_prefix / WebPrefix must be set).",
        ),
        Err(e) => report.fail(
            "console index.html",
            format!("no answer: {e}."),
            "the load balancer's default action is the http function: apply the deployment again.",
        ),
    }
    match asset {
        None => report.skip("console asset", "index.html names no file to fetch."),
        Some(path) => match deployment.get(&path).await {
            Ok(a) if a.status.is_redirection() => {
                let location = a.header("location").to_string();
                match fetch_absolute(&deployment.client, &location).await {
                    Ok(b) if b.status.is_success() => report.ok(
                        "console asset",
                        format!("{path}: redirected to the bucket, {} bytes.", b.body.len()),
                    ),
                    Ok(b) => report.fail(
                        "console asset",
                        format!("{path}: the bucket answered {} to the redirect ({}).", b.status.as_u16(), b.snippet()),
                        "the http function signs the URL with its role: it needs s3:GetObject on <prefix>console/*; upload the console again if the file is missing.",
                    ),
                    Err(e) => report.fail(
                        "console asset",
                        format!("{path}: following the redirect to {location:?} failed: {e}."),
                        "the browser must reach S3 directly (the bucket's regional endpoint).",
                    ),
                }
            }
            Ok(a) => report.fail(
                "console asset",
                format!("{path}: HTTP {} instead of a redirect ({}).", a.status.as_u16(), a.snippet()),
                "upload the console again (wisp console upload): index.html names a file the bucket lacks.",
            ),
            Err(e) => report.fail("console asset", format!("{path}: no answer: {e}."), "check the http function's log."),
        },
    }

    // The login page (the console's own route, answered with index.html).
    let login = match &args.project {
        Some(p) => format!(
            "/login?project={}",
            form_urlencoded::byte_serialize(p.as_bytes()).collect::<String>()
        ),
        None => "/login".to_string(),
    };
    match deployment.get(&login).await {
        Ok(a) if a.status.is_success() && a.header("content-type").starts_with("text/html") => {
            report.ok("login page", format!("{login} answers the console."));
        }
        Ok(a) => report.fail(
            "login page",
            format!("{login}: HTTP {} ({}).", a.status.as_u16(), a.snippet()),
            "the http function answers the console's routes with index.html: upload the console (wisp console upload).",
        ),
        Err(e) => report.fail("login page", format!("{login}: no answer: {e}."), "check the http function's log."),
    }

    // A revocation is recorded and reaches the other functions.
    match &args.session {
        None => report.skip(
            "revocation",
            "no --session given: the revocation is not checked.",
        ),
        Some(session) => check_revocation(&deployment, session, report).await,
    }
}

/// Creates a throwaway read-only API key (WebService, web-api), uses it (APIService, api),
/// disables it, and expects the api function to refuse it at once.
async fn check_revocation(deployment: &Deployment, session: &str, report: &mut Report) {
    let name = "revocation";
    let cookie = format!("token={session}");
    let generate = web::GenerateApiKeyRequest {
        name: format!("wisp-doctor-{}", uuid::Uuid::new_v4().simple()),
        role: model::api_key::Role::ReadOnly as i32,
    };
    let key = match deployment
        .grpc_web(
            "grpc.service.webservice.WebService/GenerateAPIKey",
            &generate.encode_to_vec(),
            &[("cookie", cookie.as_str())],
        )
        .await
    {
        Ok(Ok(GrpcAnswer {
            status: Some(0),
            payload: Some(p),
            ..
        })) => match web::GenerateApiKeyResponse::decode(p) {
            Ok(r) => r.key,
            Err(e) => {
                report.fail(
                    name,
                    format!("GenerateAPIKey answered an undecodable message: {e}."),
                    "use a wisp doctor of the deployment's release.",
                );
                return;
            }
        },
        Ok(Ok(GrpcAnswer {
            status: Some(UNAUTHENTICATED),
            ..
        })) => {
            report.fail(
                name,
                "the --session was refused.",
                "log in to the console as a project admin again and pass its token cookie's value.",
            );
            return;
        }
        Ok(Ok(g)) => {
            report.fail(
                name,
                format!("creating a throwaway API key failed: {} {}.", code_name(g.status.unwrap_or(2)), g.message),
                "the session must be a project admin's; the web-api function's log names a store error.",
            );
            return;
        }
        Ok(Err(a)) => {
            report.fail(
                name,
                format!(
                    "GenerateAPIKey: HTTP {} ({}).",
                    a.status.as_u16(),
                    a.snippet()
                ),
                "fix the WebService route first.",
            );
            return;
        }
        Err(e) => {
            report.fail(
                name,
                format!("GenerateAPIKey: {e}."),
                "fix the WebService route first.",
            );
            return;
        }
    };
    let id = key.split('.').next().unwrap_or_default().to_string();
    let authorization = format!("API-KEY {key}");
    let list = api::ListApplicationsRequest::default().encode_to_vec();
    let (list, authorization) = (list.as_slice(), authorization.as_str());
    let use_key = move || async move {
        deployment
            .grpc_web(
                "grpc.service.apiservice.APIService/ListApplications",
                list,
                &[("authorization", authorization)],
            )
            .await
    };
    match use_key().await {
        Ok(Ok(GrpcAnswer {
            status: Some(0), ..
        })) => {}
        other => {
            report.fail(
                name,
                format!(
                    "the new API key {id} was refused before it was disabled: {}.",
                    describe(&other)
                ),
                "the api function's log names the error (its role must read the table).",
            );
            return;
        }
    }
    let disable = web::DisableApiKeyRequest { id: id.clone() }.encode_to_vec();
    match deployment
        .grpc_web(
            "grpc.service.webservice.WebService/DisableAPIKey",
            &disable,
            &[("cookie", cookie.as_str())],
        )
        .await
    {
        Ok(Ok(GrpcAnswer {
            status: Some(0), ..
        })) => {}
        other => {
            report.fail(
                name,
                format!("disabling the throwaway API key {id} failed: {}.", describe(&other)),
                "the web-api function could not record the revocation: its role needs s3:PutObject on <prefix>revocations.json (iam.tf, template.yaml); disable the key again once fixed.",
            );
            return;
        }
    }
    // The other function reads the revocations again at most every REFRESH: wait for the
    // refusal up to three times that.
    let started = std::time::Instant::now();
    let deadline = wisp_store::revocations::REFRESH * 3;
    loop {
        let answer = use_key().await;
        if matches!(
            answer,
            Ok(Ok(GrpcAnswer {
                status: Some(UNAUTHENTICATED),
                ..
            }))
        ) {
            report.ok(
                name,
                format!(
                    "the throwaway API key {id} was refused {} s after it was disabled.",
                    started.elapsed().as_secs()
                ),
            );
            return;
        }
        if started.elapsed() >= deadline {
            report.fail(
                name,
                format!(
                    "the disabled API key {id} still works on the api function after {} s: {}.",
                    started.elapsed().as_secs(),
                    describe(&answer)
                ),
                "revocations are not shared: web-api must write and api read <prefix>revocations.json in the bucket (s3:PutObject and s3:GetObject in iam.tf, template.yaml).",
            );
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn describe(answer: &Result<Result<GrpcAnswer, Answer>, String>) -> String {
    match answer {
        Ok(Ok(g)) => match g.status {
            Some(code) if g.message.is_empty() => code_name(code).to_string(),
            Some(code) => format!("{} ({})", code_name(code), g.message),
            None => "a gRPC answer without a status".into(),
        },
        Ok(Err(a)) => format!("HTTP {} ({})", a.status.as_u16(), a.snippet()),
        Err(e) => e.clone(),
    }
}

/// The first local file index.html names (`src="/..."` or `href="/..."`), not a page.
fn first_asset(html: &str) -> Option<String> {
    for attr in ["src=\"/", "href=\"/"] {
        let mut rest = html;
        while let Some(at) = rest.find(attr) {
            let start = at + attr.len() - 1;
            let tail = &rest[start..];
            let end = tail.find('"')?;
            let path = &tail[..end];
            if path.len() > 1
                && !path.starts_with("//")
                && path.rsplit('/').next().is_some_and(|f| f.contains('.'))
            {
                return Some(path.to_string());
            }
            rest = &rest[start + end..];
        }
    }
    None
}

/// GET of an absolute URL (the bucket's presigned one), resolving its host here.
async fn fetch_absolute(client: &Client, url: &str) -> Result<Answer, String> {
    let target = Target::parse(url)?;
    let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
    let addr = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("{} does not resolve: {e}", target.host))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", target.host))?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = http::Request::get(path)
        .header(http::header::HOST, target.authority())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    client.request(&target, addr, request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_named_by_index_html() {
        let html = r#"<html><head><link rel="icon" href="/favicon.ico"><script src="/assets/index-3f2a.js"></script></head><a href="/login">x</a></html>"#;
        assert_eq!(first_asset(html).as_deref(), Some("/assets/index-3f2a.js"));
        assert_eq!(first_asset(r#"<a href="/login">"#), None);
        assert_eq!(
            first_asset(r#"<link href="/favicon.ico">"#).as_deref(),
            Some("/favicon.ico")
        );
    }

    #[test]
    fn grpc_web_status_from_the_trailer_frame() {
        let trailer = b"grpc-status:16\r\ngrpc-message:no%20credentials\r\n";
        let mut body = vec![0x80];
        body.extend_from_slice(&(trailer.len() as u32).to_be_bytes());
        body.extend_from_slice(trailer);
        let answer = Answer {
            status: http::StatusCode::OK,
            headers: http::HeaderMap::new(),
            body: Bytes::from(body),
        };
        let grpc = parse_grpc_web(&answer);
        assert_eq!(grpc.status, Some(UNAUTHENTICATED));
        assert_eq!(grpc.message, "no credentials");
    }

    #[test]
    fn targets() {
        let t = Target::parse("https://pipecd.example.com").expect("valid");
        assert!(t.https && t.port == 443 && t.authority() == "pipecd.example.com");
        let t = Target::parse("http://127.0.0.1:8080").expect("valid");
        assert!(!t.https && t.authority() == "127.0.0.1:8080");
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("pipecd.example.com").is_err());
    }
}
