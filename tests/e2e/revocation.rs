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
use support::aws::{AwsEnv, unique_name};
use support::web::{cookie_value, login_static_at, set_cookie, web_client};
use support::{
    QUICKSTART, Server, Via, Wisp, assert_status, connect, http_post_to, ok, run_cli_with,
};
use wisp_store::revocations::REVOCATIONS_PATH;

use crate::metrics::Scrape;

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

// ---------------------------------------------------------------------------------------
// Writers in several processes, and a list that cannot be written or read (issues 33.5,
// 27.3)
// ---------------------------------------------------------------------------------------

/// Revocations made at once by admin commands (processes of their own: `wisp piped
/// disable`, `wisp api-key disable`) and by console logouts on two servers on the same
/// stores: every one is in the shared list, and each revoked credential or session is
/// refused on both servers (within the bound: a lost entry would leave the other server's
/// cached verification, or the session, working).
async fn concurrent_revocations_are_all_kept(first: &Wisp, second: &Server) {
    const PIPEDS: usize = 8;
    const KEYS: usize = 8;
    const SESSIONS: usize = 30;
    let pipeds: Vec<_> = (0..PIPEDS)
        .map(|i| first.add_piped(QUICKSTART, &format!("racer-{i}")))
        .collect();
    let keys: Vec<_> = (0..KEYS)
        .map(|i| first.add_api_key(QUICKSTART, &format!("racer-{i}"), "READ_ONLY"))
        .collect();
    let reset = first.cli_json(&["project", "reset-password", QUICKSTART]);
    let (user, password) = (
        reset["username"].as_str().expect("username"),
        reset["password"].as_str().expect("password"),
    );
    let servers = [first.addr(), second.addr()];
    let mut tokens = Vec::new();
    for i in 0..SESSIONS {
        let login = login_static_at(servers[i % 2], QUICKSTART, user, password).await;
        tokens.push(cookie_value(set_cookie(&login, "token").expect("a session")).to_string());
    }

    // Every credential and session verified (and cached) on both servers.
    let poll = ListUnhandledCommandsRequest::default;
    let list_apps = api::ListApplicationsRequest::default;
    for addr in servers {
        for p in &pipeds {
            let mut c = connect(addr, Via::Grpc, Some(&p.authorization())).await;
            ok(c.list_unhandled_commands(poll()).await);
        }
        for k in &keys {
            let mut c = api_client_at(addr, Via::Grpc, Some(&k.authorization())).await;
            ok(c.list_applications(list_apps()).await);
        }
        for t in &tokens {
            let mut c = web_client(addr, Via::GrpcWeb, Some(t)).await;
            ok(c.get_me(web::GetMeRequest {}).await);
        }
    }

    // All at once: the admin commands, and the logouts spread over both servers.
    let (more, env) = match first.aws() {
        Some(aws) => (aws.store_args(), aws.env()),
        None => (Vec::new(), Vec::new()),
    };
    let mut commands = tokio::task::JoinSet::new();
    let runs = pipeds
        .iter()
        .map(|p| vec!["piped", "disable", "--project", QUICKSTART, p.id.as_str()])
        .chain(
            keys.iter()
                .map(|k| vec!["api-key", "disable", "--project", QUICKSTART, k.id.as_str()]),
        )
        .map(|args| args.into_iter().map(str::to_string).collect::<Vec<_>>());
    for args in runs {
        let (dir, more, env) = (first.data_dir().to_path_buf(), more.clone(), env.clone());
        commands.spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            (args.join(" "), run_cli_with(&dir, &args, &more, &env))
        });
    }
    let mut logouts = tokio::task::JoinSet::new();
    for (i, token) in tokens.iter().enumerate() {
        let (addr, cookie) = (servers[i % 2], format!("token={token}"));
        logouts.spawn(async move {
            http_post_to(
                addr,
                "/auth/logout",
                &[("cookie", cookie.as_str())],
                Vec::new(),
            )
            .await
        });
    }
    for (command, out) in commands.join_all().await {
        assert_eq!(out.code, 0, "wisp {command}: {out:?}");
    }
    for resp in logouts.join_all().await {
        assert!(resp.status.is_redirection(), "logout: {resp:?}");
    }

    // Every entry is in the shared list.
    let doc: serde_json::Value = serde_json::from_str(
        &first
            .filestore_object(REVOCATIONS_PATH)
            .expect("the revocations object"),
    )
    .expect("JSON");
    let entries = doc["entries"].as_object().expect("entries");
    let missing: Vec<String> = pipeds
        .iter()
        .map(|p| format!("piped/{QUICKSTART}/{}", p.id))
        .chain(
            keys.iter()
                .map(|k| format!("api-key/{QUICKSTART}/{}", k.id)),
        )
        .filter(|k| !entries.contains_key(k))
        .collect();
    let sessions = entries.keys().filter(|k| k.starts_with("session/")).count();
    assert!(
        missing.is_empty() && sessions == SESSIONS,
        "lost revocations: {missing:?}; {sessions} of {SESSIONS} logouts recorded"
    );

    // Each revoked credential and session is refused on both servers.
    for addr in servers {
        for p in &pipeds {
            let c = connect(addr, Via::Grpc, Some(&p.authorization())).await;
            until_refused("disabled piped", || {
                let mut c = c.clone();
                async move { c.list_unhandled_commands(poll()).await }
            })
            .await;
        }
        for k in &keys {
            let c = api_client_at(addr, Via::Grpc, Some(&k.authorization())).await;
            until_refused("disabled API key", || {
                let mut c = c.clone();
                async move { c.list_applications(list_apps()).await }
            })
            .await;
        }
        for t in &tokens {
            let c = web_client(addr, Via::GrpcWeb, Some(t)).await;
            until_refused("logged-out session", || {
                let mut c = c.clone();
                async move { c.get_me(web::GetMeRequest {}).await }
            })
            .await;
        }
    }
}

