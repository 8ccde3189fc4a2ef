//! A hostile caller beside the fleet: ReportStat calls that name the fleet's real piped
//! ids with made-up keys, at a steady rate. Piped ids are no secret (they sit in every
//! piped's config), so this is the cheapest attack on a control plane's credential
//! checks; the fleet's latency with and without it shows what it costs real pipeds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tonic::metadata::AsciiMetadataValue;
use wisp_proto::pipedservice::ReportStatRequest;

use crate::client::{self, Client, Target};
use crate::rng::Rng;
use crate::stats::Failure;

/// Connections the flood spreads its calls over.
const CONNECTIONS: usize = 8;

/// What the flood got back.
#[derive(Debug, Default, Clone)]
pub struct FloodOutcome {
    pub rate_per_sec: f64,
    pub calls: u64,
    /// Answers by gRPC code name (`OK` would be a broken server).
    pub answers: BTreeMap<&'static str, u64>,
}

/// Sends `rate` calls a second until `deadline`, each naming one of `victims`
/// (`(project, piped id)`, in turn) with a fresh random key.
pub async fn run(
    target: Target,
    victims: Vec<(String, String)>,
    rate: f64,
    deadline: Instant,
    call_timeout: Duration,
    seed: u64,
) -> Result<FloodOutcome, String> {
    let outcome = Arc::new(Mutex::new(FloodOutcome {
        rate_per_sec: rate,
        ..FloodOutcome::default()
    }));
    if rate <= 0.0 || victims.is_empty() {
        return Ok(take(&outcome));
    }
    // The connections' own credentials are replaced on every call.
    let clients: Vec<Client> = (0..CONNECTIONS)
        .map(|_| client::connect(&target, "PIPED-TOKEN flood,flood,flood"))
        .collect::<Result<_, _>>()?;
    let mut rng = Rng::new(seed);
    let every = Duration::from_secs_f64(1.0 / rate);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut calls = tokio::task::JoinSet::new();
    let mut n = 0usize;
    while Instant::now() < deadline {
        ticks.tick().await;
        let (project, piped) = &victims[n % victims.len()];
        let key = random_key(&mut rng);
        let mut client = clients[n % clients.len()].clone();
        n += 1;
        let Ok(authorization) =
            AsciiMetadataValue::try_from(format!("PIPED-TOKEN {project},{piped},{key}"))
        else {
            continue;
        };
        let outcome = Arc::clone(&outcome);
        calls.spawn(async move {
            let mut request = tonic::Request::new(ReportStatRequest {
                piped_stats: Vec::new(),
            });
            request
                .metadata_mut()
                .insert("authorization", authorization);
            let answer = match tokio::time::timeout(call_timeout, client.report_stat(request)).await
            {
                Ok(Ok(_)) => "OK",
                Ok(Err(status)) => Failure::Status(status.code() as i32).name(),
                Err(_) => Failure::Timeout.name(),
            };
            let mut outcome = outcome.lock().unwrap_or_else(|e| e.into_inner());
            outcome.calls += 1;
            *outcome.answers.entry(answer).or_default() += 1;
        });
        // Reap finished calls so the set stays small.
        while calls.try_join_next().is_some() {}
    }
    while calls.join_next().await.is_some() {}
    Ok(take(&outcome))
}

fn take(outcome: &Mutex<FloodOutcome>) -> FloodOutcome {
    outcome.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// 50 characters of `[a-z0-9]`, the shape of a real piped key.
fn random_key(rng: &mut Rng) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..50)
        .map(|_| {
            let i = usize::try_from(rng.next_u64() % ALPHABET.len() as u64).unwrap_or(0);
            char::from(ALPHABET[i])
        })
        .collect()
}
