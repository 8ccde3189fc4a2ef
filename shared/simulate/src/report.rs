//! The end of a run: a table for people, or one JSON object for scripts.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{Value, json};

use super::cost::{self, Prices, Projection};
use super::rpc::Rpc;
use super::stats::{self, Failure, Phase};
use super::{Outcome, Plan};

/// Settings worth repeating next to the results.
#[derive(Debug)]
pub struct Context<'a> {
    pub plan: &'a Plan,
    pub project: &'a str,
    pub run_id: &'a str,
    pub prices: &'a Prices,
    pub lambda_arch: &'a str,
    pub projection: &'a Projection,
}

fn errors_by_status(outcome: &Outcome) -> BTreeMap<&'static str, u64> {
    let mut by_status = BTreeMap::new();
    for t in &outcome.totals {
        for (failure, n) in &t.failures {
            *by_status.entry(failure.name()).or_default() += n;
        }
    }
    by_status
}

fn failures_json(failures: &BTreeMap<Failure, u64>) -> Value {
    failures
        .iter()
        .map(|(f, n)| (f.name().to_string(), json!(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

pub fn json(outcome: &Outcome, ctx: &Context<'_>) -> Value {
    let plan = ctx.plan;
    let mut calls = serde_json::Map::new();
    let mut startup = serde_json::Map::new();
    let mut deployment = serde_json::Map::new();
    let mut latency = serde_json::Map::new();
    let mut settled_latency = serde_json::Map::new();
    let mut errors_by_rpc = serde_json::Map::new();
    let mut retried = serde_json::Map::new();
    for &rpc in Rpc::ALL {
        let t = &outcome.totals[rpc.index()];
        if t.calls() == 0 {
            continue;
        }
        calls.insert(rpc.name().into(), json!(t.calls()));
        startup.insert(rpc.name().into(), json!(t.phase(Phase::Startup).calls));
        deployment.insert(rpc.name().into(), json!(t.phase(Phase::Deployment).calls));
        latency.insert(
            rpc.name().into(),
            json!({
                "p50": round3(t.latency_ms(0.50)),
                "p95": round3(t.latency_ms(0.95)),
                "p99": round3(t.latency_ms(0.99)),
                "max": round3(t.latency_ms(1.0)),
            }),
        );
        if !t.settled_latency_us.is_empty() {
            settled_latency.insert(
                rpc.name().into(),
                json!({
                    "p50": round3(t.settled_latency_ms(0.50)),
                    "p99": round3(t.settled_latency_ms(0.99)),
                    "max": round3(t.settled_latency_ms(1.0)),
                }),
            );
        }
        if !t.failures.is_empty() {
            errors_by_rpc.insert(rpc.name().into(), failures_json(&t.failures));
        }
        if t.retried > 0 {
            retried.insert(rpc.name().into(), json!(t.retried));
        }
    }
    let per_piped: Vec<Value> = outcome
        .pipeds
        .iter()
        .map(|p| {
            let calls: serde_json::Map<String, Value> = Rpc::ALL
                .iter()
                .filter(|r| p.calls[r.index()] > 0)
                .map(|r| (r.name().to_string(), json!(p.calls[r.index()])))
                .collect();
            json!({
                "id": p.id,
                "name": p.name,
                "started_after_secs": round3(p.started_after.as_secs_f64()),
                "active_secs": round3(p.active.as_secs_f64()),
                "calls": calls,
            })
        })
        .collect();
    let cadence: serde_json::Map<String, Value> = cadence()
        .iter()
        .map(|(name, secs)| (name.to_string(), json!(secs)))
        .collect();
    json!({
        "target": plan.target.to_string(),
        "transport": if plan.target.grpc_web { "grpc-web" } else { "grpc" },
        "project": ctx.project,
        "run_id": ctx.run_id,
        "pipeds": plan.pipeds.len(),
        "apps_per_piped": plan.apps_per_piped,
        "duration_secs": plan.duration.as_secs_f64(),
        "ramp_up_secs": plan.ramp_up.as_secs_f64(),
        "elapsed_secs": round3(outcome.elapsed.as_secs_f64()),
        "deploy_rate_per_piped_hour": plan.deploy_rate_per_hour,
        "seed": plan.seed,
        "request_budget": outcome.budget,
        "requests": outcome.requests,
        "refused_by_budget": outcome.refused,
        "errors": outcome.errors(),
        "errors_by_status": errors_by_status(outcome),
        "errors_by_rpc": errors_by_rpc,
        // Attempts turned away with UNAVAILABLE and made again within the minute (each a
        // request, not a call; see `rpc::retry_wait`).
        "retried_unavailable": outcome.retried(),
        "retried_by_rpc": retried,
        "calls": calls,
        "startup_calls": startup,
        "deployment_calls": deployment,
        "latency_ms": latency,
        // Calls that ended after the first 2 minutes (`stats::SETTLED_AFTER`).
        "latency_after_2m_ms": settled_latency,
        "deployments": {
            "triggered": outcome.deployments_triggered,
            "completed": outcome.deployments_completed,
        },
        "cadence_secs": cadence,
        "cost": ctx.projection,
        "lambda_arch": ctx.lambda_arch,
        "prices": ctx.prices,
        "prices_as_of": cost::PRICES_AS_OF,
        "per_piped": per_piped,
        "settling": settling_json(outcome),
        // How late the simulator's own runtime woke (stats::Lag): latencies of the same
        // order measure the simulator, not the server.
        "simulator_lag_ms": {
            "p50": round3(stats::ms_at(&outcome.lag.all_us, 0.50)),
            "p99": round3(stats::ms_at(&outcome.lag.all_us, 0.99)),
            "max": round3(stats::ms_at(&outcome.lag.all_us, 1.0)),
            "after_2m": {
                "p50": round3(stats::ms_at(&outcome.lag.settled_us, 0.50)),
                "p99": round3(stats::ms_at(&outcome.lag.settled_us, 0.99)),
            },
        },
        "timeline_10s": outcome.timeline.iter().map(|b| json!([b.calls, b.failed])).collect::<Vec<_>>(),
        "flood": outcome.flood.as_ref().map(|f| json!({
            "rate_per_sec": f.rate_per_sec,
            "calls": f.calls,
            "answers": f.answers,
        })),
    })
}

/// How a run settled: the success rate after its first 2 minutes, the failures after its
/// fifth, and when the last failure happened (a fleet's cold start, as issue reports
/// measure it).
pub fn settling(outcome: &Outcome) -> Settling {
    let secs = super::stats::TIMELINE_BUCKET.as_secs();
    let after = |from_secs: u64| -> (u64, u64) {
        outcome
            .timeline
            .iter()
            .enumerate()
            .filter(|(i, _)| *i as u64 * secs >= from_secs)
            .fold((0, 0), |(c, f), (_, b)| (c + b.calls, f + b.failed))
    };
    let (calls_after_2m, failed_after_2m) = after(120);
    let (_, failed_after_5m) = after(300);
    let last_failure_secs = outcome
        .timeline
        .iter()
        .rposition(|b| b.failed > 0)
        .map(|i| (i as u64 + 1) * secs);
    Settling {
        success_after_2m: if calls_after_2m == 0 {
            1.0
        } else {
            1.0 - failed_after_2m as f64 / calls_after_2m as f64
        },
        failed_after_5m,
        settled_after_secs: last_failure_secs.unwrap_or(0),
    }
}

/// See [`settling`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settling {
    pub success_after_2m: f64,
    pub failed_after_5m: u64,
    /// The end of the last 10 s with a failure (0: none failed).
    pub settled_after_secs: u64,
}

fn settling_json(outcome: &Outcome) -> Value {
    let s = settling(outcome);
    json!({
        "success_after_2m": s.success_after_2m,
        "failed_after_5m": s.failed_after_5m,
        "settled_after_secs": s.settled_after_secs,
    })
}

/// Period of each periodic call, in seconds.
fn cadence() -> [(&'static str, u64); 8] {
    use super::rpc::*;
    [
        ("ListUnhandledCommands", COMMAND_POLL.as_secs()),
        ("ListNotCompletedDeployments", DEPLOYMENT_POLL.as_secs()),
        ("ListApplications", APPLICATION_POLL.as_secs()),
        ("ListApplications (event watcher)", EVENT_WATCHER.as_secs()),
        ("ListEvents", EVENT_POLL.as_secs()),
        ("ReportStat", STATS.as_secs()),
        ("ReportApplicationSyncState (check)", DRIFT_CHECK.as_secs()),
        ("ReportApplicationLiveState", LIVE_STATE_SNAPSHOT.as_secs()),
    ]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn usd(x: f64) -> String {
    if x >= 100.0 {
        format!("${x:.0}")
    } else if x >= 1.0 {
        format!("${x:.2}")
    } else {
        format!("${x:.4}")
    }
}

/// A count with a unit prefix (k, M, G).
fn count(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

pub fn text(outcome: &Outcome, ctx: &Context<'_>) -> String {
    let plan = ctx.plan;
    let p = ctx.projection;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "wisp simulate: {} pipeds × {} apps, {} s, {} → {} (project {}, run {})",
        plan.pipeds.len(),
        plan.apps_per_piped,
        plan.duration.as_secs(),
        plan.target.transport_name(),
        plan.target,
        ctx.project,
        ctx.run_id,
    );
    let _ = writeln!(
        out,
        "requests: {} made of at most {}; {} failed ({} attempts turned away with UNAVAILABLE retried within the minute); deployments: {} triggered, {} completed",
        outcome.requests,
        outcome.budget,
        outcome.errors(),
        outcome.retried(),
        outcome.deployments_triggered,
        outcome.deployments_completed,
    );
    let settled = settling(outcome);
    let _ = writeln!(
        out,
        "simulator's own lag (how late its runtime woke): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; latencies of that order are the simulator's, not the server's",
        stats::ms_at(&outcome.lag.all_us, 0.50),
        stats::ms_at(&outcome.lag.all_us, 0.99),
        stats::ms_at(&outcome.lag.all_us, 1.0),
    );
    let _ = writeln!(
        out,
        "settling: {:.3}% of calls succeeded after the first 2 min; {} failed after the 5th; last failure in the 10 s ending at {} s",
        settled.success_after_2m * 100.0,
        settled.failed_after_5m,
        settled.settled_after_secs,
    );
    if let Some(f) = &outcome.flood {
        let answers: Vec<String> = f.answers.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let _ = writeln!(
            out,
            "flood beside the fleet: {} calls with made-up keys at {}/s; answers: {}",
            f.calls,
            f.rate_per_sec,
            answers.join(", ")
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<44} {:>8} {:>7} {:>9} {:>9} {:>9}",
        "rpc", "calls", "failed", "p50 ms", "p95 ms", "p99 ms"
    );
    for &rpc in Rpc::ALL {
        let t = &outcome.totals[rpc.index()];
        if t.calls() == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "{:<44} {:>8} {:>7} {:>9.2} {:>9.2} {:>9.2}",
            rpc.name(),
            t.calls(),
            t.failed(),
            t.latency_ms(0.50),
            t.latency_ms(0.95),
            t.latency_ms(0.99),
        );
    }
    let by_status = errors_by_status(outcome);
    if by_status.is_empty() {
        let _ = writeln!(out, "errors by status: none");
    } else {
        let list: Vec<String> = by_status.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let _ = writeln!(out, "errors by status: {}", list.join(", "));
    }

    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Projected AWS cost of this fleet on the serverless deployment, per 30-day month \
         (periodic calls scaled from {:.0} piped-seconds, start-up calls once, {} deployments \
         at {} per piped-hour):",
        outcome.piped_seconds(),
        count(p.month_deployments),
        plan.deploy_rate_per_hour,
    );
    let line = |out: &mut String, what: &str, detail: String, amount: f64| {
        let _ = writeln!(out, "  {what:<18} {detail:<52} {:>10}", usd(amount));
    };
    let prices = ctx.prices;
    line(
        &mut out,
        "Lambda requests",
        format!(
            "{} × {}/M",
            count(p.month_requests),
            usd(prices.lambda_requests_per_million)
        ),
        p.usd.lambda_requests,
    );
    line(
        &mut out,
        "Lambda duration",
        format!(
            "{} GB-s ({} MB, {}) × ${}/GB-s",
            count(p.month_gb_seconds),
            p.lambda_memory_mb,
            ctx.lambda_arch,
            prices.lambda_gb_second
        ),
        p.usd.lambda_duration,
    );
    line(
        &mut out,
        "ALB hours",
        format!(
            "{} h × {}/h (fixed)",
            cost::MONTH_HOURS,
            usd(prices.alb_hour)
        ),
        p.usd.alb_hours,
    );
    line(
        &mut out,
        "ALB LCUs",
        format!(
            "{:.3} LCU × {} h × {}/LCU-h",
            p.lcu.billed,
            cost::MONTH_HOURS,
            usd(prices.alb_lcu_hour)
        ),
        p.usd.alb_lcus,
    );
    line(
        &mut out,
        "DynamoDB reads",
        format!(
            "{} RRU × {}/M",
            count(p.month_rru),
            usd(prices.dynamodb_read_per_million)
        ),
        p.usd.dynamodb_reads,
    );
    line(
        &mut out,
        "DynamoDB writes",
        format!(
            "{} WRU × {}/M",
            count(p.month_wru),
            usd(prices.dynamodb_write_per_million)
        ),
        p.usd.dynamodb_writes,
    );
    line(
        &mut out,
        "S3 PUT",
        format!(
            "{} × {}/k",
            count(p.month_s3_put),
            usd(prices.s3_put_per_thousand)
        ),
        p.usd.s3_puts,
    );
    line(
        &mut out,
        "S3 GET",
        format!(
            "{} × {}/k",
            count(p.month_s3_get),
            usd(prices.s3_get_per_thousand)
        ),
        p.usd.s3_gets,
    );
    line(&mut out, "total", String::new(), p.total_usd);
    line(
        &mut out,
        "per piped-month",
        "(without the ALB's fixed hours:".to_string()
            + &format!(" {})", usd(p.per_piped_month_variable_usd)),
        p.per_piped_month_usd,
    );
    let _ = writeln!(
        out,
        "  LCU dimensions per hour: new connections {:.4}, active connections {:.4}, processed bytes {:.4} ({:.2} GB/month), rule evaluations {:.0}",
        p.lcu.new_connections,
        p.lcu.active_connections,
        p.lcu.processed_bytes,
        p.month_processed_gb,
        p.lcu.rule_evaluations,
    );
    let _ = writeln!(out, "prices: {}", cost::PRICES_AS_OF);
    let _ = writeln!(
        out,
        "  lambda_requests_per_million={} lambda_gb_second={} alb_hour={} alb_lcu_hour={}",
        prices.lambda_requests_per_million,
        prices.lambda_gb_second,
        prices.alb_hour,
        prices.alb_lcu_hour
    );
    let _ = writeln!(
        out,
        "  dynamodb_read_per_million={} dynamodb_write_per_million={} s3_put_per_thousand={} s3_get_per_thousand={}",
        prices.dynamodb_read_per_million,
        prices.dynamodb_write_per_million,
        prices.s3_put_per_thousand,
        prices.s3_get_per_thousand
    );
    let _ = writeln!(out, "  (override: --price KEY=VALUE, --prices FILE.json)");
    let _ = writeln!(
        out,
        "Not counted: free tiers, storage, data transfer out, CloudWatch Logs (Lambda's platform \
         lines are ~300 B per invocation unless the functions log at WARN), Secrets Manager."
    );
    out
}

#[cfg(test)]
mod settling_tests {
    use super::*;
    use crate::stats::Bucket;

    fn outcome(timeline: Vec<Bucket>) -> Outcome {
        Outcome {
            totals: vec![],
            pipeds: vec![],
            budget: 0,
            requests: 0,
            refused: 0,
            elapsed: std::time::Duration::ZERO,
            deployments_triggered: 0,
            deployments_completed: 0,
            flood: None,
            timeline,
            lag: crate::stats::Lag::new().expect("valid histogram bounds"),
        }
    }

    #[test]
    fn a_cold_start_that_settles() {
        // 40 buckets of 10 s: failures in the first minute, one at 2:30, none later.
        let mut timeline = vec![
            Bucket {
                calls: 100,
                failed: 0
            };
            40
        ];
        timeline[1].failed = 50;
        timeline[5].failed = 10;
        timeline[15].failed = 1;
        let s = settling(&outcome(timeline));
        assert_eq!(s.failed_after_5m, 0);
        assert_eq!(s.settled_after_secs, 160);
        assert!(
            (s.success_after_2m - (1.0 - 1.0 / 2800.0)).abs() < 1e-9,
            "{s:?}"
        );
        let calm = settling(&outcome(vec![
            Bucket {
                calls: 5,
                failed: 0
            };
            3
        ]));
        assert_eq!((calm.settled_after_secs, calm.failed_after_5m), (0, 0));
        assert_eq!(calm.success_after_2m, 1.0);
    }
}
