//! `web-bench`: median and p99 latency of the console's two heaviest reads —
//! ListDeployments (a page of 50 out of 1,000 deployments) and GetApplicationLiveState
//! (500 resources) — over gRPC-web against the real WebService, served by `wisp serve`'s
//! server builder (its layers, console and bounds), on the embedded stores and, with
//! `--moto URL`, on DynamoDB + S3 on moto_server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use hdrhistogram::Histogram;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Routes;
use wisp_app::server::{Server, ServerOptions};
use wisp_app::{App, ConsoleOptions};
use wisp_auth::{SessionSigner, WebCaller};
use wisp_proto::model;
use wisp_proto::webservice as web;
use wisp_proto::webservice::web_service_client::WebServiceClient;
use wisp_store::stores::Stores;

const PROJECT: &str = "bench";
const KEY: &[u8] = b"web-bench-key-web-bench-key-web-bench-key";

#[derive(Debug, Parser)]
#[command(name = "web-bench")]
struct Args {
    /// Deployments in the project.
    #[arg(long, default_value_t = 1000)]
    deployments: usize,
    /// Resources in the application's live state.
    #[arg(long, default_value_t = 500)]
    resources: usize,
    /// Measured calls of each RPC.
    #[arg(long, default_value_t = 300)]
    calls: u64,
    /// Also run on DynamoDB + S3 at this moto_server endpoint (e.g. http://127.0.0.1:5000).
    #[arg(long)]
    moto: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "{:<10} {:<26} {:>8} {:>9} {:>9}",
        "store", "rpc", "calls", "p50 ms", "p99 ms"
    );
    let dir = tempfile::tempdir()?;
    let embedded = wisp_config::Config::default_embedded(dir.path());
    run("embedded", open(embedded, dir.path()).await?, &args).await?;
    if let Some(moto) = &args.moto {
        let config = moto_config(moto).await?;
        run("moto", open(config, dir.path()).await?, &args).await?;
    }
    Ok(())
}

/// The stores and services as `wisp serve` opens and builds them.
async fn open(config: wisp_config::Config, dir: &std::path::Path) -> anyhow::Result<App> {
    let stores = wisp_app::stores::open(&config, dir)
        .await
        .with_context(|| format!("open the stores of {}", config.source))?;
    let key = wisp_config::EncryptionKey::from_bytes(KEY.to_vec())?;
    Ok(App::from_parts(config, false, stores, Some(key)))
}

/// A table and a bucket of their own on moto_server, created.
async fn moto_config(endpoint: &str) -> anyhow::Result<wisp_config::Config> {
    let suffix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let yaml = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: DYNAMODB\n    config:\n      table: web-bench-{suffix}\n      region: us-east-1\n      endpoint: {endpoint}\n  filestore:\n    type: S3\n    config:\n      bucket: web-bench-{suffix}\n      region: us-east-1\n      endpoint: {endpoint}\n"
    );
    let config = wisp_config::Config::from_yaml_str(&yaml, "web-bench")?;
    wisp_app::stores::init_aws(&config)
        .await
        .context("create the table and bucket on moto")?;
    Ok(config)
}

fn git_path() -> model::ApplicationGitPath {
    model::ApplicationGitPath {
        repo: Some(model::ApplicationGitRepository {
            id: "examples".into(),
            ..Default::default()
        }),
        path: "apps/app".into(),
        config_filename: "app.pipecd.yaml".into(),
        ..Default::default()
    }
}

