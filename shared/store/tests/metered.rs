//! The per-request store clock (`metered::time_store_waits`), which the Lambda adapter
//! logs as the part of an invocation spent awaiting the stores: datastore operations
//! awaited in the request count, the in-process cache does not, and operations outside a
//! timed request run as before.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use wisp_store::{Kind, MemoryCache, StoreError, metered};
use wisp_store_embedded::SqliteDatastore;

#[tokio::test]
async fn a_request_adds_up_the_time_it_awaits_the_datastore() {
    let datastore = metered::datastore(
        Arc::new(SqliteDatastore::open_in_memory().expect("open")),
        "sqlite",
    );
    let cache = metered::cache(Arc::new(MemoryCache::new(16, 1 << 20)), "memory");

    let (put, waited) = metered::time_store_waits(cache.put("key", b"value".to_vec(), None)).await;
    put.expect("put");
    assert_eq!(
        waited,
        Duration::ZERO,
        "the in-process cache is the handler's own time"
    );

    let (got, waited) = metered::time_store_waits(async {
        let first = datastore.get(Kind::Project, "missing").await;
        let second = datastore.get(Kind::Project, "missing").await;
        (first, second)
    })
    .await;
    assert!(matches!(got.0, Err(StoreError::NotFound(_))), "{:?}", got.0);
    assert!(matches!(got.1, Err(StoreError::NotFound(_))), "{:?}", got.1);
    assert!(waited > Duration::ZERO, "two datastore reads were awaited");

    // Outside a timed request (jobs, `wisp serve`) the store works as before.
    let outside = datastore.get(Kind::Project, "missing").await;
    assert!(
        matches!(outside, Err(StoreError::NotFound(_))),
        "{outside:?}"
    );
}
