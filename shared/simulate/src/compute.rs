//! The two compute modes side by side (`wisp simulate --compute lambda|fargate`): the
//! run's [`Projection`] (Lambda behind the ALB) re-priced for `compute = "fargate"` of the
//! Terraform module (`wisp serve` tasks behind the same ALB, native gRPC), and both at the
//! fleet sizes of docs/COSTS.md beside upstream's ECS deployment as coded.
//!
//! What the run measured per piped (calls, bytes, DynamoDB and S3 units) is kept per
//! piped and scaled to each fleet size; what the modes bill differently is here: Lambda's
//! requests, duration and per-invocation log lines against Fargate task-hours, the
//! ALB's processed bytes (gRPC-web through the bridge against native gRPC over HTTP/2,
//! Lambda targets against IP targets) and the credential checks (one per piped per cache
//! period per warm instance or task).

use serde::Serialize;

use super::cost::{self, MONTH_HOURS, MONTH_SECS, Prices, Projection};

/// What serves the routes: the Terraform module's `compute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compute {
    Lambda,
    Fargate,
}

impl Compute {
    pub fn name(self) -> &'static str {
        match self {
            Compute::Lambda => "lambda",
            Compute::Fargate => "fargate",
        }
    }
}

/// The fleet sizes docs/COSTS.md compares.
pub const FLEET_SIZES: [usize; 5] = [1, 10, 100, 1_000, 10_000];

/// Server CPU per call of `wisp serve`, in µs: 44 µs measured per poll on the embedded
/// stores (benches/README.md, "server CPU per call"), plus an allowance for the DynamoDB
/// request each call makes instead (SigV4, TLS, JSON; not measured on this machine),
/// taken as three times the measured call. `--cpu-per-call-us` overrides it.
pub const SERVER_CPU_PER_CALL_US: f64 = 44.0 * 4.0;

/// Resident memory of `wisp serve` without pipeds, MiB (benches/README.md: 59 MiB quiet).
pub const BASE_MEMORY_MIB: f64 = 64.0;

/// Resident memory per connected piped, KiB: (851 − 59) MiB at 10,000 pipeds in the fleet
/// benchmark (benches/README.md), rounded up.
pub const MEMORY_PER_PIPED_KIB: f64 = 85.0;

/// Average CPU a task is sized for (the module's `fargate.cpu_target`): room for bursts
/// and for one zone's tasks to take over the other's.
pub const CPU_TARGET: f64 = 0.6;

/// Memory a task is sized for, of its size: half, for bursts of connections.
pub const MEMORY_TARGET: f64 = 0.5;

/// Bytes on the client ↔ ALB leg around each native gRPC call on a kept HTTP/2
/// connection: HPACK-indexed request and response headers (~30), HEADERS, DATA and
/// trailer frames (9 each), the two 5-byte message prefixes, TLS records (~30 each way).
/// [`cost::HTTP_BYTES_PER_CALL`] is the gRPC-web figure the Lambda projection uses.
pub const NATIVE_GRPC_BYTES_PER_CALL: f64 = 120.0;

/// Lambda's START/END/REPORT lines per invocation (docs/COSTS.md), bytes.
pub const LAMBDA_LOG_BYTES_PER_INVOCATION: f64 = 350.0;

/// Upstream PipeCD's ECS demo as coded (docs/COSTS.md "Beside upstream's ECS
/// deployment"): two tasks of 0.5 vCPU and 1 GB, RDS db.t3.micro, ElastiCache, NAT, ALB;
/// the same at every fleet size until it is resized (not priced).
pub const UPSTREAM_ECS_SPOT_USD: f64 = 100.4;
pub const UPSTREAM_ECS_ON_DEMAND_USD: f64 = 125.6;

/// Fargate sizes tried, smallest first: (vCPU, GB), each with the least memory it takes.
const TASK_SIZES: [(f64, f64); 5] = [(0.25, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0)];

/// Prices of what only one mode bills (us-east-1 list prices, as docs/COSTS.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComputePrices {
    /// Fargate Linux/ARM, per vCPU-hour.
    pub fargate_vcpu_hour: f64,
    /// Fargate Linux/ARM, per GB-hour.
    pub fargate_gb_hour: f64,
    /// A public IPv4 address (each ALB zone; each task with `assign_public_ip`), per hour.
    pub public_ipv4_hour: f64,
    /// CloudWatch Logs ingestion plus a month of storage, per GB.
    pub logs_gb: f64,
    /// Secrets Manager, per secret-month (config and key).
    pub secret_month: f64,
}

