//! Revocation: a disabled piped, a disabled API key, a deleted old key, a logged-out
//! session, a changed static admin password and a disabled static admin stop working at
//! once in the process that made the change, and within the documented bound
//! (`wisp_store::revocations::REFRESH`, 10 s; the guarantee is 30 s) on another instance
//! on the same stores.

use crate::support;

use std::time::{Duration, Instant};

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::pipedservice::*;
use wisp_proto::webservice as web;

use support::api::api_client_at;
use support::web::{cookie_value, set_cookie, web_client};
use support::{QUICKSTART, Server, Via, Wisp, assert_status, connect, ok};

/// The documented bound on revocation across instances.
const BOUND: Duration = Duration::from_secs(30);

/// Calls `call` until it fails with UNAUTHENTICATED; how long that took (at most
/// [`BOUND`], else the test fails).
async fn until_refused<F, Fut, T>(what: &str, mut call: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let started = Instant::now();
    loop {
        match call().await {
            Err(status) if status.code() == Code::Unauthenticated => {
                let took = started.elapsed();
                println!("{what}: refused after {} ms", took.as_millis());
                return took;
            }
            Err(status) => panic!("{what}: unexpected {status:?}"),
            Ok(_) => {}
        }
        assert!(
            started.elapsed() < BOUND,
            "{what}: still accepted after {} s",
            BOUND.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Changes made through the console of the same process apply to the very next call.
#[tokio::test]
async fn revocations_apply_at_once_in_the_same_process() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "disabled-here");
    let rotated = wisp.add_piped(QUICKSTART, "rotated-here");
    let new_key = wisp.rotate_key(&rotated);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;

    // Each credential verified (and cached) once.
    let mut p = wisp.piped_client(Via::Grpc, &piped).await;
    let mut old = wisp.piped_client(Via::Grpc, &rotated).await;
    let mut new = wisp.piped_client(Via::Grpc, &new_key).await;
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    let poll = ListUnhandledCommandsRequest::default;
    ok(p.list_unhandled_commands(poll()).await);
    ok(old.list_unhandled_commands(poll()).await);
    ok(new.list_unhandled_commands(poll()).await);
    ok(pipectl
        .list_applications(api::ListApplicationsRequest::default())
        .await);

    ok(console
        .disable_piped(web::DisablePipedRequest {
            piped_id: piped.id.clone(),
        })
        .await);
    assert_status(
        p.list_unhandled_commands(poll()).await,
        Code::Unauthenticated,
        "",
    );

    ok(console
        .delete_old_piped_keys(web::DeleteOldPipedKeysRequest {
            piped_id: rotated.id.clone(),
        })
        .await);
    assert_status(
        old.list_unhandled_commands(poll()).await,
        Code::Unauthenticated,
        "",
    );
    ok(new.list_unhandled_commands(poll()).await);

    ok(console
        .disable_api_key(web::DisableApiKeyRequest { id: rw.id.clone() })
        .await);
    assert_status(
        pipectl
            .list_applications(api::ListApplicationsRequest::default())
            .await,
        Code::Unauthenticated,
        "",
    );

    // Logout ends the session on the server: the token no longer works.
    let cookie = format!("token={token}");
    let resp = wisp
        .http_post("/auth/logout", &[("cookie", cookie.as_str())], Vec::new())
        .await;
    assert!(resp.status.is_redirection(), "{resp:?}");
    assert_status(
        console.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "session ended",
    );
}

/// A second `wisp serve` on the same stores: what the first (or an admin command)
/// revokes stops working on the second within the bound. Static admin sessions end at
/// once everywhere (the project is read on every call).
#[tokio::test]
async fn revocations_reach_another_instance_within_the_bound() {
    let wisp = Wisp::start();
    let second = Server::start(wisp.data_dir());
    let piped = wisp.add_piped(QUICKSTART, "disabled-elsewhere");
    let rotated = wisp.add_piped(QUICKSTART, "rotated-elsewhere");
    let new_key = wisp.rotate_key(&rotated);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let token = wisp.admin_session().await;
    let mut on_second = connect(second.addr(), Via::Grpc, Some(&piped.authorization())).await;
    let mut old_key = connect(second.addr(), Via::Grpc, Some(&rotated.authorization())).await;
    let mut new_key_client =
        connect(second.addr(), Via::Grpc, Some(&new_key.authorization())).await;
    let mut pipectl = api_client_at(second.addr(), Via::Grpc, Some(&rw.authorization())).await;
    let mut console = web_client(second.addr(), Via::GrpcWeb, Some(&token)).await;
    let poll = ListUnhandledCommandsRequest::default;
    ok(on_second.list_unhandled_commands(poll()).await);
    ok(old_key.list_unhandled_commands(poll()).await);
    ok(new_key_client.list_unhandled_commands(poll()).await);
    ok(pipectl
        .list_applications(api::ListApplicationsRequest::default())
        .await);
    ok(console.get_me(web::GetMeRequest {}).await);

    // Revoked by admin commands (processes of their own).
    wisp.cli_ok(&["piped", "disable", "--project", QUICKSTART, &piped.id]);
    wisp.cli_ok(&["api-key", "disable", "--project", QUICKSTART, &rw.id]);
    wisp.cli_ok(&[
        "piped",
        "delete-old-keys",
        "--project",
        QUICKSTART,
        &rotated.id,
    ]);
    let piped_took = until_refused("disabled piped", || {
        let mut c = on_second.clone();
        async move { c.list_unhandled_commands(poll()).await }
    })
    .await;
    let key_took = until_refused("disabled API key", || {
        let mut c = pipectl.clone();
        async move {
            c.list_applications(api::ListApplicationsRequest::default())
                .await
        }
    })
    .await;
    let old_key_took = until_refused("deleted old piped key", || {
        let mut c = old_key.clone();
        async move { c.list_unhandled_commands(poll()).await }
    })
    .await;
    ok(new_key_client.list_unhandled_commands(poll()).await);
    println!(
        "revocation across instances: piped {} ms, API key {} ms, old key {} ms",
        piped_took.as_millis(),
        key_took.as_millis(),
        old_key_took.as_millis()
    );

    // Logged out on the first: refused on the second within the bound.
    let cookie = format!("token={token}");
    wisp.http_post("/auth/logout", &[("cookie", cookie.as_str())], Vec::new())
        .await;
    until_refused("logged-out session", || {
        let mut c = console.clone();
        async move { c.get_me(web::GetMeRequest {}).await }
    })
    .await;

    // A new password ends the sessions opened with the old one, at once, everywhere;
    // a disabled static admin ends them too.
    let fresh = wisp.admin_session().await;
    let mut fresh_console = web_client(second.addr(), Via::GrpcWeb, Some(&fresh)).await;
    ok(fresh_console.get_me(web::GetMeRequest {}).await);
    let reset = wisp.cli_json(&["project", "reset-password", QUICKSTART]);
    assert_status(
        fresh_console.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "session ended",
    );
    let login = wisp
        .login_static(
            QUICKSTART,
            "hello-pipecd",
            reset["password"].as_str().expect("password"),
        )
        .await;
    let newest = cookie_value(set_cookie(&login, "token").expect("a session")).to_string();
    let mut newest_console = web_client(second.addr(), Via::GrpcWeb, Some(&newest)).await;
    ok(newest_console.get_me(web::GetMeRequest {}).await);
    wisp.cli_ok(&[
        "project",
        "update",
        QUICKSTART,
        "--static-admin-disabled",
        "true",
    ]);
    assert_status(
        newest_console.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "session ended",
    );
}
