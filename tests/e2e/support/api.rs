//! APIService helpers: API keys made with the admin CLI, `APIServiceClient`s over
//! either transport, authenticated the way pipectl is (`authorization: API-KEY <key>`),
//! and the flows that cross from the APIService into the PipedService, on any server
//! (embedded or AWS backends).

use tonic::Status;
use wisp_proto::apiservice as api;
use wisp_proto::apiservice::api_service_client::ApiServiceClient;
use wisp_proto::model::{self, CommandStatus, EventStatus, command};
use wisp_proto::pipedservice as ps;

use super::fixtures::{self, now, string_map};
use super::{Authenticated, Client, Piped, QUICKSTART, Via, Wisp, json_str, ok};

/// The second project of [`Setup`].
pub const OTHER: &str = "other";
/// The repository the piped of [`Setup`] reports.
pub const REMOTE: &str = "https://github.com/pipe-cd/examples.git";
pub const PUBLIC_PEM: &str =
    include_str!("../../../shared/services/tests/testdata/piped-public.pem");

/// The generated APIService client over either transport.
pub type ApiClient = ApiServiceClient<Authenticated>;

/// An API key as `wisp api-key add --json` printed it.
#[derive(Debug, Clone)]
pub struct ApiKey {
    pub id: String,
    /// The full `<id>.<secret>` string pipectl takes with `--api-key`.
    pub key: String,
}

impl ApiKey {
    /// `API-KEY <id>.<secret>`.
    pub fn authorization(&self) -> String {
        format!("API-KEY {}", self.key)
    }
}

impl Wisp {
    /// `wisp api-key add --project <project> --name <name> --role <role> --json`.
    pub fn add_api_key(&self, project: &str, name: &str, role: &str) -> ApiKey {
        let out = self.cli_json(&[
            "api-key",
            "add",
            "--project",
            project,
            "--name",
            name,
            "--role",
            role,
        ]);
        let key = ApiKey {
            id: json_str(&out, "id"),
            key: json_str(&out, "key"),
        };
        assert!(key.key.starts_with(&format!("{}.", key.id)), "{key:?}");
        key
    }

    /// A client that sends `authorization` (or no credentials at all).
    pub async fn api_client(&self, via: Via, authorization: Option<&str>) -> ApiClient {
        ApiServiceClient::new(self.transport(via, authorization).await)
    }

    /// A client authenticated with `key`.
    pub async fn api_key_client(&self, via: Via, key: &ApiKey) -> ApiClient {
        self.api_client(via, Some(&key.authorization())).await
    }
}

/// One unary APIService call under upstream's legacy service name
/// (`/pipe.api.service.apiservice.APIService/<method>`), which the server aliases.
pub async fn legacy_api_call<Req, Resp>(
    transport: Authenticated,
    method: &str,
    request: Req,
) -> Result<Resp, Status>
where
    Req: tonic_prost::prost::Message + Send + Sync + 'static,
    Resp: tonic_prost::prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("transport not ready: {e}")))?;
    let path: http::uri::PathAndQuery = format!("/pipe.api.service.apiservice.APIService/{method}")
        .parse()
        .expect("a valid path");
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.unary(tonic::Request::new(request), path, codec)
        .await
        .map(tonic::Response::into_inner)
}

// ---------------------------------------------------------------------------------------
// A populated server, and the flows across the two services

/// A server with objects in project `quickstart` and keys of every kind.
pub struct Setup {
    pub wisp: Wisp,
    pub rw: ApiKey,
    pub ro: ApiKey,
    pub disabled: ApiKey,
    /// READ_WRITE, of project `other`.
    pub foreign: ApiKey,
    /// Reported repository `examples` (REMOTE at main) and a public key.
    pub piped: Piped,
    pub piped_client: Client,
    /// For the piped updates (it ends disabled).
    pub spare_piped: Piped,
    /// Of `piped`, never changed by the matrix.
    pub app: String,
    /// For the application updates.
    pub spare_app: String,
    /// For DeleteApplication.
    pub doomed_app: String,
    /// A deployment of `app` with one stage that has logs.
    pub deployment: String,
    /// A SYNC_APPLICATION command of `app`.
    pub command: String,
}