#[tokio::test]
async fn concurrent_revocations_from_commands_and_two_servers_are_all_kept() {
    let wisp = Wisp::start();
    let second = Server::start(wisp.data_dir());
    concurrent_revocations_are_all_kept(&wisp, &second).await;
}

#[tokio::test]
async fn concurrent_revocations_are_all_kept_on_aws() {
    let test = "revocation::concurrent_revocations_are_all_kept_on_aws";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    // Console sessions are signed with the encryption key: both servers share one.
    let key_secret = unique_name("wisp-key");
    let first = Wisp::start_aws_on(&env, None, |backend| {
        backend.put_secret(&key_secret, &"k".repeat(48));
        backend.key_secret = Some(key_secret.clone());
    });
    let backend = first.aws().expect("AWS backend").clone();
    let second_dir = tempfile::tempdir().expect("data dir");
    let second = Server::start_with(second_dir.path(), &backend.serve_args(), &backend.env());
    concurrent_revocations_are_all_kept(&first, &second).await;
}

/// The filestore refuses to write the revocations (a directory stands where the object
/// goes): each action that revokes fails visibly through each entry point, saying that
/// the change stands and to retry, and is counted; once the store writes again, the same
/// actions succeed.
#[tokio::test]
async fn a_revocation_that_cannot_be_recorded_fails_visibly() {
    let wisp = Wisp::start();
    let by_console = wisp.add_piped(QUICKSTART, "by-console");
    let rotated = wisp.add_piped(QUICKSTART, "rotated");
    wisp.rotate_key(&rotated);
    let by_pipectl = wisp.add_piped(QUICKSTART, "by-pipectl");
    let by_cli = wisp.add_piped(QUICKSTART, "by-cli");
    let key = wisp.add_api_key(QUICKSTART, "disabled", "READ_ONLY");
    let cli_key = wisp.add_api_key(QUICKSTART, "disabled-by-cli", "READ_ONLY");
    let admin_key = wisp.add_api_key(QUICKSTART, "admin", "READ_WRITE");
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let mut pipectl = wisp.api_key_client(Via::Grpc, &admin_key).await;

    let objects = support::objects::Objects::open(wisp.data_dir());
    objects.block_writes(REVOCATIONS_PATH);

    let said = "could not be shared with other instances";
    let disable_piped = |id: &str| web::DisablePipedRequest {
        piped_id: id.to_string(),
    };
    let delete_old = web::DeleteOldPipedKeysRequest {
        piped_id: rotated.id.clone(),
    };
    let disable_key = web::DisableApiKeyRequest { id: key.id.clone() };
    let api_disable = api::DisablePipedRequest {
        piped_id: by_pipectl.id.clone(),
    };
    let cli_piped = ["piped", "disable", "--project", QUICKSTART, &by_cli.id];
    let cli_api_key = ["api-key", "disable", "--project", QUICKSTART, &cli_key.id];
    let cookie = format!("token={token}");
    let logout = || async {
        let headers = [("cookie", cookie.as_str())];
        wisp.http_post("/auth/logout", &headers, Vec::new()).await
    };

    assert_status(
        console.disable_piped(disable_piped(&by_console.id)).await,
        Code::Unavailable,
        said,
    );
    assert_status(
        console.delete_old_piped_keys(delete_old.clone()).await,
        Code::Unavailable,
        said,
    );
    assert_status(
        console.disable_api_key(disable_key.clone()).await,
        Code::Unavailable,
        said,
    );
    assert_status(
        pipectl.disable_piped(api_disable.clone()).await,
        Code::Unavailable,
        said,
    );
    for args in [&cli_piped, &cli_api_key] {
        let out = wisp.cli(args);
        assert!(
            out.code == 1 && out.stderr.contains(said),
            "wisp {args:?}: {out:?}"
        );
    }
    let resp = logout().await;
    let body = String::from_utf8_lossy(&resp.body);
    assert!(
        resp.status == http::StatusCode::SERVICE_UNAVAILABLE && body.contains(said),
        "logout: {resp:?} {body}"
    );
    // Ended in this process all the same; the cookie is kept, so logging out can retry.
    assert!(set_cookie(&resp, "token").is_none(), "{resp:?}");
    assert_status(
        console.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "session ended",
    );
    let scrape = Scrape::from(&wisp).await;
    assert_eq!(
        scrape.value("wisp_revocation_failures_total", &[("op", "record")]),
        5.0,
        "four gRPC actions and one logout counted"
    );

    // The store writes again: each action, retried, succeeds (the console with a new
    // session, the old one having ended here).
    objects.unblock_writes();
    let fresh = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&fresh)).await;
    ok(console.disable_piped(disable_piped(&by_console.id)).await);
    ok(console.delete_old_piped_keys(delete_old).await);
    ok(console.disable_api_key(disable_key).await);
    ok(pipectl.disable_piped(api_disable).await);
    wisp.cli_ok(&cli_piped);
    wisp.cli_ok(&cli_api_key);
    assert!(logout().await.status.is_redirection());
    let doc = wisp
        .filestore_object(REVOCATIONS_PATH)
        .expect("revocations");
    for id in [&by_console.id, &rotated.id, &by_pipectl.id, &by_cli.id] {
        assert!(doc.contains(&format!("piped/{QUICKSTART}/{id}")), "{id}");
    }
    for id in [&key.id, &cli_key.id] {
        assert!(doc.contains(&format!("api-key/{QUICKSTART}/{id}")), "{id}");
    }
    assert!(doc.contains("\"session/"), "the logout: {doc}");
}

