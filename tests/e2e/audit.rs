//! The audit log (issue 32 point 4): a change through the console, through pipectl's
//! APIService, through a piped and through the admin CLI each leave exactly one entry
//! saying who, what, from where and with what result, listed by `wisp audit list`;
//! reads and heartbeats leave none; no secret is in it; each entry is also a JSON line
//! with target `audit` in the server's log.

use crate::support;

use support::{QUICKSTART, Via, Wisp, fixtures, ok};
use wisp_proto::apiservice as api;
use wisp_proto::pipedservice as ps;
use wisp_proto::webservice as web;

fn entries(wisp: &Wisp, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["audit", "list", "--project", QUICKSTART];
    args.extend_from_slice(extra);
    wisp.cli_json(&args)
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("a JSON array"))
}

#[tokio::test]
async fn each_entry_point_leaves_one_entry() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "audited");
    let app = wisp.add_app(&piped, "audited-app", &[]);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");

    // The console: a read, then a change.
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    ok(console.list_pipeds(web::ListPipedsRequest::default()).await);
    ok(console
        .disable_application(web::DisableApplicationRequest {
            application_id: app.clone(),
        })
        .await);
    // A secret the console sends is never recorded.
    ok(console
        .update_project_static_admin(web::UpdateProjectStaticAdminRequest {
            username: "hello-pipecd".into(),
            password: "a-new-secret-password".into(),
        })
        .await);

    // pipectl: a change with an API key.
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    ok(pipectl
        .enable_application(api::EnableApplicationRequest {
            application_id: app.clone(),
        })
        .await);

    // A piped: a heartbeat, then a deployment it creates.
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    ok(client
        .report_stat(ps::ReportStatRequest {
            piped_stats: vec![],
        })
        .await);
    ok(client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(fixtures::deployment(
                &piped,
                "dep-audited",
                &app,
                "audited-app",
            )),
        })
        .await);

    // The CLI.
    wisp.cli_ok(&["piped", "disable", "--project", QUICKSTART, &piped.id]);

    let all = entries(&wisp, &[]);
    let find = |method: &str| -> Vec<&serde_json::Value> {
        all.iter().filter(|e| e["method"] == method).collect()
    };
    let console_entry = find("WebService/DisableApplication");
    assert_eq!(console_entry.len(), 1, "{all:#?}");
    let e = console_entry[0];
    assert_eq!(e["actor"], "user:hello-pipecd");
    assert_eq!(e["targets"], serde_json::json!([app]));
    assert_eq!(e["code"], "OK");
    assert_eq!(e["project_id"], QUICKSTART);
    assert!(
        e["source"].as_str().is_some_and(|s| s.starts_with("127.")),
        "{e}"
    );

    let api_entry = find("APIService/EnableApplication");
    assert_eq!(api_entry.len(), 1, "{all:#?}");
    assert_eq!(api_entry[0]["actor"], format!("api-key:{}", rw.id));

    let piped_entry = find("PipedService/CreateDeployment");
    assert_eq!(piped_entry.len(), 1, "{all:#?}");
    assert_eq!(piped_entry[0]["actor"], format!("piped:{}", piped.id));
    assert_eq!(
        piped_entry[0]["targets"],
        serde_json::json!(["dep-audited", app])
    );

    let cli_entry = find("cli/piped disable");
    assert_eq!(cli_entry.len(), 1, "{all:#?}");
    assert!(
        cli_entry[0]["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("cli:")),
        "{all:#?}"
    );
    assert_eq!(cli_entry[0]["targets"], serde_json::json!([piped.id]));
    assert_eq!(cli_entry[0]["source"], "local");

    // Reads and heartbeats leave nothing; secrets are nowhere.
    assert!(find("WebService/ListPipeds").is_empty(), "{all:#?}");
    assert!(find("PipedService/ReportStat").is_empty(), "{all:#?}");
    assert_eq!(find("WebService/UpdateProjectStaticAdmin").len(), 1);
    let text = serde_json::to_string(&all).expect("json");
    assert!(!text.contains("a-new-secret-password"), "{text}");
    assert!(!text.contains(&rw.key), "{text}");

    // Newest first, and the filters.
    let times: Vec<i64> = all.iter().filter_map(|e| e["at_ms"].as_i64()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let by_method = entries(&wisp, &["--method", "DisableApplication"]);
    assert_eq!(by_method.len(), 1, "{by_method:#?}");
    let by_actor = entries(&wisp, &["--actor", &format!("api-key:{}", rw.id)]);
    assert_eq!(by_actor.len(), 1, "{by_actor:#?}");
    assert!(entries(&wisp, &["--since", "4102444800"]).is_empty());

    // The server also wrote each of its entries as a JSON line (CloudWatch on AWS).
    let log = wisp.server().log_text();
    let id = e["id"].as_str().expect("an id");
    assert!(
        log.lines().any(|l| l.contains("audit")
            && l.contains(id)
            && l.contains("\"actor\":\"user:hello-pipecd\"")),
        "{log}"
    );
    assert!(!log.contains("a-new-secret-password"));
}

#[tokio::test]
async fn a_refused_change_is_recorded_with_its_code() {
    let wisp = Wisp::start();
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let err = console
        .disable_piped(web::DisablePipedRequest {
            piped_id: "no-such-piped".into(),
        })
        .await
        .expect_err("no such piped");
    assert_eq!(err.code(), tonic::Code::NotFound);
    let all = entries(&wisp, &["--method", "DisablePiped"]);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0]["code"], "NOT_FOUND");
    assert_eq!(all[0]["targets"], serde_json::json!(["no-such-piped"]));
}

