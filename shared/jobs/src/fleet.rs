//! The fleet at a glance, for the metrics: pipeds registered and connected per project and
//! version, and deployments not yet completed per project and status. A piped counts as
//! connected by the console's rule (a stat within the last 2 minutes).
//!
//! It reads every project's pipeds and their open deployments (index reads, one stat per
//! piped, from the cache first), so callers measure at most once a minute
//! ([`MEASURE_EVERY`]), never per request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt as _;

use wisp_proto::model::DeploymentStatus;
use wisp_store::StoreError;
use wisp_store::collection::now_unix;
use wisp_store::entities::{pk, slot};
use wisp_store::pipedstat::PipedStatStore;
use wisp_store::stores::Stores;
use wisp_telemetry::PipedMetrics;

/// How often the fleet is measured at most.
pub const MEASURE_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PipedCounts {
    pub registered: u64,
    pub connected: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fleet {
    /// (project, version as the piped reported it; empty before its first report).
    pub pipeds: BTreeMap<(String, String), PipedCounts>,
    /// (project, status name as upstream spells it) → deployments not completed
    /// ([`Scope::Everything`]).
    pub open_deployments: BTreeMap<(String, &'static str), u64>,
    /// What the connected pipeds reported ([`Scope::Everything`]; at most
    /// [`wisp_telemetry::PIPED_METRICS_MAX_BYTES`] in all, and
    /// [`wisp_telemetry::PIPED_METRICS_MAX_BYTES_PER_PROJECT`] per project).
    pub piped_metrics: Vec<PipedMetrics>,
}

/// What a measurement covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// Pipeds registered and connected (what the Lambda functions' metrics record).
    #[default]
    Pipeds,
    /// Also the open deployments and the connected pipeds' own metrics (`wisp serve`'s
    /// `/metrics`).
    Everything,
}

/// Measures the fleet of the datastore's projects and `config_projects`, as far as
/// `scope` says. Disabled pipeds are left out.
pub async fn measure(
    stores: &Stores,
    config_projects: &[String],
    scope: Scope,
) -> Result<Fleet, StoreError> {
    let everything = scope == Scope::Everything;
    let projects = crate::all_projects(stores, config_projects).await?;
    let now = now_unix();
    let mut fleet = Fleet::default();
    let mut kept_bytes = 0usize;
    for project in projects {
        let mut kept_in_project = 0usize;
        let enabled = |p: &wisp_proto::model::Piped| !p.disabled;
        let pipeds = stores
            .pipeds
            .list_all(slot::PIPED_BY_PROJECT, project.clone(), Some(&enabled))
            .await?;
        // Each piped's reads are independent: MEASURE_CONCURRENCY of them at a time, so
        // that a large fleet on a remote store is measured in seconds, not one round trip
        // after another. `buffered` keeps the pipeds' order, so the byte caps below leave
        // out the same pipeds from one measurement to the next.
        let mut readings = futures::stream::iter(pipeds)
            .map(|piped| read_piped(stores, &project, piped, now, everything))
            .buffered(MEASURE_CONCURRENCY);
        while let Some(reading) = readings.next().await {
            let PipedReading { piped, stat, open } = reading?;
            let connected = stat.is_some();
            if let Some(stat) = stat.filter(|s| {
                everything
                    && !s.metrics.is_empty()
                    && wisp_telemetry::piped_metrics_fit(
                        kept_bytes,
                        kept_in_project,
                        s.metrics.len(),
                    )
            }) {
                kept_bytes += stat.metrics.len();
                kept_in_project += stat.metrics.len();
                fleet.piped_metrics.push(PipedMetrics {
                    project_id: project.clone(),
                    piped_id: piped.id.clone(),
                    text: stat.metrics,
                });
            }
            let counts = fleet
                .pipeds
                .entry((project.clone(), piped.version.clone()))
                .or_default();
            counts.registered += 1;
            counts.connected += u64::from(connected);
            for deployment in open {
                let status = DeploymentStatus::try_from(deployment.status)
                    .map_or("UNKNOWN", |s| s.as_str_name());
                *fleet
                    .open_deployments
                    .entry((project.clone(), status))
                    .or_default() += 1;
            }
        }
    }
    Ok(fleet)
}

/// Store reads of one piped a measurement makes at once, per project.
const MEASURE_CONCURRENCY: usize = 16;

/// What one piped's reads found: its stat if it is connected, its open deployments
/// ([`Scope::Everything`] only).
struct PipedReading {
    piped: wisp_proto::model::Piped,
    stat: Option<wisp_proto::model::PipedStat>,
    open: Vec<wisp_proto::model::Deployment>,
}

async fn read_piped(
    stores: &Stores,
    project: &str,
    piped: wisp_proto::model::Piped,
    now: i64,
    everything: bool,
) -> Result<PipedReading, StoreError> {
    // An unreadable stat counts as not connected; the measurement goes on.
    let stat = match stores.piped_stats.get(&piped.id).await {
        Ok(Some(stat)) if PipedStatStore::is_online(&stat, now) => Some(stat),
        _ => None,
    };
    let open = if everything {
        stores
            .deployments
            .list_all(
                slot::DEPLOYMENT_OPEN_BY_PIPED,
                pk::project_piped(project, &piped.id),
                None,
            )
            .await?
    } else {
        Vec::new()
    };
    Ok(PipedReading { piped, stat, open })
}

/// The fleet's gauges in the metrics (`wisp_pipeds_registered`, `wisp_pipeds_connected`,
/// `wisp_deployments_open`), measured at most once per [`MEASURE_EVERY`]. Label sets
/// that were measured before and are gone now (a piped upgraded, a deployment completed)
/// are set to zero.
#[derive(Debug, Default)]
pub struct FleetMetrics {
    state: Mutex<State>,
    scope: Scope,
}

#[derive(Debug, Default)]
struct State {
    last: Option<Instant>,
    piped_metrics: Vec<PipedMetrics>,
    pipeds: BTreeSet<(String, String)>,
    open_deployments: BTreeSet<(String, &'static str)>,
}

impl FleetMetrics {
    /// Measures of `scope`.
    pub fn new(scope: Scope) -> Self {
        FleetMetrics {
            scope,
            ..Default::default()
        }
    }

    /// The connected pipeds' own metrics as last measured.
    pub fn piped_metrics(&self) -> Vec<PipedMetrics> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.piped_metrics.clone()
    }

    /// Whether it is time to measure again; if so, the time is taken.
    fn due(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.last {
            Some(at) if at.elapsed() < MEASURE_EVERY => false,
            _ => {
                state.last = Some(Instant::now());
                true
            }
        }
    }

    /// Measures the fleet and records it, unless it was measured within the last
    /// [`MEASURE_EVERY`].
    pub async fn record(&self, stores: &Stores, config_projects: &[String]) {
        if !self.due() {
            return;
        }
        let fleet = match measure(stores, config_projects, self.scope).await {
            Ok(fleet) => fleet,
            Err(e) => {
                tracing::warn!(error = %wisp_telemetry::chain(&e), "cannot measure the fleet for the metrics");
                return;
            }
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for gone in state
            .pipeds
            .difference(&fleet.pipeds.keys().cloned().collect())
        {
            wisp_telemetry::record_pipeds(&gone.0, &gone.1, 0, 0);
        }
        for ((project, version), counts) in &fleet.pipeds {
            wisp_telemetry::record_pipeds(project, version, counts.registered, counts.connected);
        }
        let open: BTreeSet<_> = fleet.open_deployments.keys().cloned().collect();
        for (project, status) in state.open_deployments.difference(&open) {
            wisp_telemetry::record_open_deployments(project, status, 0);
        }
        for ((project, status), n) in &fleet.open_deployments {
            wisp_telemetry::record_open_deployments(project, status, *n);
        }
        wisp_telemetry::record_pipeds_connected_total(
            fleet.pipeds.values().map(|c| c.connected).sum(),
        );
        state.pipeds = fleet.pipeds.into_keys().collect();
        state.piped_metrics = fleet.piped_metrics;
        state.open_deployments = open;
    }
}
