//! `wisp simulate`: registers a fleet of simulated pipeds and applications in the store the
//! flags name, drives a running control plane with them over the network at upstream's
//! cadence, and reports calls, latencies, failures and a monthly AWS cost projection.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use wisp_store::stores::Stores;

use super::stores::StoreArgs;
use crate::error::CliError;
use wisp_simulate::client::Target;
use wisp_simulate::cost::{self, CostInputs, Prices, Shape};
use wisp_simulate::report::{self, Context};
use wisp_simulate::{self as sim, Plan, RegisteredPiped, SimApp};

/// Who the simulator records as the creator of the keys it makes.
const CREATOR: &str = "wisp-simulate";
/// The most pipeds one run simulates.
const MAX_PIPEDS: usize = 100_000;
/// The most applications per piped.
const MAX_APPS_PER_PIPED: usize = 1_000;

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The control plane to drive: `http://HOST:PORT` (`wisp serve`), or with --grpc-web
    /// also `https://HOST` (the load balancer of a serverless deployment). Nothing else
    /// is contacted.
    #[arg(long)]
    pub target: String,
    /// Speak gRPC-web over HTTP/1.1 (as `wisp bridge` does behind a load balancer) instead
    /// of native gRPC over HTTP/2 cleartext.
    #[arg(long)]
    pub grpc_web: bool,
    /// Simulated pipeds to register and run.
    #[arg(long)]
    pub pipeds: usize,
    /// Applications registered for each piped.
    #[arg(long)]
    pub apps_per_piped: usize,
    /// How long to run (`60s`, `10m`, `1h`); no call starts after it.
    #[arg(long, value_parser = super::flags::parse_duration)]
    pub duration: Duration,
    /// Upstream-format control-plane-config.yaml naming the stores to register in.
    #[arg(long, env = "WISP_CONFIG", conflicts_with = "config_secret")]
    pub config: Option<PathBuf>,
    /// Read that config from this AWS Secrets Manager secret instead.
    #[arg(long, env = "WISP_CONFIG_SECRET", value_name = "NAME")]
    pub config_secret: Option<String>,
    /// Directory of the embedded stores (the `--data-dir` of the `wisp serve` to drive).
    #[arg(long, env = "WISP_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Project to register the fleet in (default: `quickstart`, which `wisp serve` makes
    /// when it runs without a config).
    #[arg(long, default_value = wisp_app::QUICKSTART_PROJECT)]
    pub project: String,
    /// Print one JSON object on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Deployments per piped per hour (a Poisson process), each through plan, three
    /// stages with logs, and completion. The default, 0.5, is a dozen a day.
    #[arg(long, default_value_t = 0.5)]
    pub deploy_rate: f64,
    /// Spread the pipeds' starts over this window (default: a quarter of --duration, at
    /// most 60s).
    #[arg(long, value_parser = super::flags::parse_duration)]
    pub ramp_up: Option<Duration>,
    /// A call unanswered after this long counts as failed.
    #[arg(long, default_value = "10s", value_parser = super::flags::parse_duration)]
    pub call_timeout: Duration,
    /// Memory of the piped-api Lambda function, for the GB-seconds of the projection (the
    /// Terraform module and SAM template default to 128 MB).
    #[arg(long, default_value_t = 128)]
    pub lambda_memory_mb: u32,
    /// Architecture of the Lambda functions (sets the default GB-second price).
    #[arg(long, value_enum, default_value_t = LambdaArch::Arm64)]
    pub lambda_arch: LambdaArch,
    /// Override one price: `KEY=VALUE` in USD (keys as printed); repeatable.
    #[arg(long = "price", value_name = "KEY=VALUE")]
    pub price: Vec<String>,
    /// Override prices from a JSON object of `KEY: VALUE` (applied before --price).
    #[arg(long = "prices", value_name = "FILE")]
    pub prices_file: Option<PathBuf>,
    /// Size of each ReportStat metrics payload (a real piped's is ~5–10 KB).
    #[arg(long, default_value_t = 6144)]
    pub stat_bytes: usize,
    /// Beside the fleet, send this many ReportStat calls a second that name the fleet's
    /// piped ids with made-up keys (an attack on the credential checks; piped ids are no
    /// secret). Reported apart from the fleet's calls.
    #[arg(long, value_name = "PER_SECOND", default_value_t = 0.0)]
    pub flood_wrong_keys: f64,
    /// Seed of the start offsets, phases and deployment arrivals (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The deployment to price this fleet on: the Terraform module's `compute`. Both are
    /// compared at 1 to 10,000 pipeds beside upstream's ECS deployment either way.
    #[arg(long, value_enum, default_value_t = ComputeArg::Lambda)]
    pub compute: ComputeArg,
    /// Server CPU per call of `wisp serve` on DynamoDB, in µs, that sizes the Fargate tasks
    /// (default: the 850 µs measured for the task on the AWS stores, benches/fleet/task.sh;
    /// docs/COSTS.md).
    #[arg(long, default_value_t = wisp_simulate::compute::SERVER_CPU_PER_CALL_US)]
    pub cpu_per_call_us: f64,
    /// Price `compute = "fargate"` with `enable_redis`: the cache node and its endpoint,
    /// and the pipeds' stats in the cache instead of DynamoDB.
    #[arg(long)]
    pub redis: bool,
    /// Price `compute = "fargate"` with the polls answered from each task's memory
    /// (`wisp_store::polls`; it needs Redis, which it implies).
    #[arg(long)]
    pub poll_answers: bool,
    /// Price `compute = "fargate"` with this `dynamodb_billing_mode`: `provisioned` is
    /// capacity sized for the run's average load at 70 % utilisation.
    #[arg(long, value_enum, default_value_t = DynamoDbArg::OnDemand)]
    pub dynamodb: DynamoDbArg,
    /// Price `compute = "fargate"` with this `fargate_capacity`: `on-demand` (arm64
    /// tasks), `spot` (every task on Fargate Spot) or `mixed` (--on-demand-base tasks
    /// on-demand, the rest on Spot); Spot's tasks are x86_64, the architecture the CPU per
    /// call was measured on.
    #[arg(long, value_enum, default_value_t = FargateCapacityArg::OnDemand)]
    pub fargate_capacity: FargateCapacityArg,
    /// With --fargate-capacity mixed: the tasks kept on on-demand Fargate (the module's
    /// `fargate.on_demand_base`).
    #[arg(long, default_value_t = 1)]
    pub on_demand_base: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FargateCapacityArg {
    OnDemand,
    Spot,
    Mixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DynamoDbArg {
    OnDemand,
    Provisioned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ComputeArg {
    Lambda,
    Fargate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LambdaArch {
    Arm64,
    #[value(name = "x86_64")]
    X86_64,
}

impl LambdaArch {
    fn name(self) -> &'static str {
        match self {
            LambdaArch::Arm64 => "arm64",
            LambdaArch::X86_64 => "x86_64",
        }
    }
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

/// The checked settings, before anything is registered.
struct Checked {
    target: Target,
    stores: StoreArgs,
    prices: Prices,
    ramp_up: Duration,
    seed: u64,
}

fn check(args: &SimulateArgs) -> Result<Checked, CliError> {
    let target = Target::parse(&args.target, args.grpc_web).map_err(usage)?;
    if args.pipeds == 0 {
        return Err(usage("--pipeds must be at least 1"));
    }
    if args.pipeds > MAX_PIPEDS {
        return Err(usage(format!("--pipeds must be at most {MAX_PIPEDS}")));
    }
    if args.apps_per_piped > MAX_APPS_PER_PIPED {
        return Err(usage(format!(
            "--apps-per-piped must be at most {MAX_APPS_PER_PIPED}"
        )));
    }
    if args.duration < Duration::from_secs(1) {
        return Err(usage("--duration must be at least 1s"));
    }
    if args.call_timeout.is_zero() {
        return Err(usage("--call-timeout must be more than 0"));
    }
    if !args.deploy_rate.is_finite() || args.deploy_rate < 0.0 {
        return Err(usage("--deploy-rate must be a number ≥ 0"));
    }
    if !args.flood_wrong_keys.is_finite() || !(0.0..=10_000.0).contains(&args.flood_wrong_keys) {
        return Err(usage("--flood-wrong-keys must be a number from 0 to 10000"));
    }
    if !(args.cpu_per_call_us.is_finite() && args.cpu_per_call_us > 0.0) {
        return Err(usage("--cpu-per-call-us must be a number above 0"));
    }
    if args.on_demand_base == 0 {
        return Err(usage(
            "--on-demand-base must be at least 1 (use --fargate-capacity spot for none)",
        ));
    }
    if !(128..=10_240).contains(&args.lambda_memory_mb) {
        return Err(usage(
            "--lambda-memory-mb must be between 128 and 10240 (Lambda's range)",
        ));
    }
    if args.stat_bytes > 1024 * 1024 {
        return Err(usage("--stat-bytes must be at most 1048576"));
    }
    if args.config.is_none() && args.config_secret.is_none() && args.data_dir.is_none() {
        return Err(usage(
            "name the stores of the control plane to drive: --data-dir DIR (that `wisp serve` uses), --config FILE or --config-secret NAME",
        ));
    }
    let mut prices = Prices::default();
    if args.lambda_arch == LambdaArch::X86_64 {
        prices.lambda_gb_second = cost::LAMBDA_X86_GB_SECOND;
    }
    if let Some(path) = &args.prices_file {
        prices.merge_file(path).map_err(usage)?;
    }
    for pair in &args.price {
        prices.merge_pair(pair).map_err(usage)?;
    }
    let ramp_up = args
        .ramp_up
        .unwrap_or_else(|| (args.duration / 4).min(Duration::from_secs(60)));
    if ramp_up >= args.duration {
        return Err(usage("--ramp-up must be shorter than --duration"));
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    Ok(Checked {
        target,
        stores: StoreArgs {
            config: args.config.clone(),
            config_secret: args.config_secret.clone(),
            data_dir: args
                .data_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(".wisp")),
        },
        prices,
        ramp_up,
        seed,
    })
}

pub async fn run(args: SimulateArgs) -> Result<(), CliError> {
    let checked = check(&args)?;
    let opened = checked.stores.open().await?;
    let exists = opened
        .project_exists(&args.project)
        .await
        .map_err(|e| CliError::Failure(anyhow::anyhow!("look up project: {e}")))?;
    if !exists {
        return Err(usage(format!(
            "unknown project {:?} in {} (create it with `wisp project add`)",
            args.project,
            opened.describe()
        )));
    }
    reachable(&checked.target).await?;

    // Unique per run even with the same --seed: the names must not collide in a store.
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..6].to_string();
    eprintln!(
        "wisp simulate: registering {} pipeds × {} applications as sim-{run_id}-* in project {} ({})",
        args.pipeds,
        args.apps_per_piped,
        args.project,
        opened.describe()
    );
    let pipeds = register(
        &opened.stores,
        &args.project,
        &run_id,
        args.pipeds,
        args.apps_per_piped,
    )
    .await?;

    let plan = Plan {
        target: checked.target,
        pipeds,
        apps_per_piped: args.apps_per_piped,
        duration: args.duration,
        ramp_up: checked.ramp_up,
        call_timeout: args.call_timeout,
        deploy_rate_per_hour: args.deploy_rate,
        stat_bytes: args.stat_bytes,
        seed: checked.seed,
        flood_rate: args.flood_wrong_keys,
    };
    eprintln!(
        "wisp simulate: at most {} requests ({} per piped) to {} over {} s; starts spread over {} s",
        plan.request_budget(),
        plan.requests_per_piped(),
        plan.target,
        plan.duration.as_secs(),
        plan.ramp_up.as_secs(),
    );
    let outcome = sim::run(&plan)
        .await
        .map_err(|e| CliError::Failure(anyhow::anyhow!(e)))?;
    let projection = cost::project(
        &outcome.totals,
        CostInputs {
            pipeds: plan.pipeds.len(),
            piped_seconds: outcome.piped_seconds(),
            lambda_memory_mb: args.lambda_memory_mb,
            deploy_rate_per_hour: args.deploy_rate,
            shape: Shape {
                apps_per_piped: args.apps_per_piped,
                stat_record_bytes: wisp_store::pipedstat::stored_data_bytes(
                    "sim-piped",
                    &wisp_simulate::stat_payload("sim-piped", 1, args.stat_bytes),
                ),
            },
        },
        &checked.prices,
    );
    let ctx = Context {
        plan: &plan,
        project: &args.project,
        run_id: &run_id,
        prices: &checked.prices,
        lambda_arch: args.lambda_arch.name(),
        projection: &projection,
    };
    let comparison = wisp_simulate::compute::compare(
        &projection,
        plan.pipeds.len(),
        match args.compute {
            ComputeArg::Lambda => wisp_simulate::compute::Compute::Lambda,
            ComputeArg::Fargate => wisp_simulate::compute::Compute::Fargate,
        },
        &checked.prices,
        wisp_simulate::compute::Settings {
            cpu_per_call_us: args.cpu_per_call_us,
            levers: wisp_simulate::compute::Levers {
                redis: args.redis,
                polls: args.poll_answers,
                billing: match args.dynamodb {
                    DynamoDbArg::OnDemand => wisp_simulate::compute::Billing::OnDemand,
                    DynamoDbArg::Provisioned => wisp_simulate::compute::Billing::Provisioned,
                },
            },
            capacity: match args.fargate_capacity {
                FargateCapacityArg::OnDemand => wisp_simulate::compute::Capacity::OnDemand,
                FargateCapacityArg::Spot => wisp_simulate::compute::Capacity::Spot,
                FargateCapacityArg::Mixed => wisp_simulate::compute::Capacity::Mixed,
            },
            on_demand_base: args.on_demand_base,
            ..Default::default()
        },
    );
    if args.json {
        let mut value = report::json(&outcome, &ctx);
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "compute".into(),
                serde_json::to_value(&comparison).map_err(anyhow::Error::new)?,
            );
        }
        println!("{value}");
    } else {
        print!("{}", report::text(&outcome, &ctx));
        print!(
            "{}",
            wisp_simulate::compute::text(&comparison, &checked.prices)
        );
    }
    Ok(())
}

