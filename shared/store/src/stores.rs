//! The bundle of stores every service takes: the three backends, a typed collection per
//! datastore kind, and the domain stores built on them.

use std::sync::Arc;

use wisp_proto::model;

use crate::analysis::AnalysisResultStore;
use crate::cache::Cache;
use crate::collection::Collection;
use crate::commandoutput::CommandOutputStore;
use crate::datastore::Datastore;
use crate::filestore::Filestore;
use crate::livestate::LiveStateStore;
use crate::pipedstat::PipedStatStore;
use crate::polls::PollAnswers;
use crate::sharedobject::SharedObjectStore;
use crate::stagelog::StageLogStore;
use crate::unregistered::UnregisteredAppStore;

#[derive(Clone)]
pub struct Stores {
    pub datastore: Arc<dyn Datastore>,
    pub filestore: Arc<dyn Filestore>,
    pub cache: Arc<dyn Cache>,

    pub projects: Collection<model::Project>,
    pub pipeds: Collection<model::Piped>,
    pub applications: Collection<model::Application>,
    pub deployments: Collection<model::Deployment>,
    pub commands: Collection<model::Command>,
    pub events: Collection<model::Event>,
    pub deployment_chains: Collection<model::DeploymentChain>,
    pub deployment_traces: Collection<model::DeploymentTrace>,
    pub api_keys: Collection<model::ApiKey>,

    pub stage_logs: StageLogStore,
    pub live_states: LiveStateStore,
    pub shared_objects: SharedObjectStore,
    pub analysis_results: AnalysisResultStore,
    pub command_outputs: CommandOutputStore,
    pub piped_stats: PipedStatStore,
    pub unregistered_apps: UnregisteredAppStore,
    /// Credentials and sessions revoked, shared by every instance.
    pub revocations: crate::revocations::Revocations,
    /// Who changed what (kept for the configured retention).
    pub audit: crate::audit::AuditStore,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

impl Stores {
    pub fn new(
        datastore: Arc<dyn Datastore>,
        filestore: Arc<dyn Filestore>,
        cache: Arc<dyn Cache>,
    ) -> Stores {
        let polls = PollAnswers::new(cache.clone(), crate::polls::SETTLE);
        Stores {
            projects: Collection::new(datastore.clone()),
            pipeds: Collection::new(datastore.clone()),
            applications: Collection::with_polls(datastore.clone(), polls.clone()),
            deployments: Collection::with_polls(datastore.clone(), polls.clone()),
            commands: Collection::with_polls(datastore.clone(), polls),
            events: Collection::new(datastore.clone()),
            deployment_chains: Collection::new(datastore.clone()),
            deployment_traces: Collection::new(datastore.clone()),
            api_keys: Collection::new(datastore.clone()),

            stage_logs: StageLogStore::new(filestore.clone(), cache.clone()),
            live_states: LiveStateStore::new(filestore.clone()),
            shared_objects: SharedObjectStore::new(filestore.clone()),
            analysis_results: AnalysisResultStore::new(filestore.clone()),
            command_outputs: CommandOutputStore::new(filestore.clone()),
            piped_stats: PipedStatStore::new(datastore.clone(), cache.clone()),
            unregistered_apps: UnregisteredAppStore::new(datastore.clone()),
            revocations: crate::revocations::Revocations::new(filestore.clone()),
            audit: crate::audit::AuditStore::new(datastore.clone()),

            datastore,
            filestore,
            cache,
        }
    }

    /// The same stores with the pollers' answers kept by `polls` (`None`: every poll reads
    /// the datastore). For tests, which settle their writes at once.
    pub fn with_poll_answers(mut self, polls: Option<Arc<PollAnswers>>) -> Stores {
        self.applications = Collection::with_polls(self.datastore.clone(), polls.clone());
        self.deployments = Collection::with_polls(self.datastore.clone(), polls.clone());
        self.commands = Collection::with_polls(self.datastore.clone(), polls);
        self
    }
}
