//! Many unrelated writers on one SQLite datastore at once, as a fleet's
//! ReportApplicationSyncState calls are (issue 34.3): each writer updates its own
//! application record (a read, then a versioned put) at a fixed pace; prints the writes
//! a second, the latency of a put (p50/p99/max) and the process's CPU per write.
//!
//! ```sh
//! cargo run --release -p wisp-store-embedded --example write_burst -- [WRITERS] [SECS] [PER_WRITER_HZ]
//! ```
//! (defaults 2000 writers, 20 s, 1 write a second each: 2,000 writes/s offered).

use std::time::{Duration, Instant};

use wisp_store::datastore::{Datastore, INDEX_SLOTS, IndexKey, Kind, Record};
use wisp_store_embedded::sqlite::SqliteDatastore;

fn arg(n: usize, default: f64) -> f64 {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of this process, in seconds.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of the whole line are 12 and 13 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn record(i: usize, payload: &[u8]) -> Record {
    let mut indexes: [Option<IndexKey>; INDEX_SLOTS] = Default::default();
    indexes[0] = Some(IndexKey::new(
        format!("bench#piped-{}", i / 10),
        format!("app-{i:06}"),
    ));
    Record {
        id: format!("app-{i:06}"),
        project_id: "bench".into(),
        version: 0,
        data: payload.to_vec(),
        indexes,
        expires_at: None,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let writers = arg(1, 2000.0) as usize;
    let secs = arg(2, 20.0);
    let hz = arg(3, 1.0);
    let dir = tempfile::tempdir()?;
    let ds = SqliteDatastore::open(dir.path().join("bench.db"))?;
    let payload = vec![7u8; 600];
    for i in 0..writers {
        ds.create(Kind::Application, record(i, &payload)).await?;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Duration, bool)>();
    let start = Instant::now();
    let cpu0 = cpu_secs();
    let end = start + Duration::from_secs_f64(secs);
    let period = Duration::from_secs_f64(1.0 / hz);
    for i in 0..writers {
        let (ds, tx, payload) = (ds.clone(), tx.clone(), payload.clone());
        tokio::spawn(async move {
            // Spread over the first period, as a fleet's pipeds are.
            let offset = period.mul_f64(i as f64 / writers as f64);
            let mut tick = tokio::time::interval_at((start + offset).into(), period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n = 0u8;
            loop {
                tick.tick().await;
                if Instant::now() >= end {
                    return;
                }
                let began = Instant::now();
                let ok = match ds.get(Kind::Application, &format!("app-{i:06}")).await {
                    Ok(mut r) => {
                        n = n.wrapping_add(1);
                        let mut data = payload.clone();
                        data[0] = n;
                        r.data = data;
                        let v = r.version;
                        ds.put(Kind::Application, r, v).await.is_ok()
                    }
                    Err(_) => false,
                };
                let _ = tx.send((began.elapsed(), ok));
            }
        });
    }
    drop(tx);
    let mut lat = Vec::new();
    let mut failed = 0u64;
    while let Some((d, ok)) = rx.recv().await {
        lat.push(d);
        failed += u64::from(!ok);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu0;
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{writers} writers × {hz}/s for {secs} s: {} writes ({:.0}/s), {failed} failed; \
         read+put p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; CPU {:.0} µs per write ({:.2} cores)",
        lat.len(),
        lat.len() as f64 / elapsed,
        q(0.50),
        q(0.99),
        q(1.0),
        cpu / lat.len().max(1) as f64 * 1e6,
        cpu / elapsed,
    );
    Ok(())
}
