//! How big a request each RPC accepts, decompressed. Fitted to what upstream pipeds,
//! pipectl and the console send, with room to spare; docs/LIMITS.md is generated from
//! these tables (a test keeps it current).

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Ids, names, filters and page cursors.
const SMALL: usize = 64 * KIB;
/// One record or a handful: a deployment, an application, a project's settings.
const RECORD: usize = MIB;
/// Batches of records or text: stage logs, command output, application configs.
const BATCH: usize = 4 * MIB;
/// A live-state snapshot of a large application; a plugin's shared object.
const SNAPSHOT: usize = 16 * MIB;

/// The request bounds of one service, every RPC listed.
#[derive(Debug)]
pub struct Limits {
    pub service: &'static str,
    pub methods: &'static [(&'static str, usize, &'static str)],
}

impl Limits {
    /// The bound of `method`; `None` when the service has no such RPC.
    pub fn for_method(&self, method: &str) -> Option<usize> {
        self.method(method).map(|(_, limit)| limit)
    }

    /// The RPC's name as this table spells it (a label from a fixed list) and its bound.
    pub fn method(&self, method: &str) -> Option<(&'static str, usize)> {
        self.methods
            .iter()
            .find(|(name, _, _)| *name == method)
            .map(|(name, limit, _)| (*name, *limit))
    }

    /// The largest bound of the service.
    pub fn max(&self) -> usize {
        self.methods.iter().map(|(_, l, _)| *l).max().unwrap_or(0)
    }

    fn markdown(&self, out: &mut String) {
        out.push_str(&format!(
            "\n## {}\n\n| RPC | Bound | What is big in it |\n|---|---:|---|\n",
            self.service
        ));
        for (name, limit, why) in self.methods {
            out.push_str(&format!("| {name} | {} | {why} |\n", human(*limit)));
        }
    }
}

fn human(bytes: usize) -> String {
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} KiB", bytes / KIB)
    }
}

/// docs/LIMITS.md.
pub fn markdown() -> String {
    let mut out = format!(
        "# Request size bounds\n\n\
         <!-- Generated from shared/transport/src/limits.rs by \
         `WISP_UPDATE_DOCS=1 cargo test -p wisp-transport limits`. -->\n\n\
         Each RPC accepts a request of at most this many bytes once decompressed; a bigger \
         one gets `RESOURCE_EXHAUSTED` and is not decoded. Credentials are checked before \
         the body is read, so a caller without them gets `UNAUTHENTICATED` and nothing it \
         sent is kept.\n\n\
         On top of the bound, every request is charged an estimate of the memory it \
         decodes to: its bytes; {cost} bytes per element of a repeated message field (an \
         empty one included); per element of a repeated string or bytes field its length \
         and {value} bytes; a third of that, and {single} bytes and the length, for a field's \
         first occurrence in a message; and its longest value once \
         more (decoding copies each value). A test decodes the worst shapes and checks that \
         the estimate covers what they allocate. All requests being decoded at once share a \
         budget of {budget} per process (on Lambda: a {lambda}th of the function's memory, \
         `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`); one caller (a piped, an API key, a console \
         user) may hold at most {principal_num}/{principal_den} of it and one project \
         {project_num}/{project_den}. Past its share a request gets `RESOURCE_EXHAUSTED` \
         at once; past the budget it waits up to {wait} seconds and then gets \
         `RESOURCE_EXHAUSTED`, which pipeds retry.\n",
        cost = crate::gate::MESSAGE_COST,
        value = crate::gate::VALUE_COST,
        single = crate::gate::SINGULAR_VALUE_COST,
        budget = human(crate::gate::DECODE_BUDGET_BYTES),
        lambda = crate::gate::LAMBDA_BUDGET_DIVISOR,
        principal_num = crate::gate::PRINCIPAL_SHARE.0,
        principal_den = crate::gate::PRINCIPAL_SHARE.1,
        project_num = crate::gate::PROJECT_SHARE.0,
        project_den = crate::gate::PROJECT_SHARE.1,
        wait = crate::gate::DECODE_BUDGET_WAIT.as_secs(),
    );
    for limits in [&PIPED, &API, &WEB, &TRACE] {
        limits.markdown(&mut out);
    }
    out
}