impl Default for ComputePrices {
    fn default() -> Self {
        ComputePrices {
            fargate_vcpu_hour: 0.032_38,
            fargate_gb_hour: 0.003_56,
            public_ipv4_hour: 0.005,
            logs_gb: 0.53,
            secret_month: 0.40,
        }
    }
}

/// Tasks of one size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TaskPlan {
    pub tasks: u32,
    pub vcpu: f64,
    pub memory_gb: f64,
    /// The fleet's calls per second the plan carries, and the vCPU they need.
    pub calls_per_second: f64,
    pub vcpu_needed: f64,
}

/// The cheapest tasks that carry `pipeds` making `calls_per_second` in all: at least
/// `min_tasks` (two zones), CPU at [`CPU_TARGET`] and memory at [`MEMORY_TARGET`].
pub fn task_plan(
    pipeds: usize,
    calls_per_second: f64,
    cpu_per_call_us: f64,
    min_tasks: u32,
    prices: &ComputePrices,
) -> TaskPlan {
    let vcpu_needed = calls_per_second * cpu_per_call_us / 1e6;
    let memory_mib = pipeds as f64 * MEMORY_PER_PIPED_KIB / 1024.0;
    let mut best: Option<(f64, TaskPlan)> = None;
    for (vcpu, gb) in TASK_SIZES {
        let usable_mib = gb * 1024.0 * MEMORY_TARGET - BASE_MEMORY_MIB;
        let by_cpu = (vcpu_needed / (vcpu * CPU_TARGET)).ceil();
        let by_memory = (memory_mib / usable_mib).ceil();
        let tasks = by_cpu
            .max(by_memory)
            .max(f64::from(min_tasks))
            .min(f64::from(u32::MAX));
        let hourly = tasks * (vcpu * prices.fargate_vcpu_hour + gb * prices.fargate_gb_hour);
        if best.as_ref().is_none_or(|(h, _)| hourly < *h) {
            best = Some((
                hourly,
                TaskPlan {
                    tasks: tasks as u32,
                    vcpu,
                    memory_gb: gb,
                    calls_per_second,
                    vcpu_needed,
                },
            ));
        }
    }
    best.map(|(_, plan)| plan).unwrap_or(TaskPlan {
        tasks: min_tasks,
        vcpu: 0.25,
        memory_gb: 0.5,
        calls_per_second,
        vcpu_needed,
    })
}

/// What the run measured, per piped-month (steady calls, start-up calls and deployments
/// together), without the Lambda-only parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerPiped {
    pub requests: f64,
    /// DynamoDB read units without the credential checks (those depend on the mode).
    pub rru: f64,
    pub wru: f64,
    pub s3_get: f64,
    pub s3_put: f64,
    /// Protobuf message bytes, without any HTTP around them.
    pub message_bytes: f64,
    /// Lambda GB-seconds (credential checks included), at `lambda_memory_gb`.
    pub gb_seconds: f64,
    pub lambda_memory_gb: f64,
}

impl PerPiped {
    pub fn from_projection(p: &Projection, pipeds: usize) -> PerPiped {
        let n = pipeds.max(1) as f64;
        let checks = n * (MONTH_SECS / cost::CREDENTIAL_CACHE_SECS) * p.warm_instances;
        PerPiped {
            requests: p.month_requests / n,
            rru: (p.month_rru - checks).max(0.0) / n,
            wru: p.month_wru / n,
            s3_get: p.month_s3_get / n,
            s3_put: p.month_s3_put / n,
            message_bytes: (p.month_processed_gb * 1e9
                - p.month_requests * cost::HTTP_BYTES_PER_CALL)
                .max(0.0)
                / n,
            gb_seconds: p.month_gb_seconds / n,
            lambda_memory_gb: f64::from(p.lambda_memory_mb) / 1024.0,
        }
    }
}

