//! Creating (and, for tests, deleting) the table: on-demand billing, the three sparse
//! GSIs with every attribute projected, TTL on `expires_at`.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::BuildError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection, ProjectionType, ScalarAttributeType, TableDescription, TableStatus,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use wisp_store::datastore::INDEX_SLOTS;
use wisp_store::error::{Result, StoreError};

use super::errors::map_sdk_err;
use super::item::{EXPIRES_AT, GSI_NAMES, GSI_PK, GSI_SK, PK, SK};

/// How long `create_table` waits for a new table and its indexes to become ACTIVE.
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(300);

fn built<T>(what: &str, r: std::result::Result<T, BuildError>) -> Result<T> {
    r.map_err(|e| StoreError::internal_from(format!("building {what}"), e))
}

fn key_element(name: &str, key_type: KeyType) -> Result<KeySchemaElement> {
    built(
        "key schema",
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build(),
    )
}

fn string_attribute(name: &str) -> Result<AttributeDefinition> {
    built(
        "attribute definition",
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build(),
    )
}

/// Creates the Wisp table `name` if it does not exist, waits until it and its indexes
/// are ACTIVE, and turns TTL on for `expires_at`. Idempotent: an existing table with
/// the same key design is accepted (and its TTL turned on if it was off); a table with
/// another design is an `InvalidArgument` error.
pub async fn create_table(client: &Client, name: &str) -> Result<()> {
    let mut request = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attribute(PK)?)
        .attribute_definitions(string_attribute(SK)?)
        .key_schema(key_element(PK, KeyType::Hash)?)
        .key_schema(key_element(SK, KeyType::Range)?);
    for slot in 0..INDEX_SLOTS {
        request = request
            .attribute_definitions(string_attribute(GSI_PK[slot])?)
            .attribute_definitions(string_attribute(GSI_SK[slot])?)
            .global_secondary_indexes(built(
                "global secondary index",
                GlobalSecondaryIndex::builder()
                    .index_name(GSI_NAMES[slot])
                    .key_schema(key_element(GSI_PK[slot], KeyType::Hash)?)
                    .key_schema(key_element(GSI_SK[slot], KeyType::Range)?)
                    .projection(
                        Projection::builder()
                            .projection_type(ProjectionType::All)
                            .build(),
                    )
                    .build(),
            )?);
    }
    match request.send().await {
        Ok(_) => tracing::info!(table = name, "created DynamoDB table"),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            tracing::debug!(table = name, "DynamoDB table already exists");
        }
        Err(e) => return Err(map_sdk_err("CreateTable", name, e)),
    }
    let table = wait_until_active(client, name).await?;
    check_design(name, &table)?;
    enable_ttl(client, name).await
}

/// Deletes table `name`; a missing table is fine. Returns without waiting for DynamoDB
/// to finish deleting it.
pub async fn delete_table(client: &Client, name: &str) -> Result<()> {
    match client.delete_table().table_name(name).send().await {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(map_sdk_err("DeleteTable", name, e)),
    }
}

async fn describe(client: &Client, name: &str) -> Result<TableDescription> {
    let out = client
        .describe_table()
        .table_name(name)
        .send()
        .await
        .map_err(|e| map_sdk_err("DescribeTable", name, e))?;
    out.table
        .ok_or_else(|| StoreError::internal(format!("DescribeTable {name}: no table in reply")))
}

async fn wait_until_active(client: &Client, name: &str) -> Result<TableDescription> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        let table = describe(client, name).await?;
        let active = table.table_status() == Some(&TableStatus::Active)
            && table
                .global_secondary_indexes()
                .iter()
                .all(|gsi| gsi.index_status() == Some(&IndexStatus::Active));
        if active {
            return Ok(table);
        }
        if started.elapsed() > ACTIVE_TIMEOUT {
            return Err(StoreError::unavailable(format!(
                "DynamoDB table {name} not ACTIVE after {}s (status {:?})",
                ACTIVE_TIMEOUT.as_secs(),
                table.table_status()
            )));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

fn key_names(elements: &[KeySchemaElement]) -> (Option<&str>, Option<&str>) {
    let find = |t: KeyType| {
        elements
            .iter()
            .find(|e| *e.key_type() == t)
            .map(|e| e.attribute_name())
    };
    (find(KeyType::Hash), find(KeyType::Range))
}

/// An existing table must have Wisp's keys and indexes, or records would not fit.
fn check_design(name: &str, table: &TableDescription) -> Result<()> {
    let wrong = |what: String| {
        Err(StoreError::InvalidArgument(format!(
            "DynamoDB table {name} exists with another design: {what}"
        )))
    };
    if key_names(table.key_schema()) != (Some(PK), Some(SK)) {
        return wrong(format!("table key {:?}", key_names(table.key_schema())));
    }
    for slot in 0..INDEX_SLOTS {
        let Some(gsi) = table
            .global_secondary_indexes()
            .iter()
            .find(|g| g.index_name() == Some(GSI_NAMES[slot]))
        else {
            return wrong(format!("no index {}", GSI_NAMES[slot]));
        };
        if key_names(gsi.key_schema()) != (Some(GSI_PK[slot]), Some(GSI_SK[slot])) {
            return wrong(format!("index {} keys", GSI_NAMES[slot]));
        }
        let projection = gsi.projection().and_then(|p| p.projection_type());
        if projection != Some(&ProjectionType::All) {
            return wrong(format!("index {} projects {projection:?}", GSI_NAMES[slot]));
        }
    }
    Ok(())
}

async fn enable_ttl(client: &Client, name: &str) -> Result<()> {
    let current = client
        .describe_time_to_live()
        .table_name(name)
        .send()
        .await
        .map_err(|e| map_sdk_err("DescribeTimeToLive", name, e))?;
    if let Some(ttl) = current.time_to_live_description() {
        let on = matches!(
            ttl.time_to_live_status(),
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        );
        match (on, ttl.attribute_name()) {
            (true, Some(EXPIRES_AT)) => return Ok(()),
            (true, other) => {
                return Err(StoreError::InvalidArgument(format!(
                    "DynamoDB table {name} has TTL on {other:?}, not {EXPIRES_AT}"
                )));
            }
            (false, _) => {}
        }
    }
    let spec = built(
        "TTL specification",
        TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(EXPIRES_AT)
            .build(),
    )?;
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(spec)
        .send()
        .await
        .map_err(|e| map_sdk_err("UpdateTimeToLive", name, e))?;
    tracing::info!(table = name, "enabled TTL on {EXPIRES_AT}");
    Ok(())
}