/// Fails early, with one line, when nothing listens at the target.
async fn reachable(target: &Target) -> Result<(), CliError> {
    let address = target.socket_address();
    match tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(&address),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(CliError::Failure(anyhow::anyhow!(
            "cannot reach --target {target} ({address}): {e}"
        ))),
        Err(_) => Err(CliError::Failure(anyhow::anyhow!(
            "cannot reach --target {target} ({address}): no answer within 10 s"
        ))),
    }
}

/// Registers `count` pipeds named `sim-<run>-<i>`, each with `apps` applications
/// `sim-<run>-<i>-app-<j>`, the records `wisp piped add` and `wisp application add` make
/// (one generated key per piped; Kubernetes applications in repo `examples`).
async fn register(
    stores: &Stores,
    project: &str,
    run_id: &str,
    count: usize,
    apps: usize,
) -> Result<Vec<RegisteredPiped>, CliError> {
    // The store writes dominate: a few pipeds at a time per core.
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get() * 2);
    let semaphore = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..count {
        let stores = stores.clone();
        let project = project.to_string();
        let name = format!("sim-{run_id}-{i}");
        let semaphore = Arc::clone(&semaphore);
        tasks.spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            register_one(&stores, &project, name, apps)
                .await
                .map(|p| (i, p))
        });
    }
    let mut registered = Vec::with_capacity(count);
    while let Some(joined) = tasks.join_next().await {
        let result =
            joined.map_err(|e| CliError::Failure(anyhow::anyhow!("registration task: {e}")))?;
        registered.push(result?);
    }
    registered.sort_by_key(|(i, _)| *i);
    Ok(registered.into_iter().map(|(_, p)| p).collect())
}

