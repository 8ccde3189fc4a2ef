//! What `wisp import pipecd` refuses to take from an upstream dump. A dump is whatever its
//! author wrote, so it is read through [`GuardedDatastore`] and [`GuardedFilestore`],
//! which leave out:
//!
//! - a project that exists on Wisp's side with other content, and every record of it,
//!   unless the operator passes `--replace-projects` (else a dump naming an existing
//!   project would replace its static admin, and its author would log in as Admin);
//!   a project identical to Wisp's (an earlier run of the same import) is no refusal;
//! - a record whose id Wisp already holds in another project (a dump would move it);
//! - every object whose path is not one upstream's control plane writes
//!   ([`UPSTREAM_PREFIXES`]): never `revocations.json` or anything else of Wisp's own
//!   (revocations would be erased), never the console's files under `console/` (on AWS
//!   the console is served from the bucket: a dump would replace its JavaScript for every
//!   tenant);
//! - an object of an application, deployment or command that Wisp holds in a project
//!   the dump does not bring, the insights of such a project, and upstream's insight
//!   milestone when Wisp has its own.
//!
//! Everything left out is recorded in [`Refusals`], which `--dry-run` and every run
//! print. The same decision is made however often the migration engine reads the source
//! (counting, copying, verifying), so the counts still match.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use wisp_store::content::same_data;
use wisp_store::datastore::{Datastore, Kind, Page, Query, Record};
use wisp_store::error::{Result as StoreResult, StoreError};
use wisp_store::filestore::{Filestore, ListPage, Object, PutCondition};

/// Object path prefixes upstream's control plane writes, with the entity each object
/// belongs to (the first path segment after the prefix is its id). Upstream's writers:
/// `pkg/app/server/stagelogstore`, `applicationlivestatestore`, `analysisresultstore`,
/// `applicationsharedobjectstore`, `commandoutputstore` (plan-preview outputs among
/// them), and `pkg/insight/insightstore` for `insights/`.
pub const UPSTREAM_PREFIXES: [(&str, Owner); 6] = [
    ("log/", Owner::Entity(Kind::Deployment)),
    ("application-live-state/", Owner::Entity(Kind::Application)),
    ("latest-analysis-result/", Owner::Entity(Kind::Application)),
    (
        "application-shared-objects/",
        Owner::Entity(Kind::Application),
    ),
    ("command-output/", Owner::Entity(Kind::Command)),
    ("insights/", Owner::Project),
];

/// Upstream's insight collector's progress: one object for the whole control plane.
const INSIGHT_MILESTONE: &str = "insights/milestone.json";

/// Refusals listed at most; past it only counted.
pub const MAX_LISTED_REFUSALS: usize = 1000;

/// What the first segment after an [`UPSTREAM_PREFIXES`] prefix names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The id of an entity of this kind (`<id>` or `<id>.json`).
    Entity(Kind),
    /// A project id.
    Project,
}

/// What was left out of the import, and why.
#[derive(Debug, Default)]
pub struct Refusals {
    listed: Mutex<(BTreeMap<String, String>, u64)>,
}

impl Refusals {
    fn refuse(&self, what: String, why: String) {
        if let Ok(mut guard) = self.listed.lock() {
            let (listed, more) = &mut *guard;
            if listed.contains_key(&what) {
                return;
            }
            if listed.len() < MAX_LISTED_REFUSALS {
                listed.insert(what, why);
            } else {
                *more += 1;
            }
        }
    }

    /// `(what, why)` in order of `what` (`Kind id` or `object PATH`), and how many more
    /// were refused past [`MAX_LISTED_REFUSALS`].
    pub fn list(&self) -> (Vec<(String, String)>, u64) {
        match self.listed.lock() {
            Ok(guard) => (
                guard
                    .0
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                guard.1,
            ),
            Err(_) => (Vec::new(), 0),
        }
    }
}

