//! A monthly AWS bill for the simulated fleet on the serverless deployment (Lambda behind
//! an ALB, DynamoDB on-demand, S3), projected from what the run measured.
//!
//! Calls of a piped's periodic loops are scaled from the run's piped-seconds to a 30-day
//! month; the calls a piped makes once when it starts are counted once; deployments are
//! projected from the deploy rate (a short run sees too few to scale), each making the
//! calls [`rpc::calls_per_deployment`] lists at the sizes the run measured for them (or
//! the run's average call where it saw none). Lambda duration is not the
//! latency the simulator saw (against `wisp serve` on embedded stores that leaves out
//! DynamoDB; through the bridge it adds the network): each call is billed what the
//! piped-api function takes for it, measured through the real bootstrap, its own work
//! ([`HANDLER_OWN_MS`]) plus its store requests at the latency measured against DynamoDB
//! ([`STORE_REQUEST_MS`]), rounded up to the millisecond as Lambda bills
//! ([`lambda_billed_ms`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::rpc::{self, Rpc};
use super::stats::{Phase, RpcTotals};

pub const MONTH_SECS: f64 = 30.0 * 24.0 * 3600.0;
pub const MONTH_HOURS: f64 = 30.0 * 24.0;

/// When the default prices were taken (us-east-1 list prices).
pub const PRICES_AS_OF: &str =
    "us-east-1 list prices as known on 2026-11-23 (the same as docs/COSTS.md)";

/// Unit prices in USD. Every field can be overridden (`--price KEY=VALUE`, `--prices FILE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Lambda requests, per million.
    pub lambda_requests_per_million: f64,
    /// Lambda duration, per GB-second (arm64 by default; x86_64 with `--lambda-arch`).
    pub lambda_gb_second: f64,
    /// One Application Load Balancer, per hour.
    pub alb_hour: f64,
    /// ALB capacity, per LCU-hour.
    pub alb_lcu_hour: f64,
    /// DynamoDB on-demand reads, per million read request units.
    pub dynamodb_read_per_million: f64,
    /// DynamoDB on-demand writes, per million write request units.
    pub dynamodb_write_per_million: f64,
    /// S3 Standard PUT/COPY/POST/LIST, per thousand requests.
    pub s3_put_per_thousand: f64,
    /// S3 Standard GET/SELECT, per thousand requests.
    pub s3_get_per_thousand: f64,
}

/// Lambda's price per GB-second on x86_64 (arm64 is the default).
pub const LAMBDA_X86_GB_SECOND: f64 = 0.000_016_666_7;

impl Default for Prices {
    fn default() -> Self {
        Prices {
            lambda_requests_per_million: 0.20,
            lambda_gb_second: 0.000_013_333_4,
            alb_hour: 0.0225,
            alb_lcu_hour: 0.008,
            dynamodb_read_per_million: 0.125,
            dynamodb_write_per_million: 0.625,
            s3_put_per_thousand: 0.005,
            s3_get_per_thousand: 0.0004,
        }
    }
}