/// One mode's month at one fleet size, by line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModeMonth {
    /// Lambda requests and duration, or Fargate task-hours.
    pub compute: f64,
    /// Lambda's per-invocation log lines (Fargate: successful calls log nothing).
    pub logs: f64,
    /// ALB hours, its two public IPv4 addresses, and each task's.
    pub fixed_network: f64,
    pub alb_lcus: f64,
    pub dynamodb: f64,
    pub s3: f64,
    pub secrets: f64,
    pub total: f64,
}

/// Both modes and upstream at one fleet size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FleetRow {
    pub pipeds: usize,
    pub lambda: ModeMonth,
    pub fargate: ModeMonth,
    pub fargate_tasks: TaskPlan,
    pub upstream_ecs_spot: f64,
    pub upstream_ecs_on_demand: f64,
}

/// Settings of the comparison.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub cpu_per_call_us: f64,
    pub min_tasks: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cpu_per_call_us: SERVER_CPU_PER_CALL_US,
            min_tasks: 2,
        }
    }
}

/// ALB LCUs per hour (the largest dimension), for `pipeds` keeping one connection each
/// (re-opened hourly) and `gb_per_hour` processed, at `gb_per_lcu` (0.4 for Lambda
/// targets, 1 for IP targets).
fn lcus(pipeds: f64, gb_per_hour: f64, gb_per_lcu: f64) -> f64 {
    let new_connections = pipeds / cost::CONNECTION_SECS / 25.0;
    let active_connections = pipeds / 3000.0;
    new_connections
        .max(active_connections)
        .max(gb_per_hour / gb_per_lcu)
}

/// Both modes at `pipeds`, from the run's per-piped figures.
pub fn fleet_row(
    per: &PerPiped,
    pipeds: usize,
    prices: &Prices,
    compute: &ComputePrices,
    settings: Settings,
) -> FleetRow {
    let n = pipeds as f64;
    let requests = per.requests * n;
    let alb_fixed = MONTH_HOURS * (prices.alb_hour + 2.0 * compute.public_ipv4_hour);
    let secrets = 2.0 * compute.secret_month;
    let store = |checks_per_piped: f64| {
        let rru = (per.rru + checks_per_piped) * n;
        (
            rru / 1e6 * prices.dynamodb_read_per_million
                + per.wru * n / 1e6 * prices.dynamodb_write_per_million,
            per.s3_put * n / 1e3 * prices.s3_put_per_thousand
                + per.s3_get * n / 1e3 * prices.s3_get_per_thousand,
        )
    };
    let checks_per_instance = MONTH_SECS / cost::CREDENTIAL_CACHE_SECS;

    // Lambda: as the run's projection, scaled.
    let gb_s = per.gb_seconds * n;
    let concurrency = gb_s / MONTH_SECS / per.lambda_memory_gb.max(f64::EPSILON);
    let warm = concurrency.ceil().max(1.0);
    let (dynamodb, s3) = store(checks_per_instance * warm);
    let lambda_bytes = per.message_bytes * n + requests * cost::HTTP_BYTES_PER_CALL;
    let lambda_lcus = lcus(n, lambda_bytes / 1e9 / MONTH_HOURS, 0.4);
    let lambda = {
        let compute_usd =
            requests / 1e6 * prices.lambda_requests_per_million + gb_s * prices.lambda_gb_second;
        let logs = requests * LAMBDA_LOG_BYTES_PER_INVOCATION / 1e9 * compute.logs_gb;
        let alb_lcus = lambda_lcus * MONTH_HOURS * prices.alb_lcu_hour;
        ModeMonth {
            compute: compute_usd,
            logs,
            fixed_network: alb_fixed,
            alb_lcus,
            dynamodb,
            s3,
            secrets,
            total: compute_usd + logs + alb_fixed + alb_lcus + dynamodb + s3 + secrets,
        }
    };

    // Fargate: tasks sized for the fleet's calls, native gRPC to IP targets.
    let plan = task_plan(
        pipeds,
        requests / MONTH_SECS,
        settings.cpu_per_call_us,
        settings.min_tasks,
        compute,
    );
    let tasks = f64::from(plan.tasks);
    let (dynamodb, s3) = store(checks_per_instance * tasks);
    let fargate_bytes = per.message_bytes * n + requests * NATIVE_GRPC_BYTES_PER_CALL;
    let fargate = {
        let compute_usd = MONTH_HOURS
            * tasks
            * (plan.vcpu * compute.fargate_vcpu_hour + plan.memory_gb * compute.fargate_gb_hour);
        let fixed_network = alb_fixed + MONTH_HOURS * tasks * compute.public_ipv4_hour;
        let alb_lcus =
            lcus(n, fargate_bytes / 1e9 / MONTH_HOURS, 1.0) * MONTH_HOURS * prices.alb_lcu_hour;
        ModeMonth {
            compute: compute_usd,
            logs: 0.0,
            fixed_network,
            alb_lcus,
            dynamodb,
            s3,
            secrets,
            total: compute_usd + fixed_network + alb_lcus + dynamodb + s3 + secrets,
        }
    };
    FleetRow {
        pipeds,
        lambda,
        fargate,
        fargate_tasks: plan,
        upstream_ecs_spot: UPSTREAM_ECS_SPOT_USD,
        upstream_ecs_on_demand: UPSTREAM_ECS_ON_DEMAND_USD,
    }
}

