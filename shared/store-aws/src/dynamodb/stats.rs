//! Counting DynamoDB requests and consumed capacity at the client.
//!
//! An SDK interceptor counts every HTTP request the client sends (so SDK retries count),
//! by operation, from the `X-Amz-Target` header (`DynamoDB_20120810.<Operation>`). The
//! datastore adds the capacity units DynamoDB reports for each successful request
//! (`ReturnConsumedCapacity=TOTAL`). A request refused by a condition check is billed
//! like a write but its error response carries no capacity figure, so it is counted in
//! `requests` and `conditional_failures` and not in `write_units`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::types::ConsumedCapacity;

/// The operations counted one by one; anything else is counted under `Other`.
pub const OPERATIONS: [&str; 10] = [
    "GetItem",
    "PutItem",
    "DeleteItem",
    "UpdateItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
    "DescribeTable",
    "Other",
];

const OTHER: usize = OPERATIONS.len() - 1;

/// Capacity units are multiples of 0.5; they are kept in thousandths to stay integral.
const MILLI: f64 = 1000.0;

#[derive(Debug, Default)]
struct OpCounters {
    requests: AtomicU64,
    read_milli_units: AtomicU64,
    write_milli_units: AtomicU64,
    conditional_failures: AtomicU64,
}

/// Live counters shared by a datastore and the interceptor on its client.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    ops: [OpCounters; OPERATIONS.len()],
}

fn op_index(operation: &str) -> usize {
    OPERATIONS[..OTHER]
        .iter()
        .position(|op| *op == operation)
        .unwrap_or(OTHER)
}

fn to_milli(units: f64) -> u64 {
    if units.is_finite() && units > 0.0 {
        (units * MILLI).round() as u64
    } else {
        0
    }
}

impl Counters {
    pub(crate) fn count_request(&self, operation: &str) {
        self.ops[op_index(operation)]
            .requests
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_conditional_failure(&self, operation: &str) {
        self.ops[op_index(operation)]
            .conditional_failures
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Adds what DynamoDB reported for one response of `operation`.
    pub(crate) fn add_capacity(&self, operation: &str, capacity: Option<&ConsumedCapacity>) {
        let Some(capacity) = capacity else { return };
        let op = &self.ops[op_index(operation)];
        let is_write = matches!(
            operation,
            "PutItem" | "DeleteItem" | "UpdateItem" | "BatchWriteItem"
        );
        let (read, write) = match (capacity.read_capacity_units, capacity.write_capacity_units) {
            (None, None) => {
                let total = capacity.capacity_units.unwrap_or(0.0);
                if is_write { (0.0, total) } else { (total, 0.0) }
            }
            (read, write) => (read.unwrap_or(0.0), write.unwrap_or(0.0)),
        };
        wisp_telemetry::record_dynamodb_capacity(OPERATIONS[op_index(operation)], read, write);
        op.read_milli_units
            .fetch_add(to_milli(read), Ordering::Relaxed);
        op.write_milli_units
            .fetch_add(to_milli(write), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RequestStats {
        let ops = OPERATIONS
            .iter()
            .zip(&self.ops)
            .map(|(name, c)| {
                (
                    *name,
                    OpStats {
                        requests: c.requests.load(Ordering::Relaxed),
                        read_units: c.read_milli_units.load(Ordering::Relaxed) as f64 / MILLI,
                        write_units: c.write_milli_units.load(Ordering::Relaxed) as f64 / MILLI,
                        conditional_failures: c.conditional_failures.load(Ordering::Relaxed),
                    },
                )
            })
            .filter(|(_, s)| *s != OpStats::default())
            .collect();
        RequestStats { ops }
    }
}

/// What one operation cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpStats {
    /// HTTP requests sent (SDK retries included).
    pub requests: u64,
    /// Read capacity units DynamoDB reported consumed.
    pub read_units: f64,
    /// Write capacity units DynamoDB reported consumed (GSI writes included).
    pub write_units: f64,
    /// Writes refused by their condition (billed, but reported without capacity).
    pub conditional_failures: u64,
}

impl OpStats {
    fn minus(&self, earlier: &OpStats) -> OpStats {
        OpStats {
            requests: self.requests.saturating_sub(earlier.requests),
            read_units: (self.read_units - earlier.read_units).max(0.0),
            write_units: (self.write_units - earlier.write_units).max(0.0),
            conditional_failures: self
                .conditional_failures
                .saturating_sub(earlier.conditional_failures),
        }
    }
}

/// A snapshot of the counters, by operation name (`GetItem`, `Query`, ...); operations
/// never used are absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestStats {
    pub ops: BTreeMap<&'static str, OpStats>,
}

impl RequestStats {
    /// The figures of one operation (zero if never used).
    pub fn op(&self, operation: &str) -> OpStats {
        self.ops.get(operation).copied().unwrap_or_default()
    }

    /// HTTP requests of one operation.
    pub fn requests(&self, operation: &str) -> u64 {
        self.op(operation).requests
    }

    /// HTTP requests of all operations.
    pub fn total_requests(&self) -> u64 {
        self.ops.values().map(|s| s.requests).sum()
    }

    pub fn total_read_units(&self) -> f64 {
        self.ops.values().map(|s| s.read_units).sum()
    }

    pub fn total_write_units(&self) -> f64 {
        self.ops.values().map(|s| s.write_units).sum()
    }

    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &RequestStats) -> RequestStats {
        let ops = self
            .ops
            .iter()
            .map(|(name, s)| (*name, s.minus(&earlier.op(name))))
            .filter(|(_, s)| *s != OpStats::default())
            .collect();
        RequestStats { ops }
    }
}

/// The SDK interceptor that counts requests as they are sent.
#[derive(Debug, Clone)]
pub(crate) struct CountingInterceptor {
    pub(crate) counters: Arc<Counters>,
}

impl Intercept for CountingInterceptor {
    fn name(&self) -> &'static str {
        "WispDynamoDbRequestCounter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = context
            .request()
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit_once('.'))
            .map_or("Other", |(_, op)| op);
        self.counters.count_request(operation);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_split_by_operation_kind() {
        let c = Counters::default();
        c.count_request("Query");
        c.count_request("Query");
        c.count_request("ListTables");
        c.add_capacity(
            "Query",
            Some(&ConsumedCapacity::builder().capacity_units(0.5).build()),
        );
        c.add_capacity(
            "PutItem",
            Some(&ConsumedCapacity::builder().capacity_units(3.0).build()),
        );
        c.count_conditional_failure("PutItem");
        let s = c.snapshot();
        assert_eq!(s.requests("Query"), 2);
        assert_eq!(s.requests("Other"), 1);
        assert_eq!(s.op("Query").read_units, 0.5);
        assert_eq!(s.op("PutItem").write_units, 3.0);
        assert_eq!(s.op("PutItem").conditional_failures, 1);
        assert_eq!(s.total_requests(), 3);

        let before = s.clone();
        c.count_request("GetItem");
        let delta = c.snapshot().since(&before);
        assert_eq!(delta.total_requests(), 1);
        assert_eq!(delta.requests("GetItem"), 1);
        assert!(!delta.ops.contains_key("Query"));
    }
}