/// The decisions of one import: which of the dump's projects are taken, and what Wisp
/// already holds.
pub struct ImportGuard {
    /// The dump's projects that are imported.
    taken: BTreeSet<String>,
    /// The dump's projects that are not, and why.
    refused: BTreeMap<String, String>,
    destination: Arc<dyn Datastore>,
    destination_files: Arc<dyn Filestore>,
    refusals: Refusals,
    /// Records already decided: `kind/id` → taken.
    records: Mutex<HashMap<String, bool>>,
    /// Owners already looked up on Wisp's side: `kind/id` → the project holding it.
    owners: Mutex<HashMap<String, Option<String>>>,
    /// The dump's projects that are imported, as read.
    taken_projects: Vec<wisp_proto::model::Project>,
}

impl std::fmt::Debug for ImportGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportGuard")
            .field("taken", &self.taken)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

fn key(kind: Kind, id: &str) -> String {
    format!("{}/{id}", kind.as_str())
}

impl ImportGuard {
    /// Reads the dump's projects and compares them with Wisp's: a project Wisp holds with
    /// other content is refused unless `replace_projects`.
    pub async fn plan(
        source: &dyn Datastore,
        destination: Arc<dyn Datastore>,
        destination_files: Arc<dyn Filestore>,
        replace_projects: bool,
    ) -> StoreResult<Arc<ImportGuard>> {
        let mut taken = BTreeSet::new();
        let mut taken_projects = Vec::new();
        let mut refused = BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = source.scan(Kind::Project, cursor.as_deref(), 100).await?;
            for (record, _) in &page.records {
                let decoded = || {
                    <wisp_proto::model::Project as prost::Message>::decode(record.data.as_slice())
                        .ok()
                };
                match destination.get(Kind::Project, &record.id).await {
                    Err(StoreError::NotFound(_)) => {
                        taken.insert(record.id.clone());
                        taken_projects.extend(decoded());
                    }
                    Ok(ours)
                        if replace_projects
                            || same_data(Kind::Project, &ours.data, &record.data) =>
                    {
                        taken.insert(record.id.clone());
                        taken_projects.extend(decoded());
                    }
                    Ok(_) => {
                        refused.insert(
                            record.id.clone(),
                            "the project exists on Wisp's side (pass --replace-projects to \
                             replace it with the dump's)"
                                .to_string(),
                        );
                    }
                    Err(e) => return Err(e),
                }
            }
            match page.records.last() {
                Some((_, c)) if page.more => cursor = Some(c.clone()),
                _ => break,
            }
        }
        let guard = ImportGuard {
            taken,
            refused,
            destination,
            destination_files,
            refusals: Refusals::default(),
            records: Mutex::new(HashMap::new()),
            owners: Mutex::new(HashMap::new()),
            taken_projects,
        };
        for (project, why) in &guard.refused {
            guard
                .refusals
                .refuse(format!("Project {project}"), why.clone());
        }
        Ok(Arc::new(guard))
    }

    /// What was left out so far.
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }

    /// The dump's projects that are imported, as the dump holds them.
    pub fn taken_projects(&self) -> &[wisp_proto::model::Project] {
        &self.taken_projects
    }

    /// The dump's projects that are refused.
    pub fn refused_projects(&self) -> impl Iterator<Item = &str> {
        self.refused.keys().map(String::as_str)
    }

    /// Whether the dump's `record` of `kind` is imported.
    async fn take_record(&self, kind: Kind, record: &Record) -> StoreResult<bool> {
        let id = key(kind, &record.id);
        if let Some(taken) = self.records.lock().ok().and_then(|m| m.get(&id).copied()) {
            return Ok(taken);
        }
        let project = if kind == Kind::Project {
            &record.id
        } else {
            &record.project_id
        };
        let why = if let Some(why) = self.refused.get(project) {
            Some(format!("of project {project}: {why}"))
        } else if kind == Kind::Project {
            None
        } else {
            match self.destination.get(kind, &record.id).await {
                Ok(ours) if ours.project_id != record.project_id => Some(format!(
                    "Wisp holds this id in project {}; the dump would move it to {}",
                    ours.project_id, record.project_id
                )),
                Ok(_) | Err(StoreError::NotFound(_)) => None,
                Err(e) => return Err(e),
            }
        };
        let taken = why.is_none();
        if let Some(why) = why {
            self.refusals
                .refuse(format!("{} {}", kind.as_str(), record.id), why);
        }
        if let Ok(mut m) = self.records.lock() {
            m.insert(id, taken);
        }
        Ok(taken)
    }

    /// The project on Wisp's side holding the entity `kind`/`id`, if Wisp has it.
    async fn owner(&self, kind: Kind, id: &str) -> StoreResult<Option<String>> {
        let k = key(kind, id);
        if let Some(owner) = self.owners.lock().ok().and_then(|m| m.get(&k).cloned()) {
            return Ok(owner);
        }
        let owner = match self.destination.get(kind, id).await {
            Ok(record) if kind == Kind::Project => Some(record.id),
            Ok(record) => Some(record.project_id),
            Err(StoreError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        if let Ok(mut m) = self.owners.lock() {
            m.insert(k, owner.clone());
        }
        Ok(owner)
    }

    /// Why the object at `path` is not imported; `None` when it is.
    pub async fn refuse_object(&self, path: &str) -> StoreResult<Option<String>> {
        if path == wisp_store::revocations::REVOCATIONS_PATH || path.starts_with("revocations") {
            return Ok(Some(
                "Wisp's revocations are its own: never imported".into(),
            ));
        }
        if path.starts_with("console/") {
            return Ok(Some(
                "the console's files are Wisp's own: never imported".into(),
            ));
        }
        if path == INSIGHT_MILESTONE {
            return match self.destination_files.get(path).await {
                Err(StoreError::NotFound(_)) => Ok(None),
                Ok(_) => Ok(Some(
                    "Wisp's insight collector keeps its own milestone".into(),
                )),
                Err(e) => Err(e),
            };
        }
        let Some((prefix, owner)) = UPSTREAM_PREFIXES
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix))
        else {
            return Ok(Some(
                "not a path upstream's control plane writes (stage logs, live states, \
                 analysis results, shared objects, command outputs, insights)"
                    .into(),
            ));
        };
        let rest = &path[prefix.len()..];
        let first = rest.split('/').next().unwrap_or_default();
        let id = first.strip_suffix(".json").unwrap_or(first);
        if id.is_empty() {
            return Ok(Some("names no entity".into()));
        }
        let (kind, what) = match owner {
            Owner::Project => {
                if let Some(why) = self.refused.get(id) {
                    return Ok(Some(format!("of project {id}: {why}")));
                }
                (Kind::Project, "project")
            }
            Owner::Entity(kind) => (*kind, kind.as_str()),
        };
        if *owner == Owner::Project && self.taken.contains(id) {
            return Ok(None);
        }
        // The dump's own record of the entity, when it was refused (the migration engine
        // counts every record before it lists an object, so the decision is known).
        let refused_record = self
            .records
            .lock()
            .ok()
            .and_then(|m| m.get(&key(kind, id)).copied())
            == Some(false);
        if refused_record {
            return Ok(Some(format!("the dump's {what} {id} is refused")));
        }
        match self.owner(kind, id).await? {
            Some(project) if !self.taken.contains(&project) => Ok(Some(format!(
                "the {what} {id} is Wisp's, of project {project}, which the dump does not bring"
            ))),
            _ => Ok(None),
        }
    }
}

