//! `Datastore` on one DynamoDB table (single-table design).
//!
//! Table key `pk` = kind, `sk` = record id, so `get` is a GetItem and `scan(kind)` a
//! Query on one partition of the table, in id order. Index slot N is the sparse GSI
//! `gsiN` on `gNpk` = `<kind>#<pk>`, `gNsk` = `<sk>\0<id>`, so a query is one Query on
//! one GSI partition in `(sk, id)` order. Writes are single conditional PutItem /
//! DeleteItem requests on the `version` attribute; `expires_at` is the TTL attribute,
//! and an expired record that TTL has not deleted yet is treated as absent everywhere.
//! The crate's `DYNAMODB.md` describes the design and maps every access pattern.
//!
//! Query pages stop at `page_size` records and at DynamoDB's 1 MB per request, and
//! `Limit` counts expired items the filter then drops: one `query` call keeps reading
//! (at most [`MAX_READS_PER_PAGE`] requests once it holds a record) so that a page
//! saying `more` is never empty. Cursors are the `(sk, id)` of the last record, turned
//! back into an `ExclusiveStartKey`, so they survive the record's deletion.
//!
//! GSIs are eventually consistent in DynamoDB (DynamoDB Local updates them
//! synchronously): a query right after a write may miss it or see the old index entry
//! for a short while; `get` is a strongly consistent read.

mod errors;
mod item;
mod stats;
mod table;

use std::sync::Arc;

use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure};
use wisp_store::cursor::{self, QueryCursor, ScanCursor};
use wisp_store::datastore::{Datastore, INDEX_SLOTS, Kind, Page, Query, Record};
use wisp_store::error::{Result, StoreError};

pub use aws_sdk_dynamodb as sdk;
pub use item::MAX_ITEM_BYTES;
pub use stats::{OPERATIONS, OpStats, RequestStats};
pub use table::{create_table, delete_table};

use errors::map_sdk_err;
use item::{
    EXPIRES_AT, GSI_NAMES, GSI_PK, GSI_SK, Item, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, PK,
    SEP, SK, VERSION,
};
use stats::{Counters, CountingInterceptor};

/// Pages are capped so one call cannot read an unbounded range into memory.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Requests one `query`/`scan` call makes at most after the first one that found a
/// record (more than one request is needed only when expired items or the 1 MB limit
/// cut a response short).
pub const MAX_READS_PER_PAGE: u32 = 8;

/// Keeps expired items (not yet deleted by TTL) out of query results.
const LIVE_FILTER: &str = "attribute_not_exists(#exp) OR #exp > :now";

/// A cheaply cloneable handle on the Wisp table; clones share the request counters.
#[derive(Clone)]
pub struct DynamoDbDatastore {
    client: Client,
    table: Arc<str>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for DynamoDbDatastore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoDbDatastore")
            .field("table", &self.table)
            .finish()
    }
}

/// An SDK client from the default credential and region chain, with an optional region
/// and endpoint override (DynamoDB Local). For `create_table` and tests.
pub async fn client_from_config(region: Option<String>, endpoint: Option<String>) -> Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = region {
        loader = loader.region(Region::new(region));
    }
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    Client::new(&loader.load().await)
}

use wisp_store::collection::now_unix;

fn check_page_size(page_size: usize) -> Result<usize> {
    if page_size == 0 {
        return Err(StoreError::InvalidArgument(
            "page size must be at least 1".into(),
        ));
    }
    Ok(page_size.min(MAX_PAGE_SIZE))
}

fn not_found(kind: Kind, id: &str) -> StoreError {
    StoreError::NotFound(format!("{kind} {id}"))
}