/// The comparison at [`FLEET_SIZES`] and at the run's own fleet size.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub compute: Compute,
    pub cpu_per_call_us: f64,
    pub per_piped: PerPiped,
    pub this_fleet: FleetRow,
    pub fleet_sizes: Vec<FleetRow>,
    pub prices: ComputePrices,
}

pub fn compare(
    projection: &Projection,
    pipeds: usize,
    compute: Compute,
    prices: &Prices,
    settings: Settings,
) -> Comparison {
    let per = PerPiped::from_projection(projection, pipeds);
    let cp = ComputePrices::default();
    Comparison {
        compute,
        cpu_per_call_us: settings.cpu_per_call_us,
        per_piped: per,
        this_fleet: fleet_row(&per, pipeds, prices, &cp, settings),
        fleet_sizes: FLEET_SIZES
            .iter()
            .map(|&n| fleet_row(&per, n, prices, &cp, settings))
            .collect(),
        prices: cp,
    }
}

/// The comparison as text, after the run's report.
pub fn text(c: &Comparison) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let row = &c.this_fleet;
    let chosen = match c.compute {
        Compute::Lambda => &row.lambda,
        Compute::Fargate => &row.fargate,
    };
    let _ = writeln!(
        out,
        "\nThis fleet with compute = \"{}\" (logs, the ALB's public IPv4 and the secrets included): ${:.2} a month",
        c.compute.name(),
        chosen.total
    );
    if c.compute == Compute::Fargate {
        let t = &row.fargate_tasks;
        let _ = writeln!(
            out,
            "  {} tasks of {} vCPU, {} GB: ${:.2}; ALB and IPv4 ${:.2}; LCUs ${:.2}; DynamoDB ${:.2}; S3 ${:.2}; secrets ${:.2} ({:.1} calls/s × {} µs = {:.3} vCPU)",
            t.tasks,
            t.vcpu,
            t.memory_gb,
            chosen.compute,
            chosen.fixed_network,
            chosen.alb_lcus,
            chosen.dynamodb,
            chosen.s3,
            chosen.secrets,
            t.calls_per_second,
            c.cpu_per_call_us,
            t.vcpu_needed,
        );
    }
    let _ = writeln!(
        out,
        "\nMonthly cost by fleet size, this run's calls per piped ({:.0} a month), USD:",
        c.per_piped.requests
    );
    let _ = writeln!(
        out,
        "  {:>7}  {:>10}  {:>10}  {:<24}  {:>14}  {:>14}",
        "pipeds", "lambda", "fargate", "fargate tasks", "upstream Spot", "upstream OD"
    );
    for r in &c.fleet_sizes {
        let t = &r.fargate_tasks;
        let _ = writeln!(
            out,
            "  {:>7}  {:>10.2}  {:>10.2}  {:<24}  {:>14.1}  {:>14.1}",
            r.pipeds,
            r.lambda.total,
            r.fargate.total,
            format!("{} × {} vCPU/{} GB", t.tasks, t.vcpu, t.memory_gb),
            r.upstream_ecs_spot,
            r.upstream_ecs_on_demand,
        );
    }
    let _ = writeln!(
        out,
        "  (upstream: its ECS demo as coded, flat until resized; server CPU per call {} µs; docs/COSTS.md)",
        c.cpu_per_call_us
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn per() -> PerPiped {
        // docs/COSTS.md's piped at the default cadence.
        PerPiped {
            requests: 907_200.0,
            rru: 540_000.0,
            wru: 86_400.0,
            s3_get: 0.0,
            s3_put: 0.0,
            message_bytes: 907_200.0 * 100.0,
            gb_seconds: cost::default_cadence_billed_secs() * 0.125,
            lambda_memory_gb: 0.125,
        }
    }

    #[test]
    fn tasks_grow_with_the_fleet_and_never_below_two() {
        let prices = ComputePrices::default();
        let small = task_plan(1, 0.35, SERVER_CPU_PER_CALL_US, 2, &prices);
        assert_eq!((small.tasks, small.vcpu, small.memory_gb), (2, 0.25, 0.5));
        // 10,000 pipeds: 3,500 calls/s × 176 µs = 0.62 vCPU and ~830 MiB.
        let large = task_plan(10_000, 3_500.0, SERVER_CPU_PER_CALL_US, 2, &prices);
        assert!(
            f64::from(large.tasks) * large.vcpu * CPU_TARGET >= large.vcpu_needed,
            "{large:?}"
        );
        assert!(
            f64::from(large.tasks) * (large.memory_gb * 1024.0 * MEMORY_TARGET - BASE_MEMORY_MIB)
                >= 10_000.0 * MEMORY_PER_PIPED_KIB / 1024.0,
            "{large:?}"
        );
        let busier = task_plan(10_000, 35_000.0, SERVER_CPU_PER_CALL_US, 2, &prices);
        assert!(
            f64::from(busier.tasks) * busier.vcpu > f64::from(large.tasks) * large.vcpu,
            "{busier:?}"
        );
    }

    #[test]
    fn fargate_costs_less_than_lambda_past_a_hundred_pipeds() {
        let prices = Prices::default();
        let cp = ComputePrices::default();
        let rows: Vec<FleetRow> = FLEET_SIZES
            .iter()
            .map(|&n| fleet_row(&per(), n, &prices, &cp, Settings::default()))
            .collect();
        // One piped: Lambda's pay-per-call wins; the tasks cost a fixed amount.
        assert!(
            rows[0].lambda.total < rows[0].fargate.total,
            "{:?}",
            rows[0]
        );
        for r in &rows[2..] {
            assert!(r.fargate.total < r.lambda.total, "{r:?}");
        }
        // Lambda grows by its per-call lines; the tasks' compute grows far less.
        assert!(rows[4].lambda.compute + rows[4].lambda.logs > 10.0 * rows[4].fargate.compute);
        assert_eq!(rows[4].fargate.logs, 0.0);
    }
}