/// The dump's datastore with what the [`ImportGuard`] refuses left out of every scan.
pub struct GuardedDatastore<D> {
    inner: D,
    guard: Arc<ImportGuard>,
}

impl<D> std::fmt::Debug for GuardedDatastore<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedDatastore").finish_non_exhaustive()
    }
}

impl<D: Datastore> GuardedDatastore<D> {
    pub fn new(inner: D, guard: Arc<ImportGuard>) -> Self {
        GuardedDatastore { inner, guard }
    }

    pub fn into_inner(self) -> D {
        self.inner
    }
}

fn read_only() -> StoreError {
    StoreError::FailedPrecondition("the upstream dump is only read".into())
}

#[async_trait]
impl<D: Datastore> Datastore for GuardedDatastore<D> {
    async fn get(&self, _kind: Kind, _id: &str) -> StoreResult<Record> {
        Err(read_only())
    }

    async fn create(&self, _kind: Kind, _record: Record) -> StoreResult<()> {
        Err(read_only())
    }

    async fn put(&self, _kind: Kind, _record: Record, _expected_version: u64) -> StoreResult<()> {
        Err(read_only())
    }

    async fn delete(&self, _kind: Kind, _id: &str, _expected_version: u64) -> StoreResult<()> {
        Err(read_only())
    }

