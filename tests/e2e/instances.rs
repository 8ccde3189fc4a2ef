//! Any number of `wisp serve` instances on the same stores agree: two instances on one
//! DynamoDB Local table and one S3 (moto) bucket, each with its own in-process cache (as
//! Lambda instances without Redis have), and the same with Redis. A piped works on the
//! first; the console and pipectl read through the second, and every read there reflects
//! every write made on the first.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::model::{CommandStatus, DeploymentStatus};
use wisp_proto::pipedservice::*;
use wisp_proto::webservice as web;

use support::api::api_client_at;
use support::aws::{AwsEnv, RedisServer, unique_name};
use support::fixtures::{self, now};
use support::web::{cookie_value, login_static_at, set_cookie, web_client};
use support::{QUICKSTART, Server, Via, Wisp, assert_status, connect, ok};

#[tokio::test]
async fn two_instances_agree_without_redis() {
    let test = "instances::two_instances_agree_without_redis";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    two_instances_agree(&env, None).await;
}

#[tokio::test]
async fn two_instances_agree_with_redis() {
    let test = "instances::two_instances_agree_with_redis";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    two_instances_agree(&env, Some(&redis.url())).await;
}

async fn two_instances_agree(env: &AwsEnv, redis: Option<&str>) {
    // Console sessions are signed with the encryption key: both instances share one.
    let key_secret = unique_name("wisp-key");
    let first = Wisp::start_aws_on(env, redis, |backend| {
        backend.put_secret(&key_secret, &"k".repeat(48));
        backend.key_secret = Some(key_secret.clone());
    });
    let backend = first.aws().expect("AWS backend").clone();
    let second_dir = tempfile::tempdir().expect("data dir");
    let second = Server::start_with(second_dir.path(), &backend.serve_args(), &backend.env());
    let second_addr: SocketAddr = second.addr();

    let piped = first.add_piped(QUICKSTART, "first");
    let other = first.add_piped(QUICKSTART, "other");
    let app = first.add_app(&piped, "demo", &[]);
    let mut p = first.piped_client(Via::Grpc, &piped).await;
    let reset = first.cli_json(&["project", "reset-password", QUICKSTART]);
    let login = first
        .login_static(
            QUICKSTART,
            reset["username"].as_str().expect("username"),
            reset["password"].as_str().expect("password"),
        )
        .await;
    let token = cookie_value(set_cookie(&login, "token").expect("a session")).to_string();
    let console = web_client(second_addr, Via::GrpcWeb, Some(&token)).await;
    let rw = first.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let mut pipectl = api_client_at(second_addr, Via::Grpc, Some(&rw.authorization())).await;

    // A deployment created on the first is listed on the second.
    ok(p.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(&piped, "dep-1", &app, "demo")),
    })
    .await);
    let got = ok(console
        .clone()
        .get_deployment(web::GetDeploymentRequest {
            deployment_id: "dep-1".into(),
        })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(got.status, DeploymentStatus::DeploymentPending as i32);

    // Stage log: read on the second after one block, then after three more and the end.
    let log = |console: support::web::WebClient| async move {
        let mut console = console;
        ok(console
            .get_stage_log(web::GetStageLogRequest {
                deployment_id: "dep-1".into(),
                stage_id: "s1".into(),
                retried_count: 0,
                offset_index: 0,
            })
            .await)
    };
    ok(p.report_stage_logs(ReportStageLogsRequest {
        deployment_id: "dep-1".into(),
        stage_id: "s1".into(),
        retried_count: 0,
        blocks: vec![fixtures::log_block(1, "starting")],
    })
    .await);
    let early = log(console.clone()).await;
    assert_eq!((early.blocks.len(), early.completed), (1, false));
    ok(
        p.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: "dep-1".into(),
            stage_id: "s1".into(),
            retried_count: 0,
            blocks: (1..=4)
                .map(|i| fixtures::log_block(i, &format!("line {i}")))
                .collect(),
            completed: true,
        })
        .await,
    );
    let late = log(console.clone()).await;
    assert_eq!(
        (late.blocks.len(), late.completed),
        (4, true),
        "the second instance serves the log the first stored"
    );

    // Live state: written through both instances in turn; the last write wins everywhere.
    let mut p2 = connect(second_addr, Via::Grpc, Some(&piped.authorization())).await;
    let state = |name: &str| {
        fixtures::live_state_snapshot(&piped, &app, vec![fixtures::k8s_resource("r", name)])
    };
    let live = |console: support::web::WebClient| {
        let app = app.clone();
        async move {
            let mut console = console;
            ok(console
                .get_application_live_state(web::GetApplicationLiveStateRequest {
                    application_id: app,
                })
                .await)
            .snapshot
            .expect("snapshot")
            .kubernetes
            .expect("kubernetes")
            .resources[0]
                .name
                .clone()
        }
    };
    for (on_second, name) in [(false, "a"), (true, "b"), (false, "a")] {
        let client = if on_second { &mut p2 } else { &mut p };
        ok(client
            .report_application_live_state(ReportApplicationLiveStateRequest {
                snapshot: Some(state(name)),
            })
            .await);
        assert_eq!(live(console.clone()).await, name, "after writing {name}");
    }

    // pipectl on the second → the piped on the first → pipectl on the second. The piped
    // has been polling the first at its cadence (every 5 s upstream; every second here)
    // for longer than an answer takes to settle, so that with Redis the first answers
    // from memory (wisp_store::polls): the command must still reach it at the next poll.
    let settled = std::time::Instant::now() + wisp_store::polls::SETTLE + Duration::from_secs(2);
    while std::time::Instant::now() < settled {
        let before = ok(p
            .list_unhandled_commands(ListUnhandledCommandsRequest::default())
            .await)
        .commands;
        assert!(before.is_empty(), "{before:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let command_id = ok(pipectl
        .sync_application(api::SyncApplicationRequest {
            application_id: app.clone(),
        })
        .await)
    .command_id;
    let unhandled = ok(p
        .list_unhandled_commands(ListUnhandledCommandsRequest::default())
        .await)
    .commands;
    assert!(
        unhandled.iter().any(|c| c.id == command_id),
        "{unhandled:?}"
    );
    ok(p.report_command_handled(ReportCommandHandledRequest {
        command_id: command_id.clone(),
        status: CommandStatus::CommandSucceeded as i32,
        handled_at: now(),
        ..Default::default()
    })
    .await);
    let cmd = ok(pipectl
        .get_command(api::GetCommandRequest { command_id })
        .await)
    .command
    .expect("command");
    assert_eq!(cmd.status, CommandStatus::CommandSucceeded as i32);

    // An application moved (on the second) to another piped is no longer the first
    // piped's, on the first instance, at once.
    ok(console
        .clone()
        .update_application(web::UpdateApplicationRequest {
            application_id: app.clone(),
            name: "demo".into(),
            piped_id: other.id.clone(),
            kind: wisp_proto::model::ApplicationKind::Kubernetes as i32,
            config_filename: "app.pipecd.yaml".into(),
            ..Default::default()
        })
        .await);
    assert_status(
        p.create_deployment(CreateDeploymentRequest {
            deployment: Some(fixtures::deployment(&piped, "dep-2", &app, "demo")),
        })
        .await,
        Code::PermissionDenied,
        "",
    );
    assert_status(
        p.report_application_live_state(ReportApplicationLiveStateRequest {
            snapshot: Some(state("c")),
        })
        .await,
        Code::PermissionDenied,
        "",
    );
    drop(second);
}

