//! The serverless deployment end to end, on one machine: an upstream-style client speaks
//! native gRPC to `wisp bridge`, which forwards gRPC-web over HTTP to the ALB emulator,
//! which invokes the real Lambda `bootstrap` binaries through a Lambda Runtime API
//! emulator; the functions keep their state in DynamoDB Local and moto S3 and read their
//! config and key from moto's Secrets Manager (tests/e2e/support/lambda.rs).
//!
//! Needs the stand-ins (`scripts/test` starts them) and the function binaries
//! (`scripts/test` builds them); otherwise the tests print a note and pass, unless
//! `WISP_REQUIRE_AWS_TESTS=1`.

use crate::support;

use support::api::{registered_events_flow, setup_on, sync_application_flow};
use support::scenarios;
use support::{Via, Wisp};

#[tokio::test]
async fn piped_deployment_lifecycle_through_bridge_alb_and_lambda() {
    let Some(wisp) = Wisp::start_lambda("piped_deployment_lifecycle_through_bridge_alb_and_lambda")
    else {
        return;
    };
    scenarios::deployment_lifecycle_on(&wisp, Via::Bridge).await;
    scenarios::auth_cases_on(&wisp, Via::Bridge).await;
    let front = wisp.lambda().expect("running as Lambda functions");
    assert!(
        front.invocations("wisp-piped-api") > 20,
        "the piped calls did not reach the piped-api function"
    );
    assert_eq!(front.invocations("wisp-api"), 0);
}

#[tokio::test]
async fn pipectl_calls_through_bridge_alb_and_lambda() {
    let Some(wisp) = Wisp::start_lambda("pipectl_calls_through_bridge_alb_and_lambda") else {
        return;
    };
    // Native gRPC clients of a Lambda deployment all go through the bridge.
    let mut setup = setup_on(wisp).await;
    sync_application_flow(&mut setup).await;
    registered_events_flow(&mut setup).await;
    let front = setup.wisp.lambda().expect("running as Lambda functions");
    assert!(
        front.invocations("wisp-api") > 0,
        "pipectl's calls never reached the api function"
    );
    assert!(front.invocations("wisp-piped-api") > 0);
}

#[tokio::test]
async fn health_checks_and_scheduled_jobs() {
    let Some(wisp) = Wisp::start_lambda("health_checks_and_scheduled_jobs") else {
        return;
    };
    // The ALB's health check goes to the http function.
    let (status, body) = wisp.http_get("/healthz").await;
    assert_eq!(status, http::StatusCode::OK, "body: {body}");

    // EventBridge invokes the jobs function with the job's name.
    let front = wisp.lambda().expect("running as Lambda functions");
    let report = front
        .invoke("wisp-jobs", &serde_json::json!({"job": "orphan-commands"}))
        .unwrap_or_else(|e| panic!("jobs failed: {e}\n{}", front.log_text("wisp-jobs")));
    let report: serde_json::Value = serde_json::from_slice(&report).expect("a JSON report");
    assert_eq!(report["job"], "orphan-commands", "report: {report}");
    assert_eq!(report["finished"], true, "report: {report}");
    let unknown = front.invoke("wisp-jobs", &serde_json::json!({"job": "no-such-job"}));
    assert!(unknown.is_err(), "an unknown job must fail the invocation");
}

#[tokio::test]
async fn console_login_and_web_service_through_alb_and_lambda() {
    let Some(wisp) = Wisp::start_lambda("console_login_and_web_service_through_alb_and_lambda")
    else {
        return;
    };
    // The login form goes to the http function, the console's calls to web-api.
    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let resp = wisp
        .login_static(support::QUICKSTART, &username, &password)
        .await;
    let cookie = support::web::set_cookie(&resp, "token")
        .unwrap_or_else(|| panic!("no session cookie: {resp:?}"));
    assert!(
        cookie.contains("Secure"),
        "behind the ALB's HTTPS: {cookie}"
    );
    let token = support::web::cookie_value(cookie).to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let me = support::ok(
        console
            .get_me(wisp_proto::webservice::GetMeRequest {})
            .await,
    );
    assert_eq!(me.subject, username);
    let registered = support::ok(
        console
            .register_piped(wisp_proto::webservice::RegisterPipedRequest {
                name: "from-the-console".into(),
                desc: String::new(),
            })
            .await,
    );
    assert!(!registered.key.is_empty());
    let mut anonymous = wisp.web_client(Via::GrpcWeb, None).await;
    support::assert_status(
        anonymous
            .get_me(wisp_proto::webservice::GetMeRequest {})
            .await,
        tonic::Code::Unauthenticated,
        "",
    );
    assert!(front.invocations("wisp-http") >= 1);
    assert!(front.invocations("wisp-web-api") >= 3);
}
