//! Answers of the pipeds' polls from this process's memory, kept right across processes
//! by change tokens in the shared cache (docs/COSTS.md "Lambda or Fargate", lever 2).
//!
//! A piped asks for its unhandled commands every 5 s, its open deployments every 10 s
//! and its enabled applications every minute; the answers change only when one of those
//! records is written. Each such range (kind, index slot, partition) has a token in the
//! shared cache (Redis). Every write through a [`crate::collection::Collection`] that puts
//! a record into, changes it inside or takes it out of a watched range sets that range's
//! token to a new value *after* the write committed. A poll reads the token: when this
//! process holds an answer fetched under the same token, that answer is current; else it
//! queries the datastore and keeps the answer under the token read before the query, so
//! that a write landing during the query is seen at the next poll. A command created on
//! one instance therefore reaches a piped polling another instance at its next poll.
//!
//! Guards: the datastore's index reads are eventually consistent (DynamoDB's GSIs), so an
//! answer fetched within [`SETTLE`] of the token's change is not kept; an answer is kept
//! at most [`MAX_AGE`], which bounds the staleness a lost token write (the cache failing
//! between a write and its token) could cause; without a shared cache, or when it fails,
//! every poll queries the datastore as before.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cache::Cache;
use crate::datastore::{IndexKey, Kind};
use crate::entities::slot;
use crate::error::Result;

/// An answer fetched this soon after its range changed is not kept: an index read may
/// not show the write yet (DynamoDB's GSIs lag it, typically well under a second).
pub const SETTLE: Duration = Duration::from_secs(5);
/// An answer is used at most this long after it was fetched, whatever the token says:
/// the bound on how late a lost token write (the cache failing between a write and its
/// token) can make an answer. A piped's applications, polled every minute, are read from
/// the datastore once per this period at most when nothing changes.
pub const MAX_AGE: Duration = Duration::from_secs(300);
/// Answers kept at most; past it the memory starts over (one per piped and poll).
const MAX_ENTRIES: usize = 200_000;
const TOKEN_PREFIX: &str = "WISP:CHANGED:";

/// The ranges pollers read: a piped's unhandled commands, open deployments and enabled
/// applications.
pub fn watched(kind: Kind, index: usize) -> bool {
    matches!(
        (kind, index),
        (Kind::Command, slot::COMMAND_UNHANDLED_BY_PIPED)
            | (Kind::Deployment, slot::DEPLOYMENT_OPEN_BY_PIPED)
            | (Kind::Application, slot::APPLICATION_ENABLED_BY_PIPED)
    )
}

struct Answer {
    token: Vec<u8>,
    fetched: Instant,
    value: Arc<dyn Any + Send + Sync>,
}

/// Change tokens and this process's answers. Shared by the collections of one `Stores`.
pub struct PollAnswers {
    cache: Arc<dyn Cache>,
    settle: Duration,
    answers: Mutex<HashMap<String, Answer>>,
}

impl std::fmt::Debug for PollAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollAnswers").finish_non_exhaustive()
    }
}

fn token_key(kind: Kind, index: usize, pk: &str) -> String {
    format!("{TOKEN_PREFIX}{kind}:{index}:{pk}")
}

/// `<unix ms>:<random>`: unique, and telling when the range last changed.
fn new_token() -> Vec<u8> {
    format!(
        "{}:{:016x}",
        wisp_model::clock::now_unix_ms(),
        rand::random::<u64>()
    )
    .into_bytes()
}

fn settled(token: &[u8], settle: Duration) -> bool {
    let Some(ms) = std::str::from_utf8(token)
        .ok()
        .and_then(|t| t.split_once(':'))
        .and_then(|(ms, _)| ms.parse::<i64>().ok())
    else {
        return false;
    };
    let settle_ms = i64::try_from(settle.as_millis()).unwrap_or(i64::MAX);
    wisp_model::clock::now_unix_ms().saturating_sub(ms) >= settle_ms
}

impl PollAnswers {
    /// Answers from memory when `cache` is shared by every instance; `None` otherwise (a
    /// per-process cache cannot tell one instance about another's writes).
    pub fn new(cache: Arc<dyn Cache>, settle: Duration) -> Option<Arc<PollAnswers>> {
        cache.shared().then(|| {
            Arc::new(PollAnswers {
                cache,
                settle,
                answers: Mutex::new(HashMap::new()),
            })
        })
    }

    /// After a committed write of a `kind` record whose index entries were `before` (none
    /// for a new record) and are `after`: every watched range either names gets a new
    /// token. A failure is logged; answers are then at most [`MAX_AGE`] late.
    pub async fn changed(
        &self,
        kind: Kind,
        before: &[Option<IndexKey>],
        after: &[Option<IndexKey>],
    ) {
        let mut keys: Vec<String> = [before, after]
            .into_iter()
            .flat_map(|entries| entries.iter().enumerate())
            .filter(|(index, entry)| entry.is_some() && watched(kind, *index))
            .filter_map(|(index, entry)| entry.as_ref().map(|e| token_key(kind, index, &e.pk)))
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            if let Err(e) = self.cache.put(&key, new_token(), None).await {
                tracing::warn!(
                    key,
                    error = %crate::error::chain(&e),
                    max_lag_secs = MAX_AGE.as_secs(),
                    "poll answers: change token not written; answers may lag until they expire"
                );
            }
        }
    }

    /// The answer of the watched range (`kind`, `index`, `pk`): this process's copy if the
    /// range has not changed since it was fetched, else `query`'s.
    pub async fn read<E, F, Fut>(
        &self,
        kind: Kind,
        index: usize,
        pk: &str,
        query: F,
    ) -> Result<Vec<E>>
    where
        E: Clone + Send + Sync + 'static,
        F: FnOnce() -> Fut + Send,
        Fut: std::future::Future<Output = Result<Vec<E>>> + Send,
    {
        if !watched(kind, index) {
            return query().await;
        }
        let key = token_key(kind, index, pk);
        let token = match self.cache.get(&key).await {
            Ok(Some(token)) => Some(token),
            // Never written, or evicted: a token from now on (its time keeps the first
            // answer under it from being kept until it has settled).
            Ok(None) => {
                let token = new_token();
                self.cache
                    .put(&key, token.clone(), None)
                    .await
                    .ok()
                    .map(|()| token)
            }
            Err(_) => None,
        };
        if let Some(token) = &token
            && let Some(hit) = self.lookup::<E>(&key, token)
        {
            return Ok(hit);
        }
        let fresh = query().await?;
        if let Some(token) = token
            && settled(&token, self.settle)
        {
            self.remember(key, token, fresh.clone());
        }
        Ok(fresh)
    }

    fn lookup<E: Clone + Send + Sync + 'static>(&self, key: &str, token: &[u8]) -> Option<Vec<E>> {
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = answers.get(key)?;
        if answer.token != token || answer.fetched.elapsed() >= MAX_AGE {
            return None;
        }
        answer.value.downcast_ref::<Vec<E>>().cloned()
    }

    fn remember<E: Send + Sync + 'static>(&self, key: String, token: Vec<u8>, value: Vec<E>) {
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers.len() >= MAX_ENTRIES && !answers.contains_key(&key) {
            answers.clear();
        }
        answers.insert(
            key,
            Answer {
                token,
                fetched: Instant::now(),
                value: Arc::new(value),
            },
        );
    }
}
