//! Typed access to one kind: entities in, entities out. Handles encoding, index keys,
//! optimistic read-modify-write with retries, and filtered pagination with cursors that
//! are empty on the last page.

use std::marker::PhantomData;
use std::sync::{Arc, PoisonError};

use prost::Message;

use crate::cursor;
use crate::datastore::{Datastore, INDEX_SLOTS, IndexKey, Kind, Query, Record};
use crate::error::{Result, StoreError};
use crate::optimistic::{Attempt, optimistic_write};
use crate::polls::PollAnswers;

/// How a protobuf message is stored in the datastore.
pub trait Entity: Message + Default + Clone + PartialEq + Send + Sync + 'static {
    const KIND: Kind;
    fn id(&self) -> &str;
    fn project_id(&self) -> &str;
    /// Index entries for this entity's current state (see docs/ARCHITECTURE.md).
    fn index_keys(&self) -> [Option<IndexKey>; INDEX_SLOTS];
    /// Stamp `updated_at` (and `created_at` if unset) before a write.
    fn touch(&mut self, now: i64);
    /// Checked before every write; a failure changes nothing.
    fn check(&self) -> std::result::Result<(), String> {
        Ok(())
    }
    /// Unix seconds after which the record may be dropped.
    fn expires_at(&self) -> Option<i64> {
        None
    }
}

/// The record that stores `entity` (its index entries and expiry included), at `version`.
pub fn record_of<E: Entity>(entity: &E, version: u64) -> Record {
    Record {
        id: entity.id().to_string(),
        project_id: entity.project_id().to_string(),
        version,
        data: entity.encode_to_vec(),
        indexes: entity.index_keys(),
        expires_at: entity.expires_at(),
    }
}

/// Zero-padded decimal so that string order equals numeric order (negative clamps to 0).
pub fn sort_ts(ts: i64) -> String {
    format!("{:020}", ts.max(0))
}

/// The one clock (`wisp_model::clock`), here for the crates built on the stores.
pub use wisp_model::clock::now_unix;

/// A range read on one index, with an optional in-memory predicate.
pub struct ListOptions<'a, E> {
    pub slot: usize,
    pub pk: String,
    pub sk_from: Option<String>,
    pub sk_to: Option<String>,
    pub descending: bool,
    /// 0 means no limit (read the whole range).
    pub limit: usize,
    /// Cursor from a previous page; empty means the first page.
    pub cursor: String,
    pub filter: Option<&'a (dyn Fn(&E) -> bool + Send + Sync)>,
}

impl<'a, E> std::fmt::Debug for ListOptions<'a, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListOptions").finish_non_exhaustive()
    }
}

impl<E> ListOptions<'_, E> {
    pub fn new(slot: usize, pk: impl Into<String>) -> Self {
        ListOptions {
            slot,
            pk: pk.into(),
            sk_from: None,
            sk_to: None,
            descending: false,
            limit: 0,
            cursor: String::new(),
            filter: None,
        }
    }
}

/// One page of entities; `cursor` is empty when there is nothing after it.
#[derive(Debug, Clone)]
pub struct EntityPage<E> {
    pub items: Vec<E>,
    pub cursor: String,
}

pub struct Collection<E: Entity> {
    ds: Arc<dyn Datastore>,
    /// The pollers' answers from memory and their change tokens (`polls`), with a shared
    /// cache: every write here renews the tokens of the watched ranges it touches.
    polls: Option<Arc<PollAnswers>>,
    _entity: PhantomData<fn() -> E>,
}

impl<E: Entity> std::fmt::Debug for Collection<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").finish_non_exhaustive()
    }
}

impl<E: Entity> Clone for Collection<E> {
    fn clone(&self) -> Self {
        Collection {
            ds: self.ds.clone(),
            polls: self.polls.clone(),
            _entity: PhantomData,
        }
    }
}

impl<E: Entity> Collection<E> {
    pub fn new(ds: Arc<dyn Datastore>) -> Self {
        Collection {
            ds,
            polls: None,
            _entity: PhantomData,
        }
    }

    /// A collection whose writes renew the change tokens of `polls` and whose
    /// [`Collection::list_polled`] answers from memory while they hold.
    pub fn with_polls(ds: Arc<dyn Datastore>, polls: Option<Arc<PollAnswers>>) -> Self {
        Collection {
            ds,
            polls,
            _entity: PhantomData,
        }
    }

    pub fn datastore(&self) -> &Arc<dyn Datastore> {
        &self.ds
    }

    fn decode(record: &Record) -> Result<E> {
        E::decode(record.data.as_slice())
            .map_err(|e| StoreError::internal_from(format!("corrupt {} {}", E::KIND, record.id), e))
    }

    fn encode(entity: &E, version: u64) -> Record {
        record_of(entity, version)
    }

    /// Any project; for callers that check ownership themselves (e.g. the piped verifier).
    pub async fn get_any(&self, id: &str) -> Result<E> {
        let record = self.ds.get(E::KIND, id).await?;
        Self::decode(&record)
    }

    /// `NotFound` unless the entity exists in `project_id`: queries never cross projects.
    pub async fn get(&self, project_id: &str, id: &str) -> Result<E> {
        let entity = self.get_any(id).await?;
        if entity.project_id() != project_id {
            return Err(StoreError::NotFound(format!("{} {id}", E::KIND)));
        }
        Ok(entity)
    }

