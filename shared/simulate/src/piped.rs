//! One simulated piped: upstream's periodic loops (see [`super::rpc`] for the cadence and
//! where it comes from), the calls a piped makes when it starts, and deployments from
//! trigger to completion, as the classic piped's trigger, controller, scheduler and log
//! persister make them.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use prost::Message;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tonic::{Code, Status};
use wisp_proto::model::{
    self, ApplicationKind, ApplicationSyncStatus, DeploymentStatus, LogSeverity, StageStatus,
    kubernetes_resource_state::HealthStatus, kubernetes_resource_state_event,
};
use wisp_proto::pipedservice::*;

use super::client::Client;
use super::rng::Rng;
use super::rpc::{self, Rpc, STAGES};
use super::stats::{Budget, CallRecord, Failure, Phase, PipedCounters, Recorder};

/// The repository every simulated application lives in.
const REPO_ID: &str = "examples";
/// How long each stage of a simulated deployment runs.
const STAGE_TIME: Duration = Duration::from_secs(2);

/// What all simulated pipeds share.
#[derive(Debug)]
pub struct Shared {
    pub recorder: Recorder,
    pub budget: Budget,
    /// No call starts at or after this instant.
    pub deadline: Instant,
    /// A call still unanswered after this long counts as failed.
    pub call_timeout: Duration,
    /// Size of the metrics payload of ReportStat.
    pub stat_bytes: usize,
}

/// An application registered for a simulated piped.
#[derive(Debug, Clone)]
pub struct SimApp {
    pub id: String,
    pub name: String,
}

/// Settings of one simulated piped.
#[derive(Debug, Clone)]
pub struct PipedSpec {
    pub project: String,
    pub id: String,
    pub name: String,
    pub apps: Vec<SimApp>,
    /// When it starts, after the run's start.
    pub start_after: Duration,
    /// Deployments per second (a Poisson process).
    pub deploy_rate: f64,
    /// At most this many deployments are triggered.
    pub max_deployments: u64,
    pub seed: u64,
}

#[derive(Debug, Default)]
struct AppState {
    /// A deployment of it is on its way.
    busy: bool,
    /// Its sync state differs from the last one reported (all do before the first check).
    sync_unreported: bool,
    /// Its first sync state report was made (later ones belong to the steady state).
    sync_reported_once: bool,
    /// A finished deployment changed its resources: events to flush.
    events_pending: bool,
    /// The controller looked up its most recent successful deployment already.
    known_success: bool,
    /// The commit it runs.
    commit: String,
    /// When its resources last changed (unix seconds): their created/updated times in
    /// the snapshots, which stay the same between changes as a cluster's do.
    changed_at: i64,
}

#[derive(Debug, Default)]
struct State {
    apps: Vec<AppState>,
    /// Deployments this piped created and has not started to handle.
    created: HashSet<String>,
    triggered: u64,
    stat_reports: u64,
    running: Vec<JoinHandle<()>>,
}

pub struct SimPiped {
    spec: PipedSpec,
    client: Client,
    shared: Arc<Shared>,
    pub counters: Arc<PipedCounters>,
    state: Mutex<State>,
    rng: Mutex<Rng>,
}

/// Why a call returned nothing.
#[derive(Debug)]
enum Skip {
    /// The deadline passed or the budget is spent: the piped stops.
    Stopped,
    /// The call failed (already recorded).
    Failed,
}