async fn register_one(
    stores: &Stores,
    project: &str,
    name: String,
    apps: usize,
) -> Result<RegisteredPiped, CliError> {
    let (piped, key) = wisp_services::ops::pipeds::register_piped(
        &stores.pipeds,
        project,
        name.clone(),
        "Simulated by wisp simulate".into(),
        CREATOR,
    )
    .await
    .map_err(|e| CliError::Failure(anyhow::anyhow!("register piped {name}: {e}")))?;
    let id = piped.id.clone();
    let mut registered = Vec::with_capacity(apps);
    for j in 0..apps {
        let app_name = format!("{name}-app-{j}");
        let new = wisp_services::ops::applications::NewApplication {
            name: app_name.clone(),
            repo_id: "examples".into(),
            path: format!("apps/{app_name}"),
            config_filename: "app.pipecd.yaml".into(),
            description: "Simulated by wisp simulate".into(),
            labels: [("simulated-by".to_string(), CREATOR.to_string())].into(),
            ..Default::default()
        };
        // Registered before the simulated piped first reports its repositories.
        let app = wisp_services::ops::applications::add_application(
            &stores.applications,
            project,
            &piped,
            new,
            wisp_services::ops::applications::RepositoryCheck::ReportedOrNoneYet,
        )
        .await
        .map_err(|e| CliError::Failure(anyhow::anyhow!("create application {app_name}: {e}")))?;
        let app_id = app.id;
        registered.push(SimApp {
            id: app_id,
            name: app_name,
        });
    }
    Ok(RegisteredPiped {
        project: project.to_string(),
        id,
        name,
        key,
        apps: registered,
    })
}