impl DynamoDbDatastore {
    /// The datastore on table `table` through `client` (whose configuration is reused,
    /// plus an interceptor that counts requests).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        let counters = Arc::new(Counters::default());
        let config = client
            .config()
            .to_builder()
            .interceptor(CountingInterceptor {
                counters: counters.clone(),
            })
            .build();
        DynamoDbDatastore {
            client: Client::from_conf(config),
            table: Arc::from(table.into()),
            counters,
        }
    }

    /// [`client_from_config`] + [`DynamoDbDatastore::new`].
    pub async fn from_config(
        region: Option<String>,
        endpoint: Option<String>,
        table: impl Into<String>,
    ) -> Self {
        Self::new(client_from_config(region, endpoint).await, table)
    }

    /// The client requests go through (it counts them).
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Requests sent and capacity consumed so far, by operation; subtract two snapshots
    /// ([`RequestStats::since`]) to measure one call.
    pub fn stats(&self) -> RequestStats {
        self.counters.snapshot()
    }

    /// One DescribeTable: opens the connection (TLS handshake) and checks the table is
    /// there. Call it at startup (Lambda init), not on the first request.
    pub async fn warm_up(&self) -> Result<()> {
        self.client
            .describe_table()
            .table_name(self.table())
            .send()
            .await
            .map_err(|e| map_sdk_err("DescribeTable", self.table(), e))?;
        Ok(())
    }

    /// Why a conditional write on `(kind, id)` was refused, from the item DynamoDB
    /// returned with the failure (`None`: there was no item).
    fn refused(
        &self,
        operation: &str,
        kind: Kind,
        id: &str,
        expected_version: u64,
        old: Option<&Item>,
        now: i64,
    ) -> StoreError {
        self.counters.count_conditional_failure(operation);
        let Some(old) = old else {
            return not_found(kind, id);
        };
        let found = match item::is_live(old, now) {
            Ok(false) => return not_found(kind, id),
            Ok(true) => item::version_of(old),
            Err(e) => Err(e),
        };
        match found {
            Ok(found) => StoreError::Conflict(format!(
                "{kind} {id}: expected version {expected_version}, found {found}"
            )),
            Err(e) => item::corrupt(kind, id, e),
        }
    }

    /// A version the stored record cannot have (`u64::MAX`: its successor does not fit):
    /// NotFound or Conflict, as a mismatching write would report.
    async fn impossible_version(&self, kind: Kind, id: &str, expected: u64) -> StoreError {
        match self.get(kind, id).await {
            Ok(found) => StoreError::Conflict(format!(
                "{kind} {id}: expected version {expected}, found {}",
                found.version
            )),
            Err(e) => e,
        }
    }

    /// A Query request with the settings every query and scan shares.
    fn query_request(&self) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(self.table())
            .filter_expression(LIVE_FILTER)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
    }

    /// Runs `request` from `start` until it has `page_size` live items and knows whether
    /// more follow, or the range ends, or it has made [`MAX_READS_PER_PAGE`] requests
    /// while holding at least one item. Returns the items and `more`. Before it holds
    /// one it keeps reading: only expired leftovers (TTL deletes them within days) or
    /// the 1 MB limit can make a request come back empty.
    async fn read_page(
        &self,
        request: QueryFluentBuilder,
        mut start: Option<Item>,
        page_size: usize,
        now: i64,
        what: &str,
    ) -> Result<(Vec<Item>, bool)> {
        let request = request.expression_attribute_values(":now", item::n(now));
        let mut items: Vec<Item> = Vec::new();
        // Requests made after the first one that found a live item.
        let mut reads_holding = 0u32;
        loop {
            // One item beyond the page tells whether there is more.
            let limit = i32::try_from(page_size + 1 - items.len()).unwrap_or(i32::MAX);
            let out = request
                .clone()
                .limit(limit)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| map_sdk_err("Query", what, e))?;
            self.counters.add_capacity("Query", out.consumed_capacity());
            for found in out.items.unwrap_or_default() {
                let live = item::is_live(&found, now)
                    .map_err(|e| StoreError::internal_from(format!("corrupt item in {what}"), e))?;
                if live {
                    items.push(found);
                }
            }
            if items.len() > page_size {
                items.truncate(page_size);
                return Ok((items, true));
            }
            let Some(key) = out.last_evaluated_key else {
                return Ok((items, false));
            };
            if !items.is_empty() {
                reads_holding += 1;
                if reads_holding >= MAX_READS_PER_PAGE {
                    return Ok((items, true));
                }
            }
            start = Some(key);
        }
    }
}

/// Where a query starts, given its cursor and bounds.
enum Start {
    /// From the first record of the range.
    Beginning,
    /// Strictly after this `gNsk` position.
    After(String, QueryCursor),
    /// The cursor lies past the end of the range: nothing follows.
    Done,
}

/// A query bound must be comparable with `gNsk` values: no NUL, within the key limit.
fn check_bound(name: &str, bound: &Option<String>) -> Result<()> {
    if let Some(b) = bound {
        if b.contains(SEP) {
            return Err(StoreError::InvalidArgument(format!(
                "{name} contains a NUL character"
            )));
        }
        if b.len() > MAX_SORT_KEY_BYTES {
            return Err(StoreError::InvalidArgument(format!(
                "{name} is {} bytes; at most {MAX_SORT_KEY_BYTES}",
                b.len()
            )));
        }
    }
    Ok(())
}