/// A corrupt list fails closed on a server that has no good copy of it: pipeds are
/// checked against the datastore on every call (no cached verification is served),
/// console sessions are refused with UNAVAILABLE, a revocation is not written over it
/// (that would erase what it holds) but fails; all is counted. Repaired, all works again.
#[tokio::test]
async fn a_corrupt_list_fails_closed() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "checked-every-time");
    let other = wisp.add_piped(QUICKSTART, "to-disable");
    let token = wisp.admin_session().await;
    let objects = support::objects::Objects::open(wisp.data_dir());
    objects.write(REVOCATIONS_PATH, b"{\"entries\": {\"piped/");
    let second = Server::start(wisp.data_dir());

    let mut p = connect(second.addr(), Via::Grpc, Some(&piped.authorization())).await;
    for _ in 0..3 {
        ok(
            p.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await,
        );
    }
    let mut console = web_client(second.addr(), Via::GrpcWeb, Some(&token)).await;
    assert_status(
        console.get_me(web::GetMeRequest {}).await,
        Code::Unavailable,
        "cannot be checked",
    );
    let out = wisp.cli(&["piped", "disable", "--project", QUICKSTART, &other.id]);
    assert!(
        out.code == 1 && out.stderr.contains("could not be shared"),
        "{out:?}"
    );
    assert!(
        objects
            .read(REVOCATIONS_PATH)
            .expect("the list")
            .starts_with(b"{\"entries\": {\"piped/"),
        "the corrupt list is left for the operator"
    );
    let scrape = Scrape::at(&second).await;
    let verified = |outcome| {
        scrape.value(
            "wisp_auth_verifications_total",
            &[("credential", "piped"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        (verified("cached"), verified("verified")),
        (0.0, 3.0),
        "each call checked against the datastore"
    );
    assert!(scrape.value("wisp_revocation_failures_total", &[("op", "read")]) >= 1.0);

    // Repaired (here: removed), sessions work again within the bound.
    objects.remove(REVOCATIONS_PATH);
    let started = Instant::now();
    while let Err(status) = console.get_me(web::GetMeRequest {}).await {
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(started.elapsed() < BOUND, "still refused: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
