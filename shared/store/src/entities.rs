//! How each model type is stored: its kind, its index keys and its write checks.
//!
//! Index slots per kind (the access patterns the services use; DynamoDB GSIs later):
//!
//! | kind | slot | pk | sk | serves |
//! |---|---|---|---|---|
//! | Project | 0 | `all` | id | list projects (admin) |
//! | Piped | 0 | project | created_at | list a project's pipeds |
//! | Application | 0 | project#piped, enabled only | name | a piped's ListApplications |
//! | Application | 1 | project | updated_at | web/API listings |
//! | Application | 2 | project#name | id | name lookups (admin CLI) |
//! | Command | 0 | project#piped, unhandled only | created_at | ListUnhandledCommands (sparse) |
//! | Command | 1 | `unhandled`, unhandled only | created_at | orphan-command timeout job (sparse) |
//! | Deployment | 0 | project#piped, not completed only | created_at | ListNotCompletedDeployments (sparse) |
//! | Deployment | 1 | project | updated_at | web/API listings |
//! | Deployment | 2 | project#app | updated_at | per-application listings |
//! | Event | 0 | project#event_key | created_at | GetLatestEvent |
//! | Event | 1 | project | created_at | ListEvents |
//! | DeploymentChain | 0 | `open`, not completed only | updated_at | chain controller (sparse) |
//! | DeploymentChain | 1 | project | updated_at | listings |
//! | DeploymentTrace | 0 | project | updated_at | listings |
//! | DeploymentTrace | 1 | project#commit_hash | id | lookup by commit |
//! | APIKey | 0 | project | created_at | list keys |

use wisp_proto::model;

use crate::collection::{Entity, sort_ts};
use crate::datastore::{INDEX_SLOTS, IndexKey, Kind};

/// Two parts of an index key, each escaped so that no pair can pass for another.
fn pair(a: &str, b: &str) -> String {
    use crate::support::escape_part;
    format!("{}#{}", escape_part(a, '#'), escape_part(b, '#'))
}

fn validate<T: wisp_model::validate::Validate>(e: &T) -> Result<(), String> {
    e.validate().map_err(|e| e.to_string())
}

pub mod slot {
    pub const PROJECT_ALL: usize = 0;
    pub const PIPED_BY_PROJECT: usize = 0;
    pub const APPLICATION_ENABLED_BY_PIPED: usize = 0;
    pub const APPLICATION_BY_PROJECT: usize = 1;
    pub const APPLICATION_BY_NAME: usize = 2;
    pub const COMMAND_UNHANDLED_BY_PIPED: usize = 0;
    pub const COMMAND_UNHANDLED: usize = 1;
    pub const DEPLOYMENT_OPEN_BY_PIPED: usize = 0;
    pub const DEPLOYMENT_BY_PROJECT: usize = 1;
    pub const DEPLOYMENT_BY_APPLICATION: usize = 2;
    pub const EVENT_BY_KEY: usize = 0;
    pub const EVENT_BY_PROJECT: usize = 1;
    pub const CHAIN_OPEN: usize = 0;
    pub const CHAIN_BY_PROJECT: usize = 1;
    pub const TRACE_BY_PROJECT: usize = 0;
    pub const TRACE_BY_COMMIT: usize = 1;
    pub const API_KEY_BY_PROJECT: usize = 0;
}

/// Partition values for the index slots above, in one place so writers and readers agree.
pub mod pk {
    pub const PROJECT_ALL: &str = "all";
    pub const COMMAND_UNHANDLED: &str = "unhandled";
    pub const CHAIN_OPEN: &str = "open";
    pub fn project_piped(project: &str, piped: &str) -> String {
        super::pair(project, piped)
    }
    pub fn project_name(project: &str, name: &str) -> String {
        super::pair(project, name)
    }
    pub fn project_application(project: &str, app: &str) -> String {
        super::pair(project, app)
    }
    pub fn project_event_key(project: &str, key: &str) -> String {
        super::pair(project, key)
    }
    pub fn project_commit(project: &str, hash: &str) -> String {
        super::pair(project, hash)
    }
}

fn stamp(created_at: &mut i64, updated_at: &mut i64, now: i64) {
    if *created_at == 0 {
        *created_at = now;
    }
    *updated_at = now;
}

impl Entity for model::Project {
    const KIND: Kind = Kind::Project;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        [Some(IndexKey::new(pk::PROJECT_ALL, &self.id)), None, None]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::Piped {
    const KIND: Kind = Kind::Piped;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        [
            Some(IndexKey::new(&self.project_id, sort_ts(self.created_at))),
            None,
            None,
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::Application {
    const KIND: Kind = Kind::Application;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        let enabled = (!self.disabled && !self.deleted).then(|| {
            IndexKey::new(
                pk::project_piped(&self.project_id, &self.piped_id),
                &self.name,
            )
        });
        [
            enabled,
            Some(IndexKey::new(&self.project_id, sort_ts(self.updated_at))),
            (!self.deleted)
                .then(|| IndexKey::new(pk::project_name(&self.project_id, &self.name), &self.id)),
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::Command {
    const KIND: Kind = Kind::Command;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        let open = self.status == model::CommandStatus::CommandNotHandledYet as i32;
        let created = sort_ts(self.created_at);
        [
            open.then(|| {
                IndexKey::new(
                    pk::project_piped(&self.project_id, &self.piped_id),
                    &created,
                )
            }),
            open.then(|| IndexKey::new(pk::COMMAND_UNHANDLED, &created)),
            None,
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::Deployment {
    const KIND: Kind = Kind::Deployment;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        let open = !wisp_model::status::is_deployment_completed(self.status);
        let updated = sort_ts(self.updated_at);
        [
            open.then(|| {
                IndexKey::new(
                    pk::project_piped(&self.project_id, &self.piped_id),
                    sort_ts(self.created_at),
                )
            }),
            Some(IndexKey::new(&self.project_id, &updated)),
            Some(IndexKey::new(
                pk::project_application(&self.project_id, &self.application_id),
                &updated,
            )),
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::Event {
    const KIND: Kind = Kind::Event;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        let created = sort_ts(self.created_at);
        [
            Some(IndexKey::new(
                pk::project_event_key(&self.project_id, &self.event_key),
                &created,
            )),
            Some(IndexKey::new(&self.project_id, &created)),
            None,
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::DeploymentChain {
    const KIND: Kind = Kind::DeploymentChain;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        let open = !wisp_model::status::is_chain_completed(self.status);
        let updated = sort_ts(self.updated_at);
        [
            open.then(|| IndexKey::new(pk::CHAIN_OPEN, &updated)),
            Some(IndexKey::new(&self.project_id, &updated)),
            None,
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::DeploymentTrace {
    const KIND: Kind = Kind::DeploymentTrace;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        [
            Some(IndexKey::new(&self.project_id, sort_ts(self.updated_at))),
            Some(IndexKey::new(
                pk::project_commit(&self.project_id, &self.commit_hash),
                &self.id,
            )),
            None,
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}

impl Entity for model::ApiKey {
    const KIND: Kind = Kind::ApiKey;
    fn id(&self) -> &str {
        &self.id
    }
    fn project_id(&self) -> &str {
        &self.project_id
    }
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS] {
        [
            Some(IndexKey::new(&self.project_id, sort_ts(self.created_at))),
            None,
            None,
        ]
    }
    fn touch(&mut self, now: i64) {
        stamp(&mut self.created_at, &mut self.updated_at, now);
    }
    fn check(&self) -> Result<(), String> {
        validate(self)
    }
}
