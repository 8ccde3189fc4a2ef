//! What an operator scrapes from `wisp serve` (issue 17): a known workload, then the
//! counts on `/metrics`, read with a Prometheus text-format parser.

use crate::support;

use std::collections::HashMap;

use http::{Method, StatusCode};
use support::{QUICKSTART, Via, Wisp};
use wisp_proto::pipedservice as ps;

/// The samples of `/metrics`, by metric name and labels.
pub(crate) struct Scrape(prometheus_parse::Scrape);

impl Scrape {
    pub(crate) async fn from(wisp: &Wisp) -> Scrape {
        Scrape::at(wisp.server()).await
    }

    /// The samples of one server's `/metrics`.
    pub(crate) async fn at(server: &support::Server) -> Scrape {
        Scrape::at_addr(server.admin_addr().expect("an admin address")).await
    }

    /// The samples of the `/metrics` at `admin` (a server's or a bridge's admin address).
    pub(crate) async fn at_addr(admin: std::net::SocketAddr) -> Scrape {
        let (status, body) = support::http_request_to(admin, Method::GET, "/metrics").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let lines = body.lines().map(|l| Ok(l.to_owned()));
        Scrape(prometheus_parse::Scrape::parse(lines).expect("Prometheus text format"))
    }

    /// The value of `name` whose labels include `labels` (0 when there is none).
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let matching: Vec<f64> = self
            .0
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                // The +Inf bucket: every observation.
                prometheus_parse::Value::Histogram(buckets) => {
                    buckets.iter().map(|b| b.count).fold(0.0, f64::max)
                }
                prometheus_parse::Value::Summary(_) => f64::NAN,
            })
            .collect();
        assert!(matching.len() <= 1, "{name} {labels:?}: {matching:?}");
        matching.first().copied().unwrap_or(0.0)
    }

    /// The sum of the counters named `name` whose labels include `labels`.
    pub(crate) fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .filter_map(|s| match &s.value {
                prometheus_parse::Value::Counter(v) => Some(*v),
                _ => None,
            })
            .sum()
    }

    /// Label sets seen for `name`.
    fn label_sets(&self, name: &str) -> Vec<HashMap<String, String>> {
        self.0
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .map(|s| {
                s.labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .collect()
    }
}

#[tokio::test]
async fn a_known_workload_shows_on_metrics() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "scraped");
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    client
        .report_piped_meta(ps::ReportPipedMetaRequest {
            version: "v0.50.0".into(),
            ..Default::default()
        })
        .await
        .expect("ReportPipedMeta");
    let idle = wisp.add_piped(QUICKSTART, "never-reports");
    // The piped's own metrics, as an upstream piped sends them with ReportStat.
    let piped_stats = b"# HELP piped_deployments_total Deployments handled.\n\
        # TYPE piped_deployments_total counter\n\
        piped_deployments_total{status=\"ok\"} 3\n\
        wisp_grpc_requests_total{code=\"OK\"} 1000000\n";
    for _ in 0..3 {
        client
            .report_stat(ps::ReportStatRequest {
                piped_stats: piped_stats.to_vec(),
            })
            .await
            .expect("ReportStat");
    }
    client
        .list_applications(ps::ListApplicationsRequest {})
        .await
        .expect("ListApplications");
    let wrong = piped.authorization_with(QUICKSTART, "not-the-key");
    let mut stranger = wisp.client(Via::Grpc, Some(&wrong)).await;
    for _ in 0..2 {
        let err = stranger
            .report_stat(ps::ReportStatRequest {
                piped_stats: vec![],
            })
            .await
            .expect_err("a wrong key");
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
    }

    let m = Scrape::from(&wisp).await;
    let calls = |method: &str, code: &str| {
        m.value(
            "wisp_grpc_requests_total",
            &[
                ("service", "PipedService"),
                ("method", method),
                ("code", code),
            ],
        )
    };
    assert_eq!(calls("ReportStat", "OK"), 3.0);
    assert_eq!(calls("ReportPipedMeta", "OK"), 1.0);

    // The fleet: the reporting piped is connected, the other one only registered.
    let fleet =
        |name: &str, version: &str| m.value(name, &[("project", QUICKSTART), ("version", version)]);
    assert_eq!(fleet("wisp_pipeds_registered", "v0.50.0"), 1.0);
    assert_eq!(fleet("wisp_pipeds_connected", "v0.50.0"), 1.0);
    assert_eq!(fleet("wisp_pipeds_registered", ""), 1.0);
    assert_eq!(fleet("wisp_pipeds_connected", ""), 0.0);
    assert_eq!(calls("ReportStat", "UNAUTHENTICATED"), 2.0);
    assert_eq!(calls("ListApplications", "OK"), 1.0);
    // Every answered call is in the latency histogram of its method.
    assert_eq!(
        m.value(
            "wisp_grpc_request_duration_seconds",
            &[("service", "PipedService"), ("method", "ReportStat")]
        ),
        5.0
    );

    // The piped's first call was checked against the store, its next four came from the
    // cache; the stranger's two were rejected (the second from the rejected cache).
    let auth = |outcome: &str| {
        m.value(
            "wisp_auth_verifications_total",
            &[("credential", "piped"), ("outcome", outcome)],
        )
    };
    assert_eq!(auth("verified"), 1.0);
    assert_eq!(auth("cached"), 4.0);
    assert_eq!(auth("rejected"), 2.0);
    // Keys Wisp generates are checked without bcrypt.
    assert_eq!(
        m.value(
            "wisp_auth_slow_hash_checks_total",
            &[("credential", "piped")]
        ),
        0.0
    );

    // Store operations: the piped's record was read to verify it, and every timed
    // operation was counted.
    let op = |kind: &str, op: &str, outcome: &str| {
        m.value(
            "wisp_store_operations_total",
            &[
                ("store", "datastore"),
                ("backend", "sqlite"),
                ("kind", kind),
                ("op", op),
                ("outcome", outcome),
            ],
        )
    };
    assert!(op("Piped", "get", "ok") >= 1.0);
    let counted: f64 = m
        .label_sets("wisp_store_operations_total")
        .iter()
        .filter(|l| l["store"] == "datastore" && l["op"] == "get")
        .map(|l| op(&l["kind"], "get", &l["outcome"]))
        .sum();
    assert_eq!(
        m.value(
            "wisp_store_operation_duration_seconds",
            &[("store", "datastore"), ("backend", "sqlite"), ("op", "get")]
        ),
        counted
    );

    // The piped's own metrics are re-exported, labelled with the project and piped they
    // came from; a family named like Wisp's own is dropped.
    assert_eq!(
        m.value(
            "piped_deployments_total",
            &[
                ("project_id", QUICKSTART),
                ("piped_id", &piped.id),
                ("status", "ok")
            ]
        ),
        3.0
    );
    assert_eq!(
        calls("ReportStat", "OK"),
        3.0,
        "a piped cannot inflate Wisp's own metrics"
    );

    // No id is a label of Wisp's own metrics.
    for name in [
        "wisp_grpc_requests_total",
        "wisp_auth_verifications_total",
        "wisp_store_operations_total",
        "wisp_cache_reads_total",
        "wisp_pipeds_connected",
        "wisp_deployments_open",
    ] {
        for labels in m.label_sets(name) {
            for value in labels.values() {
                assert!(
                    !value.contains(&piped.id) && !value.contains(&idle.id),
                    "{name} carries a piped id: {labels:?}"
                );
            }
        }
    }
}