/// Failed static-admin logins are counted in the cache: with Redis every instance sees
/// one count, so guesses spread over instances are cut off together.
#[tokio::test]
async fn login_throttling_is_shared_through_redis() {
    let test = "instances::login_throttling_is_shared_through_redis";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (first, second, _second_dir, user, password) =
        two_instances_for_logins(&env, Some(&redis.url()));
    for (i, addr) in [first.addr(), second.addr()]
        .iter()
        .cycle()
        .take(10)
        .enumerate()
    {
        let resp = login_static_at(*addr, QUICKSTART, &user, &format!("guess-{i}")).await;
        assert!(set_cookie(&resp, "token").is_none());
    }
    for addr in [first.addr(), second.addr()] {
        let resp = login_static_at(addr, QUICKSTART, &user, &password).await;
        let error = set_cookie(&resp, "error").expect("refused");
        assert!(error.contains("Too%20many%20failed%20logins"), "{error}");
    }
}

/// Without Redis each instance (each Lambda instance) counts the failures it saw: five
/// guesses on each of two instances stay under either's bound. The README says so.
#[tokio::test]
async fn login_throttling_counts_per_instance_without_redis() {
    let test = "instances::login_throttling_counts_per_instance_without_redis";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    let (first, second, _second_dir, user, password) = two_instances_for_logins(&env, None);
    for (i, addr) in [first.addr(), second.addr()]
        .iter()
        .cycle()
        .take(10)
        .enumerate()
    {
        login_static_at(*addr, QUICKSTART, &user, &format!("guess-{i}")).await;
    }
    let resp = login_static_at(second.addr(), QUICKSTART, &user, &password).await;
    assert!(set_cookie(&resp, "token").is_some(), "{resp:?}");
}

/// A `wisp serve` on AWS stand-ins and a second instance on the same stores (with its
/// data dir, kept while it runs), and the quickstart admin's user name and a fresh
/// password.
pub(crate) fn two_instances_for_logins(
    env: &AwsEnv,
    redis: Option<&str>,
) -> (Wisp, Server, tempfile::TempDir, String, String) {
    let first = Wisp::start_aws_on(env, redis, |_| {});
    let backend = first.aws().expect("AWS backend").clone();
    let second_dir = tempfile::tempdir().expect("data dir");
    let second = Server::start_with(second_dir.path(), &backend.serve_args(), &backend.env());
    let reset = first.cli_json(&["project", "reset-password", QUICKSTART]);
    (
        first,
        second,
        second_dir,
        reset["username"].as_str().expect("username").to_string(),
        reset["password"].as_str().expect("password").to_string(),
    )
}