    /// Stamps timestamps, checks, and creates. `AlreadyExists` if the id is taken.
    pub async fn create(&self, mut entity: E) -> Result<E> {
        entity.touch(now_unix());
        entity.check().map_err(StoreError::InvalidArgument)?;
        self.ds.create(E::KIND, Self::encode(&entity, 1)).await?;
        if let Some(polls) = &self.polls {
            polls.changed(E::KIND, &[], &entity.index_keys()).await;
        }
        Ok(entity)
    }

    /// Optimistic read-modify-write: `mutate` may run several times (on lost races), so it
    /// must be a pure function of the entity it is given. Returns the stored entity.
    /// When `mutate` leaves the entity as it was, nothing is written (not even
    /// `updated_at`).
    pub async fn update<F>(&self, project_id: &str, id: &str, mutate: F) -> Result<E>
    where
        F: FnMut(&mut E) -> Result<()> + Send,
    {
        // Behind a lock only so that each attempt's future can hold it without borrowing
        // the closure (see `optimistic_write`); attempts never overlap.
        let mutate = std::sync::Mutex::new(mutate);
        let mutate = &mutate;
        // The index entries the written record had, for the change tokens.
        let replaced = std::sync::Mutex::new(None);
        let replaced_ref = &replaced;
        let stored = optimistic_write(|| async move {
            let record = self.ds.get(E::KIND, id).await?;
            let mut entity = Self::decode(&record)?;
            if entity.project_id() != project_id {
                return Err(StoreError::NotFound(format!("{} {id}", E::KIND)));
            }
            let before = entity.clone();
            (mutate.lock().unwrap_or_else(PoisonError::into_inner))(&mut entity)?;
            if entity == before
                && record.indexes == entity.index_keys()
                && record.expires_at == entity.expires_at()
            {
                // Nothing to change (a piped re-reporting the same sync state, the same
                // labels from git, ...): no write, and `updated_at` stays. Index entries
                // are compared too, so that a record stored under older index rules is
                // still rewritten by its next update.
                return Ok(Attempt::Done(entity));
            }
            entity.touch(now_unix());
            entity.check().map_err(StoreError::InvalidArgument)?;
            *replaced_ref.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(record.indexes.clone());
            let written = self
                .ds
                .put(
                    E::KIND,
                    Self::encode(&entity, record.version),
                    record.version,
                )
                .await;
            Ok(Attempt::Written(written.map(|()| entity)))
        })
        .await?;
        let before = replaced
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if let (Some(polls), Some(before)) = (&self.polls, before) {
            polls.changed(E::KIND, &before, &stored.index_keys()).await;
        }
        Ok(stored)
    }

    /// Reads one index range, applying `filter`, paging until `limit` matches are found.
    pub async fn list(&self, opts: ListOptions<'_, E>) -> Result<EntityPage<E>> {
        let mut after = if opts.cursor.is_empty() {
            None
        } else {
            Some(cursor::unwrap(&opts.cursor)?)
        };
        let want = if opts.limit == 0 {
            usize::MAX
        } else {
            opts.limit
        };
        let page_size = if opts.limit == 0 {
            500
        } else {
            (opts.limit + 1).clamp(10, 500)
        };
        let mut items: Vec<E> = Vec::new();
        let mut last_cursor: Option<String> = None;
        loop {
            let query = Query {
                kind: E::KIND,
                slot: opts.slot,
                pk: opts.pk.clone(),
                sk_from: opts.sk_from.clone(),
                sk_to: opts.sk_to.clone(),
                descending: opts.descending,
                page_size,
                after: after.clone(),
            };
            let page = self.ds.query(&query).await?;
            for (record, cursor) in &page.records {
                let entity = Self::decode(record)?;
                if let Some(filter) = opts.filter
                    && !filter(&entity)
                {
                    // Still advance past it: a later page must not re-read it.
                    after = Some(cursor.clone());
                    continue;
                }
                if items.len() == want {
                    // One match beyond the limit exists: hand out a cursor.
                    return Ok(EntityPage {
                        items,
                        cursor: last_cursor.map(|c| cursor::wrap(&c)).unwrap_or_default(),
                    });
                }
                items.push(entity);
                last_cursor = Some(cursor.clone());
                after = Some(cursor.clone());
            }
            if !page.more || page.records.is_empty() {
                return Ok(EntityPage {
                    items,
                    cursor: String::new(),
                });
            }
            if let Some((_, cursor)) = page.records.last() {
                after = Some(cursor.clone());
            }
        }
    }

    /// A poller's read of a whole range: from this process's memory while the range has
    /// not changed (`polls`), else as [`Collection::list_all`].
    pub async fn list_polled(&self, slot: usize, pk: String) -> Result<Vec<E>> {
        match &self.polls {
            Some(polls) => {
                let key = pk.clone();
                polls
                    .read(E::KIND, slot, &key, move || self.list_all(slot, pk, None))
                    .await
            }
            None => self.list_all(slot, pk, None).await,
        }
    }

    /// Convenience: the whole range, unfiltered beyond `filter`.
    pub async fn list_all(
        &self,
        slot: usize,
        pk: impl Into<String>,
        filter: Option<&(dyn Fn(&E) -> bool + Send + Sync)>,
    ) -> Result<Vec<E>> {
        let mut opts = ListOptions::new(slot, pk);
        opts.filter = filter;
        Ok(self.list(opts).await?.items)
    }
}