/// The process's CPU, memory, files and threads are on `/metrics` under the names
/// upstream's dashboards read (Prometheus's Go client's), beside a piped's own
/// `process_*` samples in the same families (one TYPE line each, or the parser fails).
#[tokio::test]
async fn process_metrics_show_on_metrics_beside_the_pipeds() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "with-process-metrics");
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    client
        .report_stat(ps::ReportStatRequest {
            piped_stats: b"# HELP process_open_fds Number of open file descriptors.\n\
                # TYPE process_open_fds gauge\n\
                process_open_fds 9\n"
                .to_vec(),
        })
        .await
        .expect("ReportStat");
    let m = Scrape::from(&wisp).await;
    let own = |name: &str| {
        let values: Vec<f64> =
            m.0.samples
                .iter()
                .filter(|s| s.metric == name && s.labels.get("piped_id").is_none())
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
                    ref other => panic!("{name}: {other:?}"),
                })
                .collect();
        assert_eq!(values.len(), 1, "{name}: {values:?}");
        values[0]
    };
    assert!(own("process_cpu_seconds_total") > 0.0);
    assert!(own("process_resident_memory_bytes") > 1024.0 * 1024.0);
    assert!(own("process_virtual_memory_bytes") >= own("process_resident_memory_bytes"));
    assert!(own("process_open_fds") >= 3.0);
    assert!(own("process_max_fds") >= own("process_open_fds"));
    assert!(own("process_threads") >= 2.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let started = own("process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 3600.0,
        "{started} vs {now}"
    );
    assert_eq!(
        m.value("process_open_fds", &[("piped_id", piped.id.as_str())]),
        9.0
    );
}