async fn seed(stores: &Stores, args: &Args) -> anyhow::Result<String> {
    stores
        .projects
        .create(model::Project {
            id: PROJECT.into(),
            static_admin: Some(model::ProjectStaticUser {
                username: "admin".into(),
                password_hash: "unused".into(),
            }),
            ..Default::default()
        })
        .await?;
    let app = stores
        .applications
        .create(model::Application {
            id: "app-1".into(),
            name: "app".into(),
            piped_id: "piped-1".into(),
            project_id: PROJECT.into(),
            git_path: Some(git_path()),
            ..Default::default()
        })
        .await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    for i in 0..args.deployments {
        stores
            .deployments
            .create(model::Deployment {
                id: format!("dep-{i:05}"),
                application_id: app.id.clone(),
                application_name: app.name.clone(),
                piped_id: "piped-1".into(),
                project_id: PROJECT.into(),
                status: model::DeploymentStatus::DeploymentSuccess as i32,
                git_path: Some(git_path()),
                trigger: Some(model::DeploymentTrigger {
                    commit: Some(model::Commit {
                        hash: format!("{i:016x}"),
                        message: "Bump the image".into(),
                        author: "bench".into(),
                        branch: "main".into(),
                        created_at: now,
                        ..Default::default()
                    }),
                    commander: "bench".into(),
                    timestamp: now,
                    ..Default::default()
                }),
                created_at: now,
                completed_at: now,
                summary: format!("deployment {i} of the benchmark"),
                stages: (0..4)
                    .map(|s| model::PipelineStage {
                        id: format!("stage-{s}"),
                        name: "K8S_SYNC".into(),
                        index: s,
                        visible: true,
                        created_at: now,
                        updated_at: now,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .await?;
    }
    let resources = (0..args.resources)
        .map(|i| model::KubernetesResourceState {
            id: format!("res-{i}"),
            name: format!("pod-{i}"),
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            health_status: 1,
            health_description: "running".into(),
            ..Default::default()
        })
        .collect();
    stores
        .live_states
        .put(&model::ApplicationLiveStateSnapshot {
            application_id: app.id.clone(),
            piped_id: "piped-1".into(),
            project_id: PROJECT.into(),
            kubernetes: Some(model::KubernetesApplicationLiveState { resources }),
            ..Default::default()
        })
        .await?;
    Ok(app.id)
}

/// The WebService and the console served by the server builder `wisp serve` uses (its
/// layers, timeouts and bounds), on 127.0.0.1:0 until the process ends.
async fn serve(app: &App) -> anyhow::Result<SocketAddr> {
    let web_api = app.web_api();
    let console = app.console(web_api.clone(), ConsoleOptions::default())?;
    let web = app.web_grpc(web_api)?;
    let server = Server::bind(
        "127.0.0.1:0".parse()?,
        ServerOptions {
            // Callers back to back measure the server at saturation, far past the call rate
            // a real piped or console user makes: the rates are raised (still checked).
            max_call_rate: 1_000_000,
            max_project_call_rate: 1_000_000,
            ..ServerOptions::default()
        },
    )
    .await?;
    let addr = server.local_addr();
    tokio::spawn(server.run_until(
        Routes::new(web.into_server()),
        Arc::new(console),
        std::future::pending(),
    ));
    Ok(addr)
}

async fn run(store: &str, app: App, args: &Args) -> anyhow::Result<()> {
    let app_id = seed(&app.stores, args).await?;
    let addr = serve(&app).await?;
    let token = SessionSigner::new(KEY).sign(&WebCaller {
        subject: "bench".into(),
        avatar_url: String::new(),
        project_id: PROJECT.into(),
        roles: vec!["Admin".into()],
        ..Default::default()
    })?;
    let cookie: AsciiMetadataValue = format!("token={token}").parse()?;
    let http1 = HyperClient::builder(TokioExecutor::new()).build_http();
    let svc = tower::ServiceBuilder::new()
        .layer(tonic_web::GrpcWebClientLayer::new())
        .service(http1);
    let origin: tonic::codegen::http::Uri = format!("http://{addr}").parse()?;
    let svc = tonic::service::interceptor::InterceptedService::new(
        svc,
        move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("cookie", cookie.clone());
            Ok(req)
        },
    );
    let mut client =
        WebServiceClient::with_origin(svc, origin).max_decoding_message_size(64 * 1024 * 1024);

    let mut list = Histogram::<u64>::new(3)?;
    let mut live = Histogram::<u64>::new(3)?;
    for i in 0..args.calls + 10 {
        let started = Instant::now();
        let page = client
            .list_deployments(web::ListDeploymentsRequest {
                options: Some(Default::default()),
                page_size: 50,
                ..Default::default()
            })
            .await?
            .into_inner();
        anyhow::ensure!(
            page.deployments.len() == 50.min(args.deployments),
            "short page"
        );
        if i >= 10 {
            list.record(micros(started.elapsed()))?;
        }
        let started = Instant::now();
        let state = client
            .get_application_live_state(web::GetApplicationLiveStateRequest {
                application_id: app_id.clone(),
            })
            .await?
            .into_inner();
        anyhow::ensure!(state.snapshot.is_some(), "no live state");
        if i >= 10 {
            live.record(micros(started.elapsed()))?;
        }
    }
    for (rpc, h) in [
        ("ListDeployments (50)", &list),
        ("GetApplicationLiveState", &live),
    ] {
        println!(
            "{store:<10} {rpc:<26} {:>8} {:>9.2} {:>9.2}",
            h.len(),
            h.value_at_quantile(0.5) as f64 / 1000.0,
            h.value_at_quantile(0.99) as f64 / 1000.0
        );
    }
    Ok(())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