impl SimPiped {
    pub fn new(spec: PipedSpec, client: Client, shared: Arc<Shared>) -> Arc<SimPiped> {
        let state = State {
            apps: spec
                .apps
                .iter()
                .map(|_| AppState {
                    sync_unreported: true,
                    commit: "0000000000000000000000000000000000000000".into(),
                    changed_at: unix_now(),
                    ..AppState::default()
                })
                .collect(),
            ..State::default()
        };
        Arc::new(SimPiped {
            rng: Mutex::new(Rng::new(spec.seed)),
            spec,
            client,
            shared,
            counters: Arc::new(PipedCounters::default()),
            state: Mutex::new(state),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn random(&self) -> f64 {
        match self.rng.lock() {
            Ok(mut r) => r.next_f64(),
            Err(poisoned) => poisoned.into_inner().next_f64(),
        }
    }

    fn stopped(&self) -> bool {
        Instant::now() >= self.shared.deadline
    }

    /// Runs the piped until the deadline, then waits for its deployments' last calls.
    pub async fn run(self: Arc<Self>, run_start: Instant) {
        tokio::time::sleep_until(run_start + self.spec.start_after).await;
        if self.stopped() {
            return;
        }
        let started = Instant::now();
        self.startup().await;
        tokio::join!(
            self.every(rpc::COMMAND_POLL, started, |p| p.poll_commands()),
            self.every(rpc::STATS, started, |p| p.report_stat()),
            self.every(rpc::APPLICATION_POLL, started, |p| p.list_applications()),
            self.every(rpc::EVENT_POLL, started, |p| p.list_events()),
            self.every(rpc::EVENT_WATCHER, started, |p| p.list_applications()),
            self.every(rpc::DRIFT_CHECK, started, |p| p.check_drift()),
            self.every(rpc::LIVE_STATE_SNAPSHOT, started, |p| p
                .flush_snapshots(Phase::Steady)),
            self.every(rpc::LIVE_STATE_EVENTS, started, |p| p.flush_events()),
            self.every(rpc::DEPLOYMENT_POLL, started, |p| p.poll_deployments()),
            self.clone().trigger_loop(),
        );
        let running = std::mem::take(&mut self.state().running);
        for handle in running {
            let _ = handle.await;
        }
    }

    /// Runs `tick` every `period` until the deadline, the first time at a random point of
    /// the first period. A slow tick delays the next one (as a Go ticker drops ticks).
    async fn every<'a, F, Fut>(self: &'a Arc<Self>, period: Duration, started: Instant, mut tick: F)
    where
        F: FnMut(&'a Arc<Self>) -> Fut,
        Fut: Future<Output = ()> + 'a,
    {
        let phase = period.mul_f64(self.random());
        let mut interval = tokio::time::interval_at(started + phase, period);
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = interval.tick() => {}
                _ = tokio::time::sleep_until(self.shared.deadline) => return,
            }
            if self.stopped() {
                return;
            }
            tick(self).await;
        }
    }

    /// One call, counted against the budget, timed and recorded. `allowed` is a status that
    /// is an answer, not a failure, for this call (e.g. NotFound for "no deployment yet").
    ///
    /// A call turned away with `UNAVAILABLE` (a server shedding load) is made again after
    /// upstream's backoff ([`rpc::retry_wait`]), as long as the retry starts within
    /// [`rpc::RETRY_WINDOW`] of the first attempt; it counts as failed only if no attempt in
    /// that minute succeeded. Each attempt is a request of the budget; only the last one's
    /// latency and outcome are recorded, the others are counted as retried.
    async fn call<Req, Resp, F, Fut>(
        &self,
        rpc: Rpc,
        phase: Phase,
        request: Req,
        allowed: Option<Code>,
        send: F,
    ) -> Result<Option<Resp>, Skip>
    where
        Req: Message + Clone,
        Resp: Message,
        F: Fn(Client, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        if self.stopped() || !self.shared.budget.take() {
            return Err(Skip::Stopped);
        }
        let request_bytes = request.encoded_len();
        let first = Instant::now();
        let mut attempt: u32 = 0;
        let (outcome, latency) = loop {
            let started = std::time::Instant::now();
            let outcome = tokio::time::timeout(
                self.shared.call_timeout,
                send(self.client.clone(), request.clone()),
            )
            .await;
            let latency = started.elapsed();
            if let Ok(Err(status)) = &outcome
                && status.code() == Code::Unavailable
                && Some(Code::Unavailable) != allowed
            {
                attempt += 1;
                let wait = rpc::retry_wait(attempt, self.random());
                // The retry must start within the window, and is a request like any other.
                if first.elapsed() + wait <= rpc::RETRY_WINDOW && self.shared.budget.take() {
                    self.shared.recorder.record_retry(rpc);
                    tokio::time::sleep(wait).await;
                    continue;
                }
            }
            break (outcome, latency);
        };
        let (result, failure, response_bytes) = match outcome {
            Ok(Ok(response)) => {
                let response = response.into_inner();
                let n = response.encoded_len();
                (Ok(Some(response)), None, n)
            }
            Ok(Err(status)) if Some(status.code()) == allowed => (Ok(None), None, 0),
            Ok(Err(status)) => {
                tracing::debug!(rpc = rpc.name(), piped = %self.spec.name, %status, "call failed");
                (
                    Err(Skip::Failed),
                    Some(Failure::Status(status.code() as i32)),
                    0,
                )
            }
            Err(_) => (Err(Skip::Failed), Some(Failure::Timeout), 0),
        };
        self.counters.add(rpc);
        self.shared.recorder.record(&CallRecord {
            rpc,
            phase,
            latency,
            failure,
            request_bytes,
            response_bytes,
        });
        result
    }

    // -----------------------------------------------------------------------------------
    // Start
    // -----------------------------------------------------------------------------------

    /// What a piped does once when it starts: its metadata first (upstream's piped reports
    /// it before starting any component), then the first application and event syncs, the
    /// app config reporter's first report of unregistered applications (none here), and
    /// the first live-state snapshot of every application.
    async fn startup(&self) {
        let meta = ReportPipedMetaRequest {
            version: format!("wisp-simulate-{}", env!("CARGO_PKG_VERSION")),
            config: "# simulated by wisp simulate\n".into(),
            repositories: vec![model::ApplicationGitRepository {
                id: REPO_ID.into(),
                remote: "https://git.example.com/examples.git".into(),
                branch: "main".into(),
            }],
            platform_providers: vec![model::piped::PlatformProvider {
                name: "kubernetes-default".into(),
                r#type: "KUBERNETES".into(),
            }],
            secret_encryption: Some(model::piped::SecretEncryption {
                r#type: "NONE".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        if self
            .call(
                Rpc::ReportPipedMeta,
                Phase::Startup,
                meta,
                None,
                |mut c, r| async move { c.report_piped_meta(r).await },
            )
            .await
            .is_err()
        {
            // Upstream retries and refuses to start without it; keep going, so that the
            // failure is visible in the counts rather than as silence.
            tracing::debug!(piped = %self.spec.name, "ReportPipedMeta failed");
        }
        let _ = self
            .call(
                Rpc::ListApplications,
                Phase::Startup,
                ListApplicationsRequest {},
                None,
                |mut c, r| async move { c.list_applications(r).await },
            )
            .await;
        let _ = self
            .call(
                Rpc::ListEvents,
                Phase::Startup,
                list_events_request(),
                None,
                |mut c, r| async move { c.list_events(r).await },
            )
            .await;
        let _ = self
            .call(
                Rpc::ReportUnregisteredApplicationConfigurations,
                Phase::Startup,
                ReportUnregisteredApplicationConfigurationsRequest {
                    applications: vec![],
                },
                None,
                |mut c, r| async move { c.report_unregistered_application_configurations(r).await },
            )
            .await;
        self.flush_snapshots(Phase::Startup).await;
    }

    // -----------------------------------------------------------------------------------
    // Periodic loops
    // -----------------------------------------------------------------------------------

    async fn poll_commands(&self) {
        let _ = self
            .call(
                Rpc::ListUnhandledCommands,
                Phase::Steady,
                ListUnhandledCommandsRequest {},
                None,
                |mut c, r| async move { c.list_unhandled_commands(r).await },
            )
            .await;
    }

    async fn report_stat(&self) {
        let n = {
            let mut state = self.state();
            state.stat_reports += 1;
            state.stat_reports
        };
        let request = ReportStatRequest {
            piped_stats: stat_payload(&self.spec.id, n, self.shared.stat_bytes),
        };
        let _ = self
            .call(
                Rpc::ReportStat,
                Phase::Steady,
                request,
                None,
                |mut c, r| async move { c.report_stat(r).await },
            )
            .await;
    }

    async fn list_applications(&self) {
        let _ = self
            .call(
                Rpc::ListApplications,
                Phase::Steady,
                ListApplicationsRequest {},
                None,
                |mut c, r| async move { c.list_applications(r).await },
            )
            .await;
    }

    async fn list_events(&self) {
        let _ = self
            .call(
                Rpc::ListEvents,
                Phase::Steady,
                list_events_request(),
                None,
                |mut c, r| async move { c.list_events(r).await },
            )
            .await;
    }

    /// The drift detector: the sync state of each application whose state changed since
    /// it was last reported. The first report of each application belongs to the start,
    /// later ones to the deployment that changed it.
    async fn check_drift(&self) {
        for (i, app) in self.spec.apps.iter().enumerate() {
            let (due, first, commit) = {
                let state = self.state();
                let a = &state.apps[i];
                (
                    a.sync_unreported && !a.busy,
                    !a.sync_reported_once,
                    a.commit.clone(),
                )
            };
            if !due {
                continue;
            }
            let phase = if first {
                Phase::Startup
            } else {
                Phase::Deployment
            };
            let request = ReportApplicationSyncStateRequest {
                application_id: app.id.clone(),
                state: Some(model::ApplicationSyncState {
                    status: ApplicationSyncStatus::Synced as i32,
                    short_reason: String::new(),
                    reason: format!("In sync with commit {}", short(&commit)),
                    head_deployment_id: String::new(),
                    timestamp: unix_now(),
                }),
            };
            match self
                .call(
                    Rpc::ReportApplicationSyncState,
                    phase,
                    request,
                    None,
                    |mut c, r| async move { c.report_application_sync_state(r).await },
                )
                .await
            {
                Ok(_) => {
                    let mut state = self.state();
                    state.apps[i].sync_unreported = false;
                    state.apps[i].sync_reported_once = true;
                }
                Err(Skip::Stopped) => return,
                Err(Skip::Failed) => {}
            }
        }
    }

    /// One snapshot per application, one call each (as upstream's reporter does).
    async fn flush_snapshots(&self, phase: Phase) {
        for (i, app) in self.spec.apps.iter().enumerate() {
            let changed_at = self.state().apps[i].changed_at;
            let request = ReportApplicationLiveStateRequest {
                snapshot: Some(self.snapshot(app, changed_at)),
            };
            if let Err(Skip::Stopped) = self
                .call(
                    Rpc::ReportApplicationLiveState,
                    phase,
                    request,
                    None,
                    |mut c, r| async move { c.report_application_live_state(r).await },
                )
                .await
            {
                return;
            }
        }
    }

    /// Resource events of the applications a finished deployment changed, in one call.
    async fn flush_events(&self) {
        let pending: Vec<usize> = {
            let state = self.state();
            (0..state.apps.len())
                .filter(|&i| state.apps[i].events_pending)
                .collect()
        };
        if pending.is_empty() {
            return;
        }
        let events = pending
            .iter()
            .map(|&i| pod_event(&self.spec.apps[i]))
            .collect();
        let request = ReportApplicationLiveStateEventsRequest {
            kubernetes_events: events,
        };
        if let Ok(response) = self
            .call(
                Rpc::ReportApplicationLiveStateEvents,
                Phase::Deployment,
                request,
                None,
                |mut c, r| async move { c.report_application_live_state_events(r).await },
            )
            .await
        {
            if response.is_some_and(|r| !r.failed_ids.is_empty()) {
                self.shared
                    .recorder
                    .reclassify(Rpc::ReportApplicationLiveStateEvents, Failure::FailedIds);
            }
            let mut state = self.state();
            for i in pending {
                state.apps[i].events_pending = false;
            }
        }
    }

    /// The deployment store's sync; the controller plans each PENDING deployment this piped
    /// triggered as soon as it is listed.
    async fn poll_deployments(self: &Arc<Self>) {
        let Ok(Some(response)) = self
            .call(
                Rpc::ListNotCompletedDeployments,
                Phase::Steady,
                ListNotCompletedDeploymentsRequest::default(),
                None,
                |mut c, r| async move { c.list_not_completed_deployments(r).await },
            )
            .await
        else {
            return;
        };
        for deployment in response.deployments {
            if deployment.status != DeploymentStatus::DeploymentPending as i32 {
                continue;
            }
            let Some(app) = self
                .spec
                .apps
                .iter()
                .position(|a| a.id == deployment.application_id)
            else {
                continue;
            };
            let mut state = self.state();
            if !state.created.remove(&deployment.id) {
                continue;
            }
            let piped = Arc::clone(self);
            let handle = tokio::spawn(async move {
                piped.run_deployment(app, deployment.id).await;
            });
            state.running.push(handle);
        }
    }

    // -----------------------------------------------------------------------------------
    // Deployments
    // -----------------------------------------------------------------------------------

    /// New commits arrive as a Poisson process at the deploy rate; each triggers a
    /// deployment of an application that has none on its way.
    async fn trigger_loop(self: Arc<Self>) {
        if self.spec.deploy_rate <= 0.0 || self.spec.max_deployments == 0 {
            return;
        }
        loop {
            // Exponential gaps: -ln(U)/rate, U in (0, 1].
            let gap = -(1.0 - self.random()).ln() / self.spec.deploy_rate;
            let at = Instant::now() + Duration::from_secs_f64(gap.min(1e9));
            if at >= self.shared.deadline {
                return;
            }
            tokio::time::sleep_until(at).await;
            let app = {
                let mut state = self.state();
                if state.triggered >= self.spec.max_deployments {
                    return;
                }
                let idle: Vec<usize> = (0..state.apps.len())
                    .filter(|&i| !state.apps[i].busy)
                    .collect();
                if idle.is_empty() {
                    continue;
                }
                let pick = idle[((self.random() * idle.len() as f64) as usize).min(idle.len() - 1)];
                state.apps[pick].busy = true;
                state.triggered += 1;
                pick
            };
            if let Err(Skip::Stopped) = self.trigger(app).await {
                return;
            }
        }
    }

    /// The trigger: CreateDeployment and the PENDING reference on the application.
    async fn trigger(&self, app_index: usize) -> Result<(), Skip> {
        let app = &self.spec.apps[app_index];
        let id = uuid::Uuid::new_v4().to_string();
        let commit = random_commit(self.random());
        let now = unix_now();
        let deployment = model::Deployment {
            id: id.clone(),
            application_id: app.id.clone(),
            application_name: app.name.clone(),
            piped_id: self.spec.id.clone(),
            project_id: self.spec.project.clone(),
            kind: ApplicationKind::Kubernetes as i32,
            git_path: Some(git_path(&app.name)),
            trigger: Some(trigger(&commit, now)),
            status: DeploymentStatus::DeploymentPending as i32,
            status_reason: "The deployment is waiting to be planned".into(),
            created_at: now,
            updated_at: now,
            ..Default::default()
        };
        let created = self
            .call(
                Rpc::CreateDeployment,
                Phase::Deployment,
                CreateDeploymentRequest {
                    deployment: Some(deployment),
                },
                None,
                |mut c, r| async move { c.create_deployment(r).await },
            )
            .await;
        if let Err(skip) = created {
            self.state().apps[app_index].busy = false;
            return Err(skip);
        }
        self.shared.recorder.deployment_triggered();
        {
            let mut state = self.state();
            state.created.insert(id.clone());
            state.apps[app_index].commit = commit.clone();
        }
        self.call(
            Rpc::ReportApplicationMostRecentDeployment,
            Phase::Deployment,
            ReportApplicationMostRecentDeploymentRequest {
                application_id: app.id.clone(),
                status: DeploymentStatus::DeploymentPending as i32,
                deployment: Some(reference(&id, &commit, now)),
            },
            None,
            |mut c, r| async move { c.report_application_most_recent_deployment(r).await },
        )
        .await
        .map(|_| ())
    }

    /// Controller, scheduler and log persister for one deployment. Stops at the first
    /// failed call (the application stays marked busy) or at the deadline.
    async fn run_deployment(&self, app_index: usize, id: String) {
        if self.deploy(app_index, &id).await.is_ok() {
            self.shared.recorder.deployment_completed();
            let mut state = self.state();
            let app = &mut state.apps[app_index];
            app.busy = false;
            app.sync_unreported = true;
            app.events_pending = true;
            app.changed_at = unix_now();
        }
    }

    async fn deploy(&self, app_index: usize, id: &str) -> Result<(), Skip> {
        let app = &self.spec.apps[app_index];
        let (known_success, commit) = {
            let state = self.state();
            let a = &state.apps[app_index];
            (a.known_success, a.commit.clone())
        };
        if !known_success {
            // NotFound is the answer before the first successful deployment.
            self.call(
                Rpc::GetApplicationMostRecentDeployment,
                Phase::Deployment,
                GetApplicationMostRecentDeploymentRequest {
                    application_id: app.id.clone(),
                    status: DeploymentStatus::DeploymentSuccess as i32,
                },
                Some(Code::NotFound),
                |mut c, r| async move { c.get_application_most_recent_deployment(r).await },
            )
            .await?;
            self.state().apps[app_index].known_success = true;
        }
        self.deploying(app, true).await?;
        let stage_ids: Vec<String> = (0..STAGES.len()).map(|i| format!("stage-{i}")).collect();
        let now = unix_now();
        let stages = STAGES
            .iter()
            .enumerate()
            .map(|(i, name)| model::PipelineStage {
                id: stage_ids[i].clone(),
                name: (*name).into(),
                index: i as i32,
                requires: if i == 0 {
                    vec![]
                } else {
                    vec![stage_ids[i - 1].clone()]
                },
                visible: true,
                status: StageStatus::StageNotStartedYet as i32,
                created_at: now,
                updated_at: now,
                ..Default::default()
            })
            .collect();
        self.call(
            Rpc::ReportDeploymentPlanned,
            Phase::Deployment,
            ReportDeploymentPlannedRequest {
                deployment_id: id.into(),
                summary: format!(
                    "Sync progressively with the canary strategy ({})",
                    short(&commit)
                ),
                status_reason: "The deployment has been planned".into(),
                running_commit_hash: commit.clone(),
                running_config_filename: "app.pipecd.yaml".into(),
                versions: vec![model::ArtifactVersion {
                    kind: model::artifact_version::Kind::ContainerImage as i32,
                    version: short(&commit).into(),
                    name: "helloworld".into(),
                    url: format!("ghcr.io/example/helloworld:{}", short(&commit)),
                }],
                stages,
                ..Default::default()
            },
            None,
            |mut c, r| async move { c.report_deployment_planned(r).await },
        )
        .await?;
        self.call(
            Rpc::ReportDeploymentStatusChanged,
            Phase::Deployment,
            ReportDeploymentStatusChangedRequest {
                deployment_id: id.into(),
                status: DeploymentStatus::DeploymentRunning as i32,
                status_reason: "The piped started to handle this deployment".into(),
                ..Default::default()
            },
            None,
            |mut c, r| async move { c.report_deployment_status_changed(r).await },
        )
        .await?;
        for (i, stage_id) in stage_ids.iter().enumerate() {
            self.run_stage(id, stage_id, STAGES[i]).await?;
        }
        self.call(
            Rpc::ReportDeploymentCompleted,
            Phase::Deployment,
            ReportDeploymentCompletedRequest {
                deployment_id: id.into(),
                status: DeploymentStatus::DeploymentSuccess as i32,
                status_reason: "The deployment was completed successfully".into(),
                stage_statuses: stage_ids
                    .iter()
                    .map(|s| (s.clone(), StageStatus::StageSuccess as i32))
                    .collect(),
                completed_at: unix_now(),
                ..Default::default()
            },
            None,
            |mut c, r| async move { c.report_deployment_completed(r).await },
        )
        .await?;
        self.call(
            Rpc::ReportApplicationMostRecentDeployment,
            Phase::Deployment,
            ReportApplicationMostRecentDeploymentRequest {
                application_id: app.id.clone(),
                status: DeploymentStatus::DeploymentSuccess as i32,
                deployment: Some(reference(id, &commit, unix_now())),
            },
            None,
            |mut c, r| async move { c.report_application_most_recent_deployment(r).await },
        )
        .await?;
        self.deploying(app, false).await
    }

    async fn deploying(&self, app: &SimApp, deploying: bool) -> Result<(), Skip> {
        self.call(
            Rpc::ReportApplicationDeployingStatus,
            Phase::Deployment,
            ReportApplicationDeployingStatusRequest {
                application_id: app.id.clone(),
                deploying,
            },
            None,
            |mut c, r| async move { c.report_application_deploying_status(r).await },
        )
        .await
        .map(|_| ())
    }

    /// RUNNING, a live log flush halfway, the final checkpoint that completes the log,
    /// SUCCESS. Upstream's log persister (`logpersister/persister.go`) flushes a running
    /// stage's new blocks every 5 s and the rest when the stage ends: a stage of
    /// [`STAGE_TIME`] gets one live flush at most.
    async fn run_stage(&self, id: &str, stage_id: &str, name: &str) -> Result<(), Skip> {
        let stage_status = |status: StageStatus, reason: &str| ReportStageStatusChangedRequest {
            deployment_id: id.into(),
            stage_id: stage_id.into(),
            status: status as i32,
            status_reason: reason.into(),
            visible: true,
            completed_at: unix_now(),
            ..Default::default()
        };
        self.call(
            Rpc::ReportStageStatusChanged,
            Phase::Deployment,
            stage_status(StageStatus::StageRunning, ""),
            None,
            |mut c, r| async move { c.report_stage_status_changed(r).await },
        )
        .await?;
        self.pause(STAGE_TIME / 2).await?;
        self.call(
            Rpc::ReportStageLogs,
            Phase::Deployment,
            ReportStageLogsRequest {
                deployment_id: id.into(),
                stage_id: stage_id.into(),
                retried_count: 0,
                blocks: vec![
                    log_block(0, &format!("Start running {name}")),
                    log_block(1, "Applying 3 manifests"),
                ],
            },
            None,
            |mut c, r| async move { c.report_stage_logs(r).await },
        )
        .await?;
        self.pause(STAGE_TIME / 2).await?;
        self.call(
            Rpc::ReportStageLogsFromLastCheckpoint,
            Phase::Deployment,
            ReportStageLogsFromLastCheckpointRequest {
                deployment_id: id.into(),
                stage_id: stage_id.into(),
                retried_count: 0,
                blocks: vec![log_block(2, "All manifests were applied")],
                completed: true,
            },
            None,
            |mut c, r| async move { c.report_stage_logs_from_last_checkpoint(r).await },
        )
        .await?;
        self.call(
            Rpc::ReportStageStatusChanged,
            Phase::Deployment,
            stage_status(StageStatus::StageSuccess, "The stage finished successfully"),
            None,
            |mut c, r| async move { c.report_stage_status_changed(r).await },
        )
        .await
        .map(|_| ())
    }

    /// Sleeps, or stops the deployment if the deadline comes first.
    async fn pause(&self, d: Duration) -> Result<(), Skip> {
        let until = Instant::now() + d;
        if until >= self.shared.deadline {
            return Err(Skip::Stopped);
        }
        tokio::time::sleep_until(until).await;
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // Objects as a Kubernetes piped reports them
    // -----------------------------------------------------------------------------------

    fn snapshot(&self, app: &SimApp, changed_at: i64) -> model::ApplicationLiveStateSnapshot {
        let resources = ["Deployment", "ReplicaSet", "Pod"]
            .iter()
            .map(|kind| {
                let name = format!("{}-{}", app.name, kind.to_lowercase());
                resource(app, kind, &name, changed_at)
            })
            .collect();
        model::ApplicationLiveStateSnapshot {
            application_id: app.id.clone(),
            piped_id: self.spec.id.clone(),
            project_id: self.spec.project.clone(),
            kind: ApplicationKind::Kubernetes as i32,
            kubernetes: Some(model::KubernetesApplicationLiveState { resources }),
            version: Some(model::ApplicationLiveStateVersion {
                timestamp: unix_now(),
                index: 0,
            }),
            ..Default::default()
        }
    }
}

fn list_events_request() -> ListEventsRequest {
    // Not handled, from the last 24 hours, newest first (upstream's event store).
    ListEventsRequest {
        from: unix_now() - 24 * 3600,
        to: 0,
        order: ListOrder::Desc as i32,
        status: list_events_request::Status::NotHandled as i32,
    }
}

fn resource(app: &SimApp, kind: &str, name: &str, at: i64) -> model::KubernetesResourceState {
    model::KubernetesResourceState {
        id: format!("{}-{}", app.id, kind.to_lowercase()),
        name: name.into(),
        api_version: if kind == "Pod" { "v1" } else { "apps/v1" }.into(),
        kind: kind.into(),
        namespace: "default".into(),
        health_status: HealthStatus::Healthy as i32,
        created_at: at,
        updated_at: at,
        ..Default::default()
    }
}

/// The application's pod replaced by a deployment, newer than any snapshot so far.
fn pod_event(app: &SimApp) -> model::KubernetesResourceStateEvent {
    let now = unix_now();
    model::KubernetesResourceStateEvent {
        id: uuid::Uuid::new_v4().to_string(),
        application_id: app.id.clone(),
        r#type: kubernetes_resource_state_event::Type::AddOrUpdated as i32,
        state: Some(resource(app, "Pod", &format!("{}-pod", app.name), now)),
        snapshot_version: Some(model::ApplicationLiveStateVersion {
            timestamp: now + 1,
            index: 1,
        }),
        created_at: now,
    }
}

fn git_path(app_name: &str) -> model::ApplicationGitPath {
    model::ApplicationGitPath {
        repo: Some(model::ApplicationGitRepository {
            id: REPO_ID.into(),
            ..Default::default()
        }),
        path: format!("apps/{app_name}"),
        config_filename: "app.pipecd.yaml".into(),
        ..Default::default()
    }
}

fn trigger(commit: &str, now: i64) -> model::DeploymentTrigger {
    model::DeploymentTrigger {
        commit: Some(model::Commit {
            hash: commit.into(),
            message: "Bump the image".into(),
            author: "wisp-simulate".into(),
            branch: "main".into(),
            created_at: now,
            ..Default::default()
        }),
        commander: String::new(),
        timestamp: now,
        ..Default::default()
    }
}

fn reference(id: &str, commit: &str, now: i64) -> model::ApplicationDeploymentReference {
    model::ApplicationDeploymentReference {
        deployment_id: id.into(),
        trigger: Some(trigger(commit, now)),
        summary: "Sync progressively with the canary strategy".into(),
        started_at: now,
        completed_at: now,
        ..Default::default()
    }
}

fn log_block(index: i64, log: &str) -> model::LogBlock {
    model::LogBlock {
        index,
        log: log.into(),
        severity: LogSeverity::Info as i32,
        created_at: unix_now(),
    }
}

/// A Prometheus text payload of about `bytes` bytes whose values change with every report
/// (so the server always has something new to store, as with a real piped's counters).
pub fn stat_payload(piped_id: &str, report: u64, bytes: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes + 128);
    let _ = writeln!(
        out,
        "# TYPE wisp_simulate_reports_total counter\nwisp_simulate_reports_total{{piped=\"{piped_id}\"}} {report}"
    );
    let mut i = 0u64;
    while out.len() < bytes {
        let _ = writeln!(
            out,
            "go_memstats_sample_{i}{{piped=\"{piped_id}\"}} {}",
            report.wrapping_mul(31).wrapping_add(i)
        );
        i += 1;
    }
    out.into_bytes()
}

fn random_commit(r: f64) -> String {
    let seed = (r * u64::MAX as f64) as u64;
    let mut rng = Rng::new(seed);
    (0..5)
        .map(|_| format!("{:08x}", rng.next_u64() as u32))
        .collect()
}

fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

use wisp_model::clock::now_unix as unix_now;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_payload_has_the_size_asked_and_changes() {
        let a = stat_payload("p", 1, 6000);
        let b = stat_payload("p", 2, 6000);
        assert!(a.len() >= 6000 && a.len() < 6200, "{}", a.len());
        assert_ne!(a, b);
    }

    #[test]
    fn commits_look_like_sha1() {
        let c = random_commit(0.5);
        assert_eq!(c.len(), 40);
        assert!(c.chars().all(|ch| ch.is_ascii_hexdigit()));
        assert_eq!(short(&c).len(), 7);
    }
}