#[tokio::test]
async fn the_admin_address_serves_version_and_nothing_else() {
    let wisp = Wisp::start();
    let admin = wisp.server().admin_addr().expect("an admin address");
    assert!(admin.ip().is_loopback());
    let (status, body) = support::http_request_to(admin, Method::GET, "/version").await;
    assert_eq!(status, StatusCode::OK);
    let version: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    let (status, _) = support::http_request_to(admin, Method::POST, "/metrics").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = support::http_request_to(admin, Method::GET, "/debug").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The public address does not serve metrics.
    let (status, _) = wisp.http_get("/metrics").await;
    assert_ne!(status, StatusCode::OK);
}

#[test]
fn a_bad_admin_address_is_refused_and_off_turns_it_off() {
    let dir = support::empty_data_dir();
    let out = support::run_cli(dir.path(), &["serve", "--admin-addr", "nowhere"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--admin-addr nowhere"), "{out:?}");

    let wisp = Wisp::start_with_serve_args(&["--admin-addr".into(), "off".into()]);
    assert!(wisp.server().admin_addr().is_none());
}

/// The scheduled jobs' runs, items and last success show on `/metrics`.
#[tokio::test]
async fn job_runs_show_on_metrics() {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let wisp =
        Wisp::start_with_jobs("  jobs:\n    orphanCommands: {interval: 1s, commandTimeout: 1s}\n");
    let job = [("job_name", "orphan-commands")];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let m = loop {
        let m = Scrape::from(&wisp).await;
        if m.value("wisp_job_runs_total", &[job[0], ("outcome", "finished")]) >= 1.0 {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no finished run of orphan-commands on /metrics"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(
        m.value("wisp_job_runs_total", &[job[0], ("outcome", "failed")]),
        0.0
    );
    assert!(m.value("wisp_job_duration_seconds", &job) >= 1.0);
    assert!(m.value("wisp_job_last_success_timestamp_seconds", &job) >= started.floor());
    // Every run's items are counted (nothing to change on an empty server).
    assert_eq!(
        m.value("wisp_job_items_total", &[job[0], ("result", "failed")]),
        0.0
    );
}

/// An admin address given must be served: a taken one stops the server with a clear
/// error. The default one is served when it can be: a taken port 9085 (upstream's admin
/// port, perhaps an upstream control plane on the same machine) leaves the control plane
/// running without `/metrics`.
#[test]
fn a_taken_admin_port_stops_the_server_only_when_it_was_asked_for() {
    let dir = support::empty_data_dir();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = taken.local_addr().expect("address").to_string();
    let out = support::run_cli(
        dir.path(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--admin-addr",
            &addr,
            "--no-jobs",
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("cannot listen on --admin-addr {addr}")),
        "{out:?}"
    );

    // Hold the default port (if something else holds it already, so much the better).
    let _default = std::net::TcpListener::bind("127.0.0.1:9085");
    let mut child = support::wisp_command()
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0", "--no-jobs"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wisp serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let started = std::time::Instant::now();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("wisp listening on"))
    {
        let left = std::time::Duration::from_secs(60).saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("wisp serve did not start ({e}): {lines:?}");
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !lines.iter().any(|l| l.starts_with("wisp admin listening")),
        "{lines:?}"
    );
}