impl Prices {
    /// Applies a JSON object of overrides (any subset of the fields).
    pub fn merge_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--prices {}: {e}", path.display()))?;
        let overrides: BTreeMap<String, f64> = serde_json::from_str(&text).map_err(|e| {
            format!(
                "--prices {}: expected a JSON object of numbers: {e}",
                path.display()
            )
        })?;
        for (key, value) in overrides {
            self.set(&key, value)
                .map_err(|e| format!("--prices {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Applies one `KEY=VALUE` override.
    pub fn merge_pair(&mut self, pair: &str) -> Result<(), String> {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--price {pair:?}: expected KEY=VALUE"))?;
        let value: f64 = value
            .trim()
            .parse()
            .map_err(|_| format!("--price {pair:?}: {value:?} is not a number"))?;
        self.set(key.trim(), value)
            .map_err(|e| format!("--price {pair:?}: {e}"))
    }

    fn set(&mut self, key: &str, value: f64) -> Result<(), String> {
        if !value.is_finite() || value < 0.0 {
            return Err(format!("{key}: a price must be a number ≥ 0"));
        }
        let field = match key {
            "lambda_requests_per_million" => &mut self.lambda_requests_per_million,
            "lambda_gb_second" => &mut self.lambda_gb_second,
            "alb_hour" => &mut self.alb_hour,
            "alb_lcu_hour" => &mut self.alb_lcu_hour,
            "dynamodb_read_per_million" => &mut self.dynamodb_read_per_million,
            "dynamodb_write_per_million" => &mut self.dynamodb_write_per_million,
            "s3_put_per_thousand" => &mut self.s3_put_per_thousand,
            "s3_get_per_thousand" => &mut self.s3_get_per_thousand,
            _ => {
                return Err(format!(
                    "unknown price {key:?} (known: {})",
                    Self::KEYS.join(", ")
                ));
            }
        };
        *field = value;
        Ok(())
    }

    pub const KEYS: [&'static str; 8] = [
        "lambda_requests_per_million",
        "lambda_gb_second",
        "alb_hour",
        "alb_lcu_hour",
        "dynamodb_read_per_million",
        "dynamodb_write_per_million",
        "s3_put_per_thousand",
        "s3_get_per_thousand",
    ];
}

// Item sizes the unit estimates assume (protobuf record plus key and index attributes).
// DynamoDB bills a strongly consistent read 1 RRU per 4 KB, an eventually consistent one
// (every GSI query) half that, a write 1 WRU per KB, and each GSI the item is in one more
// write of the item's size (projection ALL), two when the index key changes (delete + put).
// See shared/store-aws/DYNAMODB.md for the access pattern of each call.
/// An application with its git path, sync state and deployment references.
const APPLICATION_ITEM_BYTES: f64 = 1536.0;
/// A deployment with three planned stages.
const DEPLOYMENT_ITEM_BYTES: f64 = 2048.0;
/// A new (PENDING) deployment: no stages yet.
const NEW_DEPLOYMENT_ITEM_BYTES: f64 = 1024.0;
/// A piped with its reported config and repositories.
const PIPED_ITEM_BYTES: f64 = 2048.0;
/// Key, version and expiry attributes around a stored piped stat.
const STAT_ITEM_OVERHEAD_BYTES: f64 = 150.0;

fn strong_read(bytes: f64) -> f64 {
    (bytes / 4096.0).ceil().max(1.0)
}

fn index_query(bytes: f64) -> f64 {
    0.5 * (bytes / 4096.0).ceil().max(1.0)
}

fn write(bytes: f64) -> f64 {
    (bytes / 1024.0).ceil().max(1.0)
}

/// What one call costs the stores, on average.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StoreUnits {
    pub rru: f64,
    pub wru: f64,
    pub s3_get: f64,
    pub s3_put: f64,
    /// DynamoDB and S3 requests the call awaits, one after another.
    pub requests: f64,
}

/// A warm piped-api invocation's own work, in ms: the handler's time less the time it
/// awaits the stores, p50 of ListUnhandledCommands through the real bootstrap (97 µs;
/// ReportStat 254 µs). Measured with `scripts/measure-lambdas` (benches/README.md
/// "Lambda: a poll's handler time").
pub const HANDLER_OWN_MS: f64 = 0.1;

/// One DynamoDB request as the handler awaits it, in ms: the p50 store time of
/// ListUnhandledCommands (its one Query) through the same bootstrap against DynamoDB
/// Local on loopback, the AWS SDK's signing and (de)serialisation included. S3 requests
/// are billed the same. A measured figure, not a price: `--price` does not override it.
pub const STORE_REQUEST_MS: f64 = 3.3;

/// Lambda's billed duration of one warm call of `rpc` (whole milliseconds, at least 1):
/// the handler's own work plus its store requests.
pub fn lambda_billed_ms(rpc: Rpc, shape: Shape) -> f64 {
    let requests = store_units(rpc, shape).requests;
    (HANDLER_OWN_MS + requests * STORE_REQUEST_MS)
        .ceil()
        .max(1.0)
}

/// Billed Lambda seconds of one piped's month at upstream's default cadence, the calls
/// docs/COSTS.md "Per piped-month" counts.
pub fn default_cadence_billed_secs() -> f64 {
    let shape = Shape {
        apps_per_piped: 10,
        stat_record_bytes: 2048,
    };
    [
        (Rpc::ListUnhandledCommands, 518_400.0),
        (Rpc::ListNotCompletedDeployments, 259_200.0),
        (Rpc::ListApplications, 43_200.0),
        (Rpc::ListEvents, 43_200.0),
        (Rpc::ReportStat, 43_200.0),
    ]
    .iter()
    .map(|&(rpc, calls)| calls * lambda_billed_ms(rpc, shape) / 1000.0)
    .sum()
}

/// The sizes that vary with the run's settings.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub apps_per_piped: usize,
    /// The stored stat record's data (metrics compressed as the server stores them).
    pub stat_record_bytes: usize,
}

/// DynamoDB and S3 requests one call of `rpc` makes on the AWS backends with no Redis
/// (the in-process cache only): the worst case, where every ownership check misses.
pub fn store_units(rpc: Rpc, shape: Shape) -> StoreUnits {
    let app_update = StoreUnits {
        // GetItem, then a conditional PutItem; the item is in three GSIs, one of which
        // (project, updated_at) changes key.
        rru: strong_read(APPLICATION_ITEM_BYTES),
        wru: write(APPLICATION_ITEM_BYTES) * (1.0 + 1.0 + 2.0 + 1.0),
        requests: 2.0,
        ..StoreUnits::default()
    };
    let deployment_update = StoreUnits {
        // GetItem + PutItem; in three GSIs (open-by-piped, keyed on created_at; by project
        // and by application, both keyed on updated_at, which moves).
        rru: strong_read(DEPLOYMENT_ITEM_BYTES),
        wru: write(DEPLOYMENT_ITEM_BYTES) * (1.0 + 1.0 + 2.0 + 2.0),
        requests: 2.0,
        ..StoreUnits::default()
    };
    let owner_check = strong_read(APPLICATION_ITEM_BYTES);
    match rpc {
        // Issue 4's measurement: exactly one Query of the sparse unhandled-commands index,
        // billed the 0.5 RRU minimum when empty.
        Rpc::ListUnhandledCommands => StoreUnits {
            rru: 0.5,
            requests: 1.0,
            ..StoreUnits::default()
        },
        // Issue 4's measurement: GetItem, and a PutItem when the metrics changed or the
        // stored ones are 30 s old or more — always, at one report a minute.
        Rpc::ReportStat => {
            let item = shape.stat_record_bytes as f64 + STAT_ITEM_OVERHEAD_BYTES;
            StoreUnits {
                rru: strong_read(item),
                wru: write(item),
                requests: 2.0,
                ..StoreUnits::default()
            }
        }
        // One Query of the piped's enabled applications (sparse GSI).
        Rpc::ListApplications => StoreUnits {
            rru: index_query(shape.apps_per_piped as f64 * APPLICATION_ITEM_BYTES),
            requests: 1.0,
            ..StoreUnits::default()
        },
        // One Query of the sparse open-deployments index, one of the project's events.
        Rpc::ListNotCompletedDeployments | Rpc::ListEvents => StoreUnits {
            rru: 0.5,
            requests: 1.0,
            ..StoreUnits::default()
        },
        // GetItem + PutItem of the piped (one GSI, key unchanged).
        Rpc::ReportPipedMeta => StoreUnits {
            rru: strong_read(PIPED_ITEM_BYTES),
            wru: write(PIPED_ITEM_BYTES) * 2.0,
            requests: 2.0,
            ..StoreUnits::default()
        },
        // GetItem + PutItem of a small per-piped record in one GSI.
        Rpc::ReportUnregisteredApplicationConfigurations => StoreUnits {
            rru: 1.0,
            wru: 2.0,
            requests: 2.0,
            ..StoreUnits::default()
        },
        Rpc::ReportApplicationSyncState
        | Rpc::ReportApplicationDeployingStatus
        | Rpc::ReportApplicationMostRecentDeployment => app_update,
        Rpc::GetApplicationMostRecentDeployment => StoreUnits {
            rru: strong_read(APPLICATION_ITEM_BYTES),
            requests: 1.0,
            ..StoreUnits::default()
        },
        // Ownership check of the application, then a conditional PutItem into three GSIs.
        Rpc::CreateDeployment => StoreUnits {
            rru: owner_check,
            wru: write(NEW_DEPLOYMENT_ITEM_BYTES) * 4.0,
            requests: 2.0,
            ..StoreUnits::default()
        },
        Rpc::ReportDeploymentPlanned
        | Rpc::ReportDeploymentStatusChanged
        | Rpc::ReportStageStatusChanged
        | Rpc::ReportDeploymentCompleted => deployment_update,
        // Stage logs live in S3 (log/<deployment>/<stage>/<retry>.txt): a read of the file
        // (a miss of the per-instance cache) and a conditional put, after the deployment's
        // ownership check.
        Rpc::ReportStageLogs | Rpc::ReportStageLogsFromLastCheckpoint => StoreUnits {
            rru: strong_read(DEPLOYMENT_ITEM_BYTES),
            s3_get: 1.0,
            s3_put: 1.0,
            requests: 3.0,
            ..StoreUnits::default()
        },
        // The snapshot replaces application-live-state/<app>.json: one put.
        // A periodic re-send holds the state stored already: the server reads it (one
        // GET when its cache misses, the worst case here) and skips the PUT. Changes
        // after a deployment arrive as ReportApplicationLiveStateEvents.
        Rpc::ReportApplicationLiveState => StoreUnits {
            rru: owner_check,
            s3_get: 1.0,
            requests: 2.0,
            ..StoreUnits::default()
        },
        // Events are patched into the stored snapshot: read, conditional put (one
        // application per call here).
        Rpc::ReportApplicationLiveStateEvents => StoreUnits {
            rru: owner_check,
            s3_get: 1.0,
            s3_put: 1.0,
            requests: 3.0,
            ..StoreUnits::default()
        },
    }
}

/// Settings of the projection that are not prices.
#[derive(Debug, Clone, Copy)]
pub struct CostInputs {
    pub pipeds: usize,
    /// Seconds the simulated pipeds ran, summed over pipeds.
    pub piped_seconds: f64,
    pub lambda_memory_mb: u32,
    pub deploy_rate_per_hour: f64,
    pub shape: Shape,
}

/// Bytes of HTTP around each gRPC-web call on the client ↔ ALB leg: request line and
/// headers (path, host, content type, the piped token) ≈ 400, response headers and the
/// trailer frame ≈ 200, the two 5-byte message frame headers. An estimate: the run sees
/// only encoded messages.
pub const HTTP_BYTES_PER_CALL: f64 = 610.0;

/// Each piped's credentials are verified (one GetItem of the piped) at most once per this
/// many seconds per warm Lambda instance (the verifier cache's TTL).
pub const CREDENTIAL_CACHE_SECS: f64 = 300.0;

/// Billed time of one such check: the GetItem's round trip, added to the call that makes
/// it. The key's stored hash is a SHA-256 (microseconds); a bcrypt check, as keys used
/// to be stored, took about 55 ms of a whole vCPU, several times that at 128 MB. Keys
/// imported from upstream PipeCD pay one bcrypt on first use and are stored with SHA-256
/// from then on.
pub const CREDENTIAL_CHECK_MS: f64 = STORE_REQUEST_MS;

/// The ALB closes a client connection after an hour (its default HTTP client keep-alive
/// duration): each piped opens about one connection an hour.
pub const CONNECTION_SECS: f64 = 3600.0;

#[derive(Debug, Clone, Serialize)]
pub struct Projection {
    /// Deployments of the whole fleet in a month, at the deploy rate.
    pub month_deployments: f64,
    pub month_requests: f64,
    pub month_gb_seconds: f64,
    pub lambda_memory_mb: u32,
    /// Average number of requests in flight (Lambda concurrency).
    pub average_concurrency: f64,
    pub warm_instances: f64,
    pub month_rru: f64,
    pub month_wru: f64,
    pub month_s3_get: f64,
    pub month_s3_put: f64,
    pub month_processed_gb: f64,
    pub lcu: LcuDimensions,
    pub month_lcu_hours: f64,
    pub usd: CostLines,
    pub total_usd: f64,
    pub per_piped_month_usd: f64,
    /// Without the ALB's fixed hourly charge, which does not grow with the fleet.
    pub per_piped_month_variable_usd: f64,
    /// The unit estimate used for each RPC.
    pub store_units: BTreeMap<&'static str, StoreUnits>,
    /// Each RPC's calls in the month and the store units they take (credential checks
    /// apart), for the breakdown by RPC and the levers of `compute`.
    pub by_rpc: BTreeMap<&'static str, RpcMonth>,
}

/// One RPC's month: its calls and what they cost the stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RpcMonth {
    pub calls: f64,
    pub units: StoreUnits,
}