#[cfg(test)]
mod docs {
    use super::*;

    /// `1234.5` as `1,234.50`.
    fn dollars(v: f64) -> String {
        let cents = (v * 100.0).round() as u64;
        let whole = (cents / 100).to_string();
        let mut grouped = String::new();
        for (i, c) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        format!("{grouped}.{:02}", cents % 100)
    }

    /// docs/COSTS.md "Lambda or Fargate" gives what this model computes for the piped it
    /// describes at the default cadence.
    #[test]
    fn the_costs_page_table_is_this_model() {
        let page = include_str!("../../../docs/COSTS.md");
        let per = PerPiped {
            requests: 907_200.0,
            rru: 540_000.0,
            wru: 86_400.0,
            s3_get: 0.0,
            s3_put: 0.0,
            message_bytes: 907_200.0 * 100.0,
            gb_seconds: cost::default_cadence_billed_secs() * 0.125,
            lambda_memory_gb: 0.125,
        };
        for n in FLEET_SIZES {
            let r = fleet_row(
                &per,
                n,
                &Prices::default(),
                &ComputePrices::default(),
                Settings::default(),
            );
            let row = format!(
                "| {} | {} | {} |",
                dollars(n as f64).trim_end_matches(".00"),
                dollars(r.lambda.total),
                dollars(r.fargate.total)
            );
            println!("{row} tasks {:?}", r.fargate_tasks);
            assert!(page.contains(&row), "docs/COSTS.md lacks {row}");
        }
    }
}
