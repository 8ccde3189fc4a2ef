//! `wisp aws init`: creates the DynamoDB table and the S3 bucket a config names, on the
//! endpoint and region it names (DynamoDB Local and moto_server for local development,
//! or a real account). Idempotent: what exists already is checked and left alone.

use clap::Subcommand;
use serde_json::json;
use wisp_app::stores::InitStep;
use wisp_app::{KeySource, sources};
use wisp_store_aws::open::InitStep as AwsStep;

use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum AwsCommand {
    /// Create the DynamoDB table (with its indexes and TTL) and the S3 bucket that the
    /// config names, unless they exist; check that a Redis cache answers. Prints what it
    /// did.
    Init {
        #[command(flatten)]
        stores: StoreArgs,
        /// Print the steps as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cmd: AwsCommand) -> Result<(), CliError> {
    match cmd {
        AwsCommand::Init { stores, json } => init(&stores, json).await,
    }
}

async fn init(args: &StoreArgs, json: bool) -> Result<(), CliError> {
    if !args.has_config() {
        return Err(CliError::Usage(
            "wisp aws init needs --config FILE or --config-secret NAME \
             (a config with a DYNAMODB datastore and/or an S3 filestore)"
                .into(),
        ));
    }
    let config = sources::load(&args.sources(KeySource::None)).await?.config;
    let steps = wisp_app::stores::init_aws(&config).await?;
    if json {
        let steps: Vec<serde_json::Value> = steps.iter().map(step_json).collect();
        println!("{}", json!({ "steps": steps }));
    } else {
        for step in &steps {
            println!("{step}");
        }
    }
    Ok(())
}

fn step_json(step: &InitStep) -> serde_json::Value {
    match step {
        InitStep::Aws(AwsStep::Table {
            table,
            endpoint,
            created,
        }) => {
            json!({"kind": "dynamodb-table", "name": table, "endpoint": endpoint, "created": created})
        }
        InitStep::Aws(AwsStep::Bucket {
            bucket,
            endpoint,
            created,
        }) => {
            json!({"kind": "s3-bucket", "name": bucket, "endpoint": endpoint, "created": created})
        }
        InitStep::Redis {
            address,
            reachable,
            found,
        } => {
            let mut step = json!({"kind": "redis", "address": address, "reachable": reachable});
            if let Some(found) = found {
                step["elasticache"] = json!({
                    "id": found.cache_id,
                    "serverless": found.serverless,
                    "endpoint": format!("{}:{}", found.address, found.port),
                    "tls": found.tls,
                    "auth": found.auth,
                    "status": found.status,
                });
            }
            step
        }
    }
}