pub static PIPED: Limits = Limits {
    service: "PipedService (pipeds)",
    methods: &[
        (
            "ReportStat",
            BATCH,
            "the piped's own metrics, Prometheus text",
        ),
        (
            "ReportPipedMeta",
            RECORD,
            "config, platform providers, plugins",
        ),
        ("ListApplications", SMALL, ""),
        (
            "ReportApplicationSyncState",
            RECORD,
            "the reason text of a drift",
        ),
        ("ReportApplicationDeployingStatus", SMALL, ""),
        (
            "ReportApplicationMostRecentDeployment",
            RECORD,
            "a deployment reference",
        ),
        ("GetApplicationMostRecentDeployment", SMALL, ""),
        ("GetDeployment", SMALL, ""),
        ("ListNotCompletedDeployments", SMALL, ""),
        (
            "CreateDeployment",
            RECORD,
            "a deployment: trigger, stages, metadata",
        ),
        (
            "ReportDeploymentPlanned",
            RECORD,
            "the planned stages and summary",
        ),
        (
            "ReportDeploymentStatusChanged",
            RECORD,
            "status reason and stage statuses",
        ),
        (
            "ReportDeploymentCompleted",
            RECORD,
            "status reason and stage statuses",
        ),
        ("SaveDeploymentMetadata", RECORD, "metadata map"),
        ("SaveDeploymentSharedMetadata", RECORD, "metadata map"),
        ("SaveDeploymentPluginMetadata", RECORD, "metadata map"),
        ("SaveStageMetadata", RECORD, "metadata map"),
        ("ReportStageLogs", BATCH, "log blocks"),
        ("ReportStageLogsFromLastCheckpoint", BATCH, "log blocks"),
        ("ReportStageStatusChanged", RECORD, "status reason"),
        ("ListUnhandledCommands", SMALL, ""),
        ("ReportCommandHandled", BATCH, "command output"),
        (
            "ReportApplicationLiveState",
            SNAPSHOT,
            "every resource of an application",
        ),
        (
            "ReportApplicationLiveStateEvents",
            BATCH,
            "resource changes",
        ),
        ("GetLatestEvent", SMALL, ""),
        ("ListEvents", SMALL, ""),
        ("ReportEventStatuses", RECORD, "statuses of many events"),
        ("GetLatestAnalysisResult", SMALL, ""),
        ("PutLatestAnalysisResult", SMALL, ""),
        ("GetDesiredVersion", SMALL, ""),
        (
            "UpdateApplicationConfigurations",
            BATCH,
            "application configs of a repository",
        ),
        (
            "ReportUnregisteredApplicationConfigurations",
            BATCH,
            "application configs of a repository",
        ),
        (
            "CreateDeploymentChain",
            RECORD,
            "the chain's blocks and first deployment",
        ),
        ("InChainDeploymentPlannable", SMALL, ""),
        ("GetApplicationSharedObject", SMALL, ""),
        (
            "PutApplicationSharedObject",
            SNAPSHOT,
            "a plugin's object (manifests)",
        ),
    ],
};

pub static API: Limits = Limits {
    service: "APIService (pipectl and scripts)",
    methods: &[
        ("AddApplication", RECORD, "application settings and labels"),
        ("SyncApplication", SMALL, ""),
        ("GetApplication", SMALL, ""),
        ("ListApplications", SMALL, ""),
        (
            "UpdateApplication",
            RECORD,
            "application settings and labels",
        ),
        ("DeleteApplication", SMALL, ""),
        ("EnableApplication", SMALL, ""),
        ("DisableApplication", SMALL, ""),
        ("RenameApplicationConfigFile", SMALL, ""),
        (
            "UpdateApplicationDeployTargets",
            RECORD,
            "deploy targets per plugin",
        ),
        ("GetDeployment", SMALL, ""),
        ("ListDeployments", SMALL, ""),
        ("GetCommand", SMALL, ""),
        ("GetPiped", SMALL, ""),
        ("RegisterPiped", SMALL, ""),
        ("UpdatePiped", SMALL, ""),
        ("EnablePiped", SMALL, ""),
        ("DisablePiped", SMALL, ""),
        ("RegisterEvent", RECORD, "event data and labels"),
        ("RequestPlanPreview", SMALL, ""),
        ("GetPlanPreviewResults", SMALL, ""),
        ("Encrypt", RECORD, "the plaintext to seal"),
        ("ListStageLogs", SMALL, ""),
    ],
};