    async fn query(&self, _query: &Query) -> StoreResult<Page> {
        Err(read_only())
    }

    /// The inner scan's pages with refused records left out; a page whose every record
    /// is refused is followed by the next, so that no page is empty while more follow.
    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> StoreResult<Page> {
        let mut cursor = after.map(str::to_owned);
        loop {
            let page = self.inner.scan(kind, cursor.as_deref(), page_size).await?;
            let last = page.records.last().map(|(_, c)| c.clone());
            let mut records = Vec::with_capacity(page.records.len());
            for (record, c) in page.records {
                if self.guard.take_record(kind, &record).await? {
                    records.push((record, c));
                }
            }
            match last {
                Some(last) if records.is_empty() && page.more => cursor = Some(last),
                _ => {
                    return Ok(Page {
                        records,
                        more: page.more,
                    });
                }
            }
        }
    }
}

/// The dump's filestore with what the [`ImportGuard`] refuses left out of every listing.
pub struct GuardedFilestore {
    inner: Arc<dyn Filestore>,
    guard: Arc<ImportGuard>,
}

impl std::fmt::Debug for GuardedFilestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedFilestore").finish_non_exhaustive()
    }
}

impl GuardedFilestore {
    pub fn new(inner: Arc<dyn Filestore>, guard: Arc<ImportGuard>) -> Self {
        GuardedFilestore { inner, guard }
    }
}

#[async_trait]
impl Filestore for GuardedFilestore {
    async fn get(&self, path: &str) -> StoreResult<Object> {
        if let Some(why) = self.guard.refuse_object(path).await? {
            return Err(StoreError::NotFound(format!(
                "object {path}: refused: {why}"
            )));
        }
        self.inner.get(path).await
    }

    async fn put(
        &self,
        _path: &str,
        _data: Vec<u8>,
        _condition: PutCondition,
    ) -> StoreResult<String> {
        Err(read_only())
    }

    async fn delete(&self, _path: &str) -> StoreResult<()> {
        Err(read_only())
    }

    /// The inner listing with refused objects left out; a page whose every object is
    /// refused is followed by the next.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> StoreResult<ListPage> {
        let mut after = after.map(str::to_owned);
        loop {
            let page = self.inner.list(prefix, after.as_deref(), limit).await?;
            let mut objects = Vec::with_capacity(page.objects.len());
            let last = page.objects.last().map(|o| o.path.clone());
            for attrs in page.objects {
                match self.guard.refuse_object(&attrs.path).await? {
                    None => objects.push(attrs),
                    Some(why) => self
                        .guard
                        .refusals
                        .refuse(format!("object {}", attrs.path), why),
                }
            }
            match (&page.next, last) {
                (Some(next), Some(_)) if objects.is_empty() => after = Some(next.clone()),
                _ => {
                    return Ok(ListPage {
                        objects,
                        next: page.next,
                    });
                }
            }
        }
    }
}
