//! The serverless deployment end to end, on one machine: an upstream-style client speaks
//! native gRPC to `wisp bridge`, which forwards gRPC-web over HTTP to the ALB emulator,
//! which invokes the real Lambda `bootstrap` binaries through a Lambda Runtime API
//! emulator (cargo-lambda's; `jobs` on the hand-written one, tests/README.md); the functions keep their state in DynamoDB Local and moto S3 and read their
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

/// The CloudWatch Embedded Metric Format documents one function wrote to its log.
fn emf_documents(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|doc| doc.get("_aws").is_some())
        .collect()
}

/// The sum of `metric` over the documents whose dimensions include `labels`.
fn emf_sum(docs: &[serde_json::Value], metric: &str, labels: &[(&str, &str)]) -> f64 {
    docs.iter()
        .filter(|doc| labels.iter().all(|(k, v)| doc[*k] == *v))
        .filter_map(|doc| match &doc[metric] {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::Array(values) => Some(values.len() as f64),
            _ => None,
        })
        .sum()
}

/// The functions write their metrics as CloudWatch Embedded Metric Format lines: namespace
/// `Wisp`, dimensions `Deployment` and `Function` plus the few labels each metric keeps
/// there, and counts that match the calls made. By default only the basic set (the
/// detailed one is checked in wisp-telemetry's tests).
#[tokio::test]
async fn metrics_as_embedded_metric_format_lines() {
    let Some(wisp) = Wisp::start_lambda("metrics_as_embedded_metric_format_lines") else {
        return;
    };
    let piped = wisp.add_piped(support::QUICKSTART, "emf");
    let mut client = wisp.piped_client(Via::Bridge, &piped).await;
    for _ in 0..3 {
        client
            .report_stat(wisp_proto::pipedservice::ReportStatRequest {
                piped_stats: b"# metrics".to_vec(),
            })
            .await
            .expect("ReportStat");
    }
    let wrong = piped.authorization_with(support::QUICKSTART, "not-the-key");
    let mut stranger = wisp.client(Via::Bridge, Some(&wrong)).await;
    for _ in 0..2 {
        let err = stranger
            .report_stat(wisp_proto::pipedservice::ReportStatRequest {
                piped_stats: vec![],
            })
            .await
            .expect_err("a wrong key");
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
    }
    let front = wisp.lambda().expect("running as Lambda functions");
    front
        .invoke("wisp-jobs", &serde_json::json!({"job": "orphan-commands"}))
        .unwrap_or_else(|e| panic!("jobs failed: {e}\n{}", front.log_text("wisp-jobs")));

    let log = front.log_text("wisp-piped-api");
    let docs = emf_documents(&log);
    assert!(!docs.is_empty(), "no EMF lines in the log:\n{log}");
    for doc in &docs {
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "Wisp", "{doc}");
        let dimensions = directive["Dimensions"][0]
            .as_array()
            .expect("one dimension set");
        assert_eq!(dimensions[0], "Deployment", "{doc}");
        assert_eq!(dimensions[1], "Function", "{doc}");
        // Every dimension has its value in the document, and none is an id.
        for name in dimensions {
            let value = doc[name.as_str().expect("a name")]
                .as_str()
                .unwrap_or_else(|| panic!("{name} has no value: {doc}"));
            assert!(!value.contains(&piped.id), "{doc}");
        }
        assert!(dimensions.len() <= 4, "too many dimensions: {doc}");
        assert_eq!(doc["Function"], "piped-api", "{doc}");
        assert_eq!(doc["Deployment"], "wisp", "{doc}");
    }
    let calls = |class: &str| emf_sum(&docs, "wisp_grpc_requests_total", &[("code_class", class)]);
    assert_eq!(calls("ok"), 3.0, "{log}");
    assert_eq!(calls("client_error"), 2.0, "{log}");
    assert_eq!(calls("server_error"), 0.0, "{log}");
    // The basic set (the default): what the alarms and the dashboard read, nothing more.
    for doc in &docs {
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics")
        {
            assert_eq!(metric["Name"], "wisp_grpc_requests_total", "{doc}");
        }
    }

    let jobs = emf_documents(&front.log_text("wisp-jobs"));
    // The jobs function measures the fleet: the one piped that reported is connected.
    assert_eq!(
        emf_sum(&jobs, "wisp_pipeds_connected", &[("Function", "jobs")]),
        1.0
    );
    assert_eq!(emf_sum(&jobs, "wisp_job_runs_total", &[]), 0.0);
}

/// The ALB adapter in front of the functions' Runtime API holds the ALB's request limit
/// (shared/lambda/src/alb_limits.rs): a body one byte over it is refused with 413 before
/// any function sees it; a body at the limit is handed to the function, which answers.
#[tokio::test]
async fn the_alb_refuses_a_body_over_its_limit_before_the_function() {
    use support::lambda::ALB_MAX_REQUEST_BODY;
    let Some(wisp) =
        Wisp::start_lambda("the_alb_refuses_a_body_over_its_limit_before_the_function")
    else {
        return;
    };
    let front = wisp.lambda().expect("running as Lambda functions");
    let path = "/grpc.service.webservice.WebService/GetMe";
    let headers = [("content-type", "application/grpc-web+proto")];
    let before = front.invocations("wisp-web-api");
    let over = wisp
        .http_post(path, &headers, vec![0; ALB_MAX_REQUEST_BODY + 1])
        .await;
    assert_eq!(over.status, http::StatusCode::PAYLOAD_TOO_LARGE, "{over:?}");
    assert_eq!(
        front.invocations("wisp-web-api"),
        before,
        "no function saw it"
    );
    let at = wisp
        .http_post(path, &headers, vec![0; ALB_MAX_REQUEST_BODY])
        .await;
    assert_eq!(front.invocations("wisp-web-api"), before + 1);
    assert_ne!(
        at.status,
        http::StatusCode::BAD_GATEWAY,
        "the function must answer a body at the limit: {:?}\n{}",
        at.status,
        front.log_text("wisp-web-api")
    );
}