pub static WEB: Limits = Limits {
    service: "WebService (the console)",
    methods: &[
        ("RegisterPiped", SMALL, ""),
        ("UpdatePiped", SMALL, ""),
        ("RecreatePipedKey", SMALL, ""),
        ("DeleteOldPipedKeys", SMALL, ""),
        ("EnablePiped", SMALL, ""),
        ("DisablePiped", SMALL, ""),
        ("ListPipeds", SMALL, ""),
        ("GetPiped", SMALL, ""),
        ("UpdatePipedDesiredVersion", SMALL, ""),
        ("RestartPiped", SMALL, ""),
        ("ListReleasedVersions", SMALL, ""),
        ("ListDeprecatedNotes", SMALL, ""),
        ("AddApplication", RECORD, "application settings and labels"),
        (
            "UpdateApplication",
            RECORD,
            "application settings and labels",
        ),
        ("EnableApplication", SMALL, ""),
        ("DisableApplication", SMALL, ""),
        ("DeleteApplication", SMALL, ""),
        ("ListApplications", SMALL, ""),
        ("SyncApplication", SMALL, ""),
        ("GetApplication", SMALL, ""),
        (
            "GenerateApplicationSealedSecret",
            RECORD,
            "the plaintext to seal",
        ),
        ("ListUnregisteredApplications", SMALL, ""),
        ("ListDeployments", SMALL, ""),
        ("GetDeployment", SMALL, ""),
        ("GetStageLog", SMALL, ""),
        ("CancelDeployment", SMALL, ""),
        ("SkipStage", SMALL, ""),
        ("ApproveStage", SMALL, ""),
        ("ListDeploymentTraces", SMALL, ""),
        ("GetApplicationLiveState", SMALL, ""),
        ("GetProject", SMALL, ""),
        ("UpdateProjectStaticAdmin", SMALL, ""),
        ("EnableStaticAdmin", SMALL, ""),
        ("DisableStaticAdmin", SMALL, ""),
        ("UpdateProjectSSOConfig", RECORD, "provider settings"),
        ("UpdateProjectRBACConfig", RECORD, "team settings"),
        ("GetMe", SMALL, ""),
        ("AddProjectRBACRole", RECORD, "policies"),
        ("UpdateProjectRBACRole", RECORD, "policies"),
        ("DeleteProjectRBACRole", SMALL, ""),
        ("AddProjectUserGroup", SMALL, ""),
        ("DeleteProjectUserGroup", SMALL, ""),
        ("GetCommand", SMALL, ""),
        ("GenerateAPIKey", SMALL, ""),
        ("DisableAPIKey", SMALL, ""),
        ("ListAPIKeys", SMALL, ""),
        ("GetInsightData", SMALL, ""),
        ("GetInsightApplicationCount", SMALL, ""),
        ("ListDeploymentChains", SMALL, ""),
        ("GetDeploymentChain", SMALL, ""),
        ("ListEvents", SMALL, ""),
    ],
};

/// OTLP `TraceService` (the pipeds' spans, `crate::trace`): one export batch. An
/// OpenTelemetry SDK sends at most 512 spans a batch by default, well under this.
pub static TRACE: Limits = Limits {
    service: "TraceService (the pipeds' OTLP spans)",
    methods: &[(
        "Export",
        BATCH,
        "a batch of spans (OTLP/gRPC, and OTLP/HTTP `POST /v1/traces`: 413 past it)",
    )],
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The RPC names of a service in our .proto file.
    fn proto_rpcs(file: &str) -> Vec<String> {
        let path = format!("{}/../../proto/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("rpc "))
            .map(|l| l.split('(').next().unwrap().trim().to_string())
            .collect()
    }

    fn listed(limits: &Limits) -> Vec<String> {
        limits
            .methods
            .iter()
            .map(|(n, _, _)| n.to_string())
            .collect()
    }

    #[test]
    fn every_rpc_has_a_bound() {
        for (limits, dir) in [
            (&PIPED, "pipedservice"),
            (&API, "apiservice"),
            (&WEB, "webservice"),
        ] {
            let dir_path = format!("{}/../../proto/{dir}", env!("CARGO_MANIFEST_DIR"));
            let mut rpcs = Vec::new();
            for entry in std::fs::read_dir(dir_path).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                if name.ends_with(".proto") {
                    rpcs.extend(proto_rpcs(&format!("{dir}/{name}")));
                }
            }
            rpcs.sort();
            let mut ours = listed(limits);
            ours.sort();
            assert_eq!(ours, rpcs, "{}", limits.service);
        }
    }

    #[test]
    fn limits_doc_is_current() {
        let path = format!("{}/../../docs/LIMITS.md", env!("CARGO_MANIFEST_DIR"));
        let want = markdown();
        if std::env::var_os("WISP_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/LIMITS.md is out of date: run WISP_UPDATE_DOCS=1 cargo test -p wisp-transport limits"
        );
    }
}