fn start_of(query: &Query, from: Option<&str>, to: Option<&str>) -> Result<Start> {
    let Some(cursor) = &query.after else {
        return Ok(Start::Beginning);
    };
    let cursor: QueryCursor = cursor::decode(cursor)?;
    if cursor.s.contains(SEP) || !item::possible_id(&cursor.i) {
        return Err(StoreError::InvalidCursor);
    }
    let position = item::gsi_sk(&cursor.s, &cursor.i);
    if position.len() > MAX_SORT_KEY_BYTES {
        return Err(StoreError::InvalidCursor);
    }
    // DynamoDB refuses an ExclusiveStartKey outside the key condition: settle those
    // cases here. (`position` contains NUL and the bounds do not, so never equal.)
    let below_from = from.is_some_and(|f| position.as_str() < f);
    let above_to = to.is_some_and(|t| position.as_str() > t);
    let (past_end, before_start) = if query.descending {
        (below_from, above_to)
    } else {
        (above_to, below_from)
    };
    Ok(if past_end {
        Start::Done
    } else if before_start {
        Start::Beginning
    } else {
        Start::After(position, cursor)
    })
}

#[async_trait]
impl Datastore for DynamoDbDatastore {
    async fn get(&self, kind: Kind, id: &str) -> Result<Record> {
        if !item::possible_id(id) {
            return Err(not_found(kind, id));
        }
        let out = self
            .client
            .get_item()
            .table_name(self.table())
            .set_key(Some(item::key(kind, id)))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| map_sdk_err("GetItem", &format!("{kind} {id}"), e))?;
        self.counters
            .add_capacity("GetItem", out.consumed_capacity());
        let Some(found) = out.item else {
            return Err(not_found(kind, id));
        };
        if !item::is_live(&found, now_unix()).map_err(|e| item::corrupt(kind, id, e))? {
            return Err(not_found(kind, id));
        }
        item::from_item(kind, found)
    }

    async fn create(&self, kind: Kind, record: Record) -> Result<()> {
        let id = record.id.clone();
        let new_item = item::to_item(kind, record, 1)?;
        let now = now_unix();
        // An expired record is absent: creating over it replaces it.
        let result = self
            .client
            .put_item()
            .table_name(self.table())
            .set_item(Some(new_item))
            .condition_expression("attribute_not_exists(#pk) OR #exp <= :now")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":now", item::n(now))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.counters
                    .add_capacity("PutItem", out.consumed_capacity());
                Ok(())
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(PutItemError::is_conditional_check_failed_exception) =>
            {
                self.counters.count_conditional_failure("PutItem");
                Err(StoreError::AlreadyExists(format!("{kind} {id}")))
            }
            Err(e) => Err(map_sdk_err("PutItem", &format!("{kind} {id}"), e)),
        }
    }

    async fn put(&self, kind: Kind, record: Record, expected_version: u64) -> Result<()> {
        item::check_id(&record.id)?;
        let id = record.id.clone();
        let Some(new_version) = expected_version.checked_add(1) else {
            return Err(self.impossible_version(kind, &id, expected_version).await);
        };
        let new_item = item::to_item(kind, record, new_version)?;
        let now = now_unix();
        let result = self
            .client
            .put_item()
            .table_name(self.table())
            .set_item(Some(new_item))
            .condition_expression("#v = :expected AND (attribute_not_exists(#exp) OR #exp > :now)")
            .expression_attribute_names("#v", VERSION)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":expected", item::n(expected_version))
            .expression_attribute_values(":now", item::n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.counters
                    .add_capacity("PutItem", out.consumed_capacity());
                Ok(())
            }
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    Err(self.refused("PutItem", kind, &id, expected_version, failed.item(), now))
                }
                _ => Err(map_sdk_err("PutItem", &format!("{kind} {id}"), e)),
            },
        }
    }

    async fn delete(&self, kind: Kind, id: &str, expected_version: u64) -> Result<()> {
        if !item::possible_id(id) {
            return Err(not_found(kind, id));
        }
        let now = now_unix();
        let result = self
            .client
            .delete_item()
            .table_name(self.table())
            .set_key(Some(item::key(kind, id)))
            .condition_expression("#v = :expected AND (attribute_not_exists(#exp) OR #exp > :now)")
            .expression_attribute_names("#v", VERSION)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":expected", item::n(expected_version))
            .expression_attribute_values(":now", item::n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.counters
                    .add_capacity("DeleteItem", out.consumed_capacity());
                Ok(())
            }
            Err(e) => match e.as_service_error() {
                Some(DeleteItemError::ConditionalCheckFailedException(failed)) => {
                    Err(self.refused("DeleteItem", kind, id, expected_version, failed.item(), now))
                }
                _ => Err(map_sdk_err("DeleteItem", &format!("{kind} {id}"), e)),
            },
        }
    }

    async fn query(&self, query: &Query) -> Result<Page> {
        let slot = query.slot;
        if slot >= INDEX_SLOTS {
            return Err(StoreError::InvalidArgument(format!(
                "index slot {slot} out of range (0..{INDEX_SLOTS})"
            )));
        }
        let page_size = check_page_size(query.page_size)?;
        check_bound("sk_from", &query.sk_from)?;
        check_bound("sk_to", &query.sk_to)?;
        // Every string is >= "": an empty lower bound is no bound (and DynamoDB refuses
        // empty key values). Nothing is < "".
        let from = query.sk_from.as_deref().filter(|f| !f.is_empty());
        let to = query.sk_to.as_deref();
        let start = start_of(query, from, to)?;
        let empty = matches!(start, Start::Done)
            || to == Some("")
            || matches!((from, to), (Some(f), Some(t)) if f >= t);
        let gsi_pk = item::gsi_pk(query.kind, &query.pk);
        if empty || gsi_pk.len() > MAX_PARTITION_KEY_BYTES {
            return Ok(Page::default());
        }

        // `gNsk` values contain NUL and the bounds do not, so `gNsk <= to` is `gNsk < to`
        // and one BETWEEN expresses the half-open range.
        let condition = match (from, to) {
            (None, None) => "#gpk = :gpk",
            (Some(_), None) => "#gpk = :gpk AND #gsk >= :from",
            (None, Some(_)) => "#gpk = :gpk AND #gsk < :to",
            (Some(_), Some(_)) => "#gpk = :gpk AND #gsk BETWEEN :from AND :to",
        };
        let mut request = self
            .query_request()
            .index_name(GSI_NAMES[slot])
            .key_condition_expression(condition)
            .expression_attribute_names("#gpk", GSI_PK[slot])
            .expression_attribute_values(":gpk", item::s(gsi_pk.clone()))
            .scan_index_forward(!query.descending);
        if from.is_some() || to.is_some() {
            request = request.expression_attribute_names("#gsk", GSI_SK[slot]);
        }
        if let Some(from) = from {
            request = request.expression_attribute_values(":from", item::s(from));
        }
        if let Some(to) = to {
            request = request.expression_attribute_values(":to", item::s(to));
        }
        let exclusive_start = match start {
            Start::After(position, cursor) => {
                let mut key = item::key(query.kind, &cursor.i);
                key.insert(GSI_PK[slot].to_string(), item::s(gsi_pk));
                key.insert(GSI_SK[slot].to_string(), item::s(position));
                Some(key)
            }
            Start::Beginning | Start::Done => None,
        };

        let what = format!("{} {} pk {}", query.kind, GSI_NAMES[slot], query.pk);
        let (items, more) = self
            .read_page(request, exclusive_start, page_size, now_unix(), &what)
            .await?;
        let mut records = Vec::with_capacity(items.len());
        for found in items {
            let record = item::from_item(query.kind, found)?;
            let sk = match &record.indexes[slot] {
                Some(key) if key.pk == query.pk => key.sk.clone(),
                _ => {
                    return Err(StoreError::internal(format!(
                        "{what}: record {} came back without that index key",
                        record.id
                    )));
                }
            };
            let cursor = cursor::encode(&QueryCursor {
                s: sk,
                i: record.id.clone(),
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }

    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> Result<Page> {
        let page_size = check_page_size(page_size)?;
        let after = match after {
            Some(cursor) => Some(cursor::decode::<ScanCursor>(cursor)?.i),
            None => None,
        };
        // Every id is > "": an empty cursor id is the beginning.
        let after = after.filter(|id| !id.is_empty());
        if after
            .as_ref()
            .is_some_and(|id| id.len() > MAX_SORT_KEY_BYTES)
        {
            return Err(StoreError::InvalidCursor);
        }
        // A Query on the kind's partition of the table, not a Scan: ids in byte order,
        // strongly consistent.
        let mut request = self
            .query_request()
            .consistent_read(true)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":kind", item::s(kind.as_str()));
        request = match &after {
            Some(id) => request
                .key_condition_expression("#pk = :kind AND #sk > :after")
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":after", item::s(id.clone())),
            None => request.key_condition_expression("#pk = :kind"),
        };
        let what = format!("scan {kind}");
        let (items, more) = self
            .read_page(request, None, page_size, now_unix(), &what)
            .await?;
        let mut records = Vec::with_capacity(items.len());
        for found in items {
            let record = item::from_item(kind, found)?;
            let cursor = cursor::encode(&ScanCursor {
                i: record.id.clone(),
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }
}