/// What `piped` reports when it starts: its repository and sealed-secret public key.
pub async fn report_meta(client: &mut Client) {
    ok(client
        .report_piped_meta(ps::ReportPipedMetaRequest {
            version: "v0.57.1".into(),
            repositories: vec![model::ApplicationGitRepository {
                id: "examples".into(),
                remote: REMOTE.into(),
                branch: "main".into(),
            }],
            secret_encryption: Some(model::piped::SecretEncryption {
                r#type: "KEY_PAIR".into(),
                public_key: PUBLIC_PEM.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await);
}

/// Builds the [`Setup`] on `wisp` (a fresh server, on any backend).
pub async fn setup_on(wisp: Wisp) -> Setup {
    wisp.add_project(OTHER);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let ro = wisp.add_api_key(QUICKSTART, "viewer", "READ_ONLY");
    let disabled = wisp.add_api_key(QUICKSTART, "old", "READ_WRITE");
    wisp.cli_ok(&["api-key", "disable", "--project", QUICKSTART, &disabled.id]);
    let foreign = wisp.add_api_key(OTHER, "theirs", "READ_WRITE");

    let piped = wisp.add_piped(QUICKSTART, "dev");
    let spare_piped = wisp.add_piped(QUICKSTART, "spare");
    let mut piped_client = wisp.piped_client(Via::Grpc, &piped).await;
    report_meta(&mut piped_client).await;
    let app = wisp.add_app(&piped, "app", &[("env", "dev")]);
    let spare_app = wisp.add_app(&piped, "spare", &[]);
    let doomed_app = wisp.add_app(&piped, "doomed", &[]);

    let mut dep = fixtures::deployment(&piped, "dep-1", &app, "app");
    dep.stages = vec![fixtures::stage("s1", "K8S_SYNC", 0, &[])];
    ok(piped_client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(dep),
        })
        .await);
    ok(piped_client
        .report_stage_logs(ps::ReportStageLogsRequest {
            deployment_id: "dep-1".into(),
            stage_id: "s1".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(1, "applying manifests")],
        })
        .await);

    let mut client = wisp.api_key_client(Via::Grpc, &rw).await;
    let command = ok(client
        .sync_application(api::SyncApplicationRequest {
            application_id: app.clone(),
        })
        .await)
    .command_id;

    Setup {
        wisp,
        rw,
        ro,
        disabled,
        foreign,
        piped,
        piped_client,
        spare_piped,
        app,
        spare_app,
        doomed_app,
        deployment: "dep-1".into(),
        command,
    }
}

/// SyncApplication (pipectl) reaches the piped as an unhandled command; the piped's
/// result and the deployment's logs come back to pipectl.
pub async fn sync_application_flow(s: &mut Setup) {
    let mut rw = s.wisp.api_key_client(Via::Grpc, &s.rw).await;
    let unhandled = ok(s
        .piped_client
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await)
    .commands;
    assert_eq!(unhandled.len(), 1);
    let cmd = &unhandled[0];
    assert_eq!(cmd.id, s.command);
    assert_eq!(cmd.r#type, command::Type::SyncApplication as i32);
    assert_eq!(cmd.application_id, s.app);
    assert_eq!(cmd.commander, s.rw.id);

    let before = ok(rw
        .get_command(api::GetCommandRequest {
            command_id: s.command.clone(),
        })
        .await)
    .command
    .expect("command");
    assert_eq!(before.status, CommandStatus::CommandNotHandledYet as i32);

    ok(s.piped_client
        .report_command_handled(ps::ReportCommandHandledRequest {
            command_id: s.command.clone(),
            status: CommandStatus::CommandSucceeded as i32,
            metadata: string_map(&[("DeploymentID", "dep-1")]),
            handled_at: now(),
            output: vec![],
        })
        .await);
    let after = ok(rw
        .get_command(api::GetCommandRequest {
            command_id: s.command.clone(),
        })
        .await)
    .command
    .expect("command");
    assert_eq!(after.status, CommandStatus::CommandSucceeded as i32);
    assert_eq!(after.metadata["DeploymentID"], "dep-1");
    let unhandled = ok(s
        .piped_client
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await);
    assert!(unhandled.commands.is_empty());

    // pipectl then follows the deployment and its logs.
    let dep = ok(rw
        .get_deployment(api::GetDeploymentRequest {
            deployment_id: after.metadata["DeploymentID"].clone(),
        })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(dep.application_id, s.app);
    let logs = ok(rw
        .list_stage_logs(api::ListStageLogsRequest {
            deployment_id: dep.id,
        })
        .await)
    .stage_logs;
    assert_eq!(logs["s1"].blocks[0].log, "applying manifests");
}

/// RegisterEvent (pipectl) reaches the piped through GetLatestEvent / ListEvents, and
/// only in its own project.
pub async fn registered_events_flow(s: &mut Setup) {
    let mut rw = s.wisp.api_key_client(Via::Grpc, &s.rw).await;
    let labels = string_map(&[("app", "helloworld")]);
    let event_id = ok(rw
        .register_event(api::RegisterEventRequest {
            name: "image-update".into(),
            data: "ghcr.io/pipe-cd/helloworld:v0.2.0".into(),
            labels: labels.clone(),
            commit_hash: "0123abc".into(),
            commit_url: "https://github.com/pipe-cd/examples/commit/0123abc".into(),
            ..Default::default()
        })
        .await)
    .event_id;
    let latest = ok(s
        .piped_client
        .get_latest_event(ps::GetLatestEventRequest {
            name: "image-update".into(),
            labels: labels.clone(),
        })
        .await)
    .event
    .expect("event");
    assert_eq!(latest.id, event_id);
    assert_eq!(latest.data, "ghcr.io/pipe-cd/helloworld:v0.2.0");
    assert_eq!(latest.status, EventStatus::EventNotHandled as i32);
    assert_eq!(latest.trigger_commit_hash, "0123abc");
    let events = ok(s
        .piped_client
        .list_events(ps::ListEventsRequest::default())
        .await)
    .events;
    assert_eq!(events.len(), 1);
    // Another project's event of the same name is not this piped's.
    let mut foreign = s.wisp.api_key_client(Via::Grpc, &s.foreign).await;
    ok(foreign
        .register_event(api::RegisterEventRequest {
            name: "image-update".into(),
            data: "theirs".into(),
            labels: labels.clone(),
            ..Default::default()
        })
        .await);
    let latest = ok(s
        .piped_client
        .get_latest_event(ps::GetLatestEventRequest {
            name: "image-update".into(),
            labels,
        })
        .await)
    .event
    .expect("event");
    assert_eq!(latest.id, event_id);
}

/// An APIService client of the server at `addr` (another instance than a [`Wisp`]'s own).
pub async fn api_client_at(
    addr: std::net::SocketAddr,
    via: Via,
    authorization: Option<&str>,
) -> ApiClient {
    ApiServiceClient::new(tonic::service::interceptor::InterceptedService::new(
        super::transport(addr, via).await,
        super::Authorization::new(authorization),
    ))
}