/// An hour's LCUs by dimension (AWS bills the largest).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LcuDimensions {
    pub new_connections: f64,
    pub active_connections: f64,
    pub processed_bytes: f64,
    pub rule_evaluations: f64,
    pub billed: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct CostLines {
    pub lambda_requests: f64,
    pub lambda_duration: f64,
    pub alb_hours: f64,
    pub alb_lcus: f64,
    pub dynamodb_reads: f64,
    pub dynamodb_writes: f64,
    pub s3_puts: f64,
    pub s3_gets: f64,
}

/// The month's bill from the run's totals (indexed by [`Rpc::index`]).
pub fn project(totals: &[RpcTotals], inputs: CostInputs, prices: &Prices) -> Projection {
    let pipeds = inputs.pipeds.max(1) as f64;
    // Steady calls per piped-second, times a month of the whole fleet.
    let scale = if inputs.piped_seconds > 0.0 {
        pipeds * MONTH_SECS / inputs.piped_seconds
    } else {
        0.0
    };
    let gb = f64::from(inputs.lambda_memory_mb) / 1024.0;
    let month_deployments = inputs.deploy_rate_per_hour * MONTH_HOURS * pipeds;
    // The run's average call, for deployment calls it did not see.
    let (all_calls, all_bytes) = totals
        .iter()
        .flat_map(|t| t.phases.iter())
        .fold((0u64, 0u64), |(c, b), p| (c + p.calls, b + p.bytes));
    let mean = |sum: u64, n: u64, fallback: f64| {
        if n > 0 {
            sum as f64 / n as f64
        } else {
            fallback
        }
    };
    let mean_bytes = mean(all_bytes, all_calls, 0.0);
    let mut month_requests = 0.0;
    let mut month_billed_secs = 0.0;
    let mut month_bytes = 0.0;
    let mut units = StoreUnits::default();
    let mut store_units_used = BTreeMap::new();
    let mut by_rpc = BTreeMap::new();
    for &rpc in Rpc::ALL {
        let t = &totals[rpc.index()];
        let (startup, steady, deploy) = (
            t.phase(Phase::Startup),
            t.phase(Phase::Steady),
            t.phase(Phase::Deployment),
        );
        let deploy_calls = rpc::calls_per_deployment(rpc) as f64 * month_deployments;
        let calls = startup.calls as f64 + steady.calls as f64 * scale + deploy_calls;
        month_requests += calls;
        month_billed_secs += calls * lambda_billed_ms(rpc, inputs.shape) / 1000.0;
        month_bytes += startup.bytes as f64
            + steady.bytes as f64 * scale
            + deploy_calls * mean(deploy.bytes, deploy.calls, mean_bytes)
            + calls * HTTP_BYTES_PER_CALL;
        let u = store_units(rpc, inputs.shape);
        units.rru += calls * u.rru;
        units.wru += calls * u.wru;
        units.s3_get += calls * u.s3_get;
        units.s3_put += calls * u.s3_put;
        store_units_used.insert(rpc.name(), u);
        by_rpc.insert(
            rpc.name(),
            RpcMonth {
                calls,
                units: StoreUnits {
                    rru: calls * u.rru,
                    wru: calls * u.wru,
                    s3_get: calls * u.s3_get,
                    s3_put: calls * u.s3_put,
                    requests: calls * u.requests,
                },
            },
        );
    }
    let average_concurrency = month_billed_secs / MONTH_SECS;
    // Bursts keep more instances warm than the average; each one verifies each piped's
    // credentials once per cache period.
    let warm_instances = average_concurrency.ceil().max(1.0);
    let credential_checks = pipeds * (MONTH_SECS / CREDENTIAL_CACHE_SECS) * warm_instances;
    units.rru += credential_checks;
    month_billed_secs += credential_checks * CREDENTIAL_CHECK_MS / 1000.0;

    let gb_per_hour = month_bytes / 1e9 / MONTH_HOURS;
    let lcu = {
        let new_connections = pipeds / CONNECTION_SECS / 25.0;
        let active_connections = pipeds / 3000.0;
        // Lambda targets: 0.4 GB per LCU-hour (1 GB for instance targets).
        let processed_bytes = gb_per_hour / 0.4;
        // Wisp's listener has five rules; the first ten evaluations of a request are free.
        let rule_evaluations = 0.0;
        LcuDimensions {
            new_connections,
            active_connections,
            processed_bytes,
            rule_evaluations,
            billed: new_connections
                .max(active_connections)
                .max(processed_bytes)
                .max(rule_evaluations),
        }
    };
    let month_lcu_hours = lcu.billed * MONTH_HOURS;
    let month_gb_seconds = month_billed_secs * gb;
    let usd = CostLines {
        lambda_requests: month_requests / 1e6 * prices.lambda_requests_per_million,
        lambda_duration: month_gb_seconds * prices.lambda_gb_second,
        alb_hours: MONTH_HOURS * prices.alb_hour,
        alb_lcus: month_lcu_hours * prices.alb_lcu_hour,
        dynamodb_reads: units.rru / 1e6 * prices.dynamodb_read_per_million,
        dynamodb_writes: units.wru / 1e6 * prices.dynamodb_write_per_million,
        s3_puts: units.s3_put / 1e3 * prices.s3_put_per_thousand,
        s3_gets: units.s3_get / 1e3 * prices.s3_get_per_thousand,
    };
    let total_usd = usd.lambda_requests
        + usd.lambda_duration
        + usd.alb_hours
        + usd.alb_lcus
        + usd.dynamodb_reads
        + usd.dynamodb_writes
        + usd.s3_puts
        + usd.s3_gets;
    Projection {
        month_deployments,
        month_requests,
        month_gb_seconds,
        lambda_memory_mb: inputs.lambda_memory_mb,
        average_concurrency,
        warm_instances,
        month_rru: units.rru,
        month_wru: units.wru,
        month_s3_get: units.s3_get,
        month_s3_put: units.s3_put,
        month_processed_gb: month_bytes / 1e9,
        lcu,
        month_lcu_hours,
        usd,
        total_usd,
        per_piped_month_usd: total_usd / pipeds,
        per_piped_month_variable_usd: (total_usd - usd.alb_hours) / pipeds,
        store_units: store_units_used,
        by_rpc,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stats::{CallRecord, Phase, Recorder};

    fn shape() -> Shape {
        Shape {
            apps_per_piped: 20,
            stat_record_bytes: 6000,
        }
    }

    #[test]
    fn unit_estimates() {
        let poll = store_units(Rpc::ListUnhandledCommands, shape());
        assert_eq!(poll.rru, 0.5);
        assert_eq!(poll.wru, 0.0);
        // 6,150 bytes: 2 strongly consistent read units, 7 write units.
        let stat = store_units(Rpc::ReportStat, shape());
        assert_eq!((stat.rru, stat.wru), (2.0, 7.0));
        // 20 applications × 1.5 KB = 30 KB: 8 × 4 KB pages at half a unit.
        assert_eq!(store_units(Rpc::ListApplications, shape()).rru, 4.0);
        let logs = store_units(Rpc::ReportStageLogs, shape());
        assert_eq!((logs.s3_get, logs.s3_put), (1.0, 1.0));
    }

    #[test]
    fn overrides() {
        let mut prices = Prices::default();
        prices.merge_pair("alb_hour=0.03").expect("valid");
        assert_eq!(prices.alb_hour, 0.03);
        assert!(prices.merge_pair("alb_hour").is_err());
        assert!(prices.merge_pair("nope=1").is_err());
        assert!(prices.merge_pair("alb_hour=-1").is_err());
        assert!(prices.merge_pair("alb_hour=x").is_err());
    }

    /// One piped polling ListUnhandledCommands for 60 s, 1 ms each: a month is 518,400
    /// calls, scaled from 12.
    #[test]
    fn scales_steady_calls_to_a_month() {
        let recorder = Recorder::new().expect("valid histogram bounds");
        for _ in 0..12 {
            recorder.record(&CallRecord {
                rpc: Rpc::ListUnhandledCommands,
                phase: Phase::Steady,
                latency: Duration::from_micros(900),
                failure: None,
                request_bytes: 0,
                response_bytes: 0,
            });
        }
        // A startup call is counted once, not scaled.
        recorder.record(&CallRecord {
            rpc: Rpc::ReportPipedMeta,
            phase: Phase::Startup,
            latency: Duration::from_millis(2),
            failure: None,
            request_bytes: 100,
            response_bytes: 20,
        });
        let totals = recorder.into_totals();
        let inputs = CostInputs {
            pipeds: 1,
            piped_seconds: 60.0,
            lambda_memory_mb: 1024,
            deploy_rate_per_hour: 0.0,
            shape: shape(),
        };
        let p = project(&totals, inputs, &Prices::default());
        assert!(
            (p.month_requests - 518_401.0).abs() < 1e-6,
            "{}",
            p.month_requests
        );
        // The run's latencies (0.9 and 2 ms) are not what is billed: each call is billed
        // the handler's measured time for its store requests; the credential checks add
        // a GetItem each. At 1 GB.
        let billed_ms = 518_400.0 * lambda_billed_ms(Rpc::ListUnhandledCommands, shape())
            + lambda_billed_ms(Rpc::ReportPipedMeta, shape())
            + MONTH_SECS / CREDENTIAL_CACHE_SECS * CREDENTIAL_CHECK_MS;
        assert!(
            (p.month_gb_seconds - billed_ms / 1000.0).abs() < 1e-6,
            "{}",
            p.month_gb_seconds
        );
        // A poll (one Query) is billed less than a stat report (GetItem and PutItem).
        assert!(
            lambda_billed_ms(Rpc::ListUnhandledCommands, shape())
                <= lambda_billed_ms(Rpc::ReportStat, shape())
        );
        // The polls, one GetItem of the piped for its metadata, and a credential check
        // per 5 minutes on the one warm instance.
        let reads = 518_400.0 * 0.5 + 1.0 + MONTH_SECS / CREDENTIAL_CACHE_SECS;
        assert!((p.month_rru - reads).abs() < 1e-6, "{}", p.month_rru);
        assert!((p.usd.alb_hours - 720.0 * 0.0225).abs() < 1e-9);
        assert!(p.total_usd > p.usd.alb_hours);
        assert!((p.per_piped_month_usd - p.total_usd).abs() < 1e-12);

        // Deployments come from the rate, not from the (zero) deployments of the run: one
        // an hour is 720 a month, each 22 calls at the run's average billed time.
        let with_deployments = project(
            &totals,
            CostInputs {
                deploy_rate_per_hour: 1.0,
                ..inputs
            },
            &Prices::default(),
        );
        assert_eq!(with_deployments.month_deployments, 720.0);
        let extra = with_deployments.month_requests - p.month_requests;
        assert!((extra - 720.0 * 22.0).abs() < 1e-6, "{extra}");
        let deployment_ms: f64 = Rpc::ALL
            .iter()
            .map(|&rpc| rpc::calls_per_deployment(rpc) as f64 * lambda_billed_ms(rpc, shape()))
            .sum();
        let extra_gb_s = with_deployments.month_gb_seconds - p.month_gb_seconds;
        assert!((extra_gb_s - 720.0 * deployment_ms / 1000.0).abs() < 1e-6);
    }
}