/// The audit lines a function wrote to its log (CloudWatch's form: one JSON object per
/// line, target `audit`, the entry's JSON as the message), parsed.
fn logged_entries(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["target"] == "audit")
        .filter_map(|line| serde_json::from_str(line["message"].as_str()?).ok())
        .collect()
}

/// The serverless path: a pipectl change (an API key, through `wisp bridge` and the ALB
/// emulator to the api function) and a console change (a session, gRPC-web through the
/// ALB to the web-api function) are each recorded with who, what and the result on
/// DynamoDB, written as a JSON line to the function's log, and listed by `wisp audit
/// list` run as a separate process on the same stores.
#[tokio::test]
async fn changes_through_the_alb_and_the_functions_are_recorded_and_logged() {
    let Some(wisp) =
        Wisp::start_lambda("changes_through_the_alb_and_the_functions_are_recorded_and_logged")
    else {
        return;
    };
    let by_pipectl = wisp.add_piped(QUICKSTART, "audited-by-pipectl");
    let by_console = wisp.add_piped(QUICKSTART, "audited-by-console");
    let rw = wisp.add_api_key(QUICKSTART, "ci-lambda", "READ_WRITE");

    let mut pipectl = wisp.api_key_client(Via::Bridge, &rw).await;
    ok(pipectl
        .disable_piped(api::DisablePipedRequest {
            piped_id: by_pipectl.id.clone(),
        })
        .await);

    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let resp = wisp.login_static(QUICKSTART, &username, &password).await;
    let cookie = support::web::set_cookie(&resp, "token")
        .unwrap_or_else(|| panic!("no session cookie: {resp:?}"));
    let token = support::web::cookie_value(cookie).to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    ok(console
        .disable_piped(web::DisablePipedRequest {
            piped_id: by_console.id.clone(),
        })
        .await);
    // A read leaves nothing.
    ok(console.list_pipeds(web::ListPipedsRequest::default()).await);

    // `wisp audit list --json`, another process on the same DynamoDB table.
    let all = entries(&wisp, &[]);
    let find = |method: &str| -> Vec<&serde_json::Value> {
        all.iter().filter(|e| e["method"] == method).collect()
    };
    let api_entry = find("APIService/DisablePiped");
    assert_eq!(api_entry.len(), 1, "{all:#?}");
    let api_entry = api_entry[0];
    assert_eq!(api_entry["actor"], format!("api-key:{}", rw.id));
    assert_eq!(api_entry["targets"], serde_json::json!([by_pipectl.id]));
    assert_eq!(api_entry["code"], "OK");
    let web_entry = find("WebService/DisablePiped");
    assert_eq!(web_entry.len(), 1, "{all:#?}");
    let web_entry = web_entry[0];
    assert_eq!(web_entry["actor"], format!("user:{username}"));
    assert_eq!(web_entry["targets"], serde_json::json!([by_console.id]));
    assert_eq!(web_entry["code"], "OK");
    assert!(find("WebService/ListPipeds").is_empty(), "{all:#?}");
    let text = serde_json::to_string(&all).expect("JSON");
    assert!(!text.contains(&rw.key), "{text}");

    // Each function wrote its entry as a structured line, the same entry.
    for (function, entry) in [("wisp-api", api_entry), ("wisp-web-api", web_entry)] {
        let log = front.log_text(function);
        let logged = logged_entries(&log);
        assert!(
            logged.iter().any(|l| l == entry),
            "{function} did not log {entry}:\n{log}"
        );
        assert!(!log.contains(&rw.key), "{function} logged the API key");
    }
}
