//! The one apply path: how a ChangeSet changes a shard's live state.
//!
//! A shard's file list changes only through a [`ChangeSet`] (flush, compaction, split, ingest,
//! snapshot), and only here:
//!
//! 1. the manifest *stages* it: [`changeset::ShardFiles::apply`] on the manifest's copy of the
//!    shard's file list decides what the change does (applied, skipped as a duplicate,
//!    conflicted, or a split into children) and yields the resulting file lists;
//! 2. the live state is derived from those file lists ([`ShardData::derive`]): each named
//!    table is taken from the tables already open (the shard's current ones and the outputs
//!    the job just wrote) or opened from the object store. A table that cannot be read fails
//!    the apply here, before anything is durable;
//! 3. the manifest *commits* the ChangeSet (fdatasync'd), then the derived state is swapped in
//!    and the tables it no longer uses go to file GC.
//!
//! Nothing else in the engine edits a shard's tables: a flush, a compaction and a split each
//! build their outputs and end in [`propose`]; engine open derives every shard from the
//! manifest the same way (see `recovery`).
//!
//! **Followers.** When regions are replicated, the leader's flush, compaction and split
//! results travel through the replicated log as ChangeSets, and every replica applies them
//! with [`Engine::apply_change_set`]: the same staging, derivation and commit, with the
//! tables opened from the object store the leader wrote them to. Applying the same ChangeSet
//! twice is harmless (its sequence is not above `meta_seq` the second time: skipped), and a
//! compaction whose inputs a replica no longer has is conflicted on every replica alike,
//! because the decision depends only on the file list.

use std::sync::Arc;

use changeset::{Applied, Change, ChangeSet};
use parking_lot::MutexGuard;

use crate::engine::{Engine, Inner};
use crate::error::{Error, Result};
use crate::shard::Shard;
use crate::shard_data::{OpenTables, ShardData};

/// What applying a ChangeSet did to the live shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The shard's file list changed and its live state was derived anew.
    Applied,
    /// The ChangeSet's sequence was not above the shard's `meta_seq`: it was applied before.
    /// Nothing changed.
    Skipped,
    /// A compaction whose inputs were no longer all present: no file changed, `meta_seq`
    /// advanced. Its outputs are referenced by nobody; whoever wrote them deletes them.
    Conflicted,
    /// The shard split: it is gone, and these children (in key order) took its place.
    Split { children: Vec<u64> },
}

impl Engine {
    /// Applies a ChangeSet that was decided elsewhere (by the shard's leader, delivered by a
    /// replicated log) to the shard it names, through the one apply path (module docs). Its
    /// sequence must be the shard's next (`meta_seq + 1`) or an already applied one (skipped).
    ///
    /// Errors: an unknown shard is [`Error::ShardNotFound`]; a ChangeSet the file list
    /// rejects (wrong shard version, malformed content) is [`Error::ChangeSet`]; a table that
    /// cannot be read fails with the object store's or the table's error. On any error nothing
    /// changed.
    pub fn apply_change_set(&self, cs: &ChangeSet) -> Result<ApplyOutcome> {
        self.check_open()?;
        let shard = self.shard(cs.shard_id)?;
        let meta = shard.meta.lock();
        apply_locked(&self.inner, &shard, &meta, cs, OpenTables::default())
    }
}

/// The leader's side: `change` becomes the shard's next ChangeSet (sequence `meta_seq + 1`)
/// and is applied. `outputs` holds the tables the change adds, already open.
pub(crate) fn propose(
    inner: &Inner,
    shard: &Shard,
    change: Change,
    outputs: OpenTables,
) -> Result<ApplyOutcome> {
    let meta = shard.meta.lock();
    let cs = next_change_set(shard, change);
    apply_locked(inner, shard, &meta, &cs, outputs)
}

/// The shard's next ChangeSet, holding `change`. The caller holds the shard's `meta` lock, so
/// the sequence stays the next until the ChangeSet is applied.
pub(crate) fn next_change_set(shard: &Shard, change: Change) -> ChangeSet {
    let cur = shard.data.load();
    ChangeSet {
        shard_id: shard.id,
        shard_ver: cur.ver(),
        sequence: cur.meta_seq() + 1,
        properties: Default::default(),
        change: Some(change),
    }
}

/// Stages `cs`, derives the new live state, commits `cs` and swaps the state in (module
/// docs). The caller holds the shard's `meta` lock (`_meta`).
pub(crate) fn apply_locked(
    inner: &Inner,
    shard: &Shard,
    _meta: &MutexGuard<'_, ()>,
    cs: &ChangeSet,
    mut open: OpenTables,
) -> Result<ApplyOutcome> {
    let staged = inner.manifest.stage(cs)?;
    if let Applied::Skipped { .. } = staged.applied() {
        return Ok(ApplyOutcome::Skipped);
    }
    let source = inner.table_source();
    // Tables open from here on: the shard's current ones, which a job's own writes cannot
    // change (file lists change only under `meta`, which the caller holds), and the outputs.
    open.extend_from(&shard.data.load());
    if let Applied::Split(_) = staged.applied() {
        // A split is recorded only when every write is in a file (`split`), so the children
        // start with empty memtables.
        let children = staged
            .shards()
            .iter()
            .map(|files| ShardData::derive(files.clone(), &open, source))
            .collect::<Result<Vec<_>>>()?;
        inner.manifest.commit(staged)?;
        let ids = children.iter().map(|c| c.files().id()).collect();
        let mut shards = inner.shards.write();
        shards.remove(&shard.id);
        for child in &children {
            open = open.without(child);
        }
        for child in children {
            let id = child.files().id();
            let write_sequence = child.data_sequence();
            shards.insert(id, Arc::new(Shard::new(id, write_sequence, child)));
        }
        drop(shards);
        crate::file_gc::retire(inner, open);
        return Ok(ApplyOutcome::Split { children: ids });
    }
    let conflicted = matches!(staged.applied(), Applied::Conflicted(_));
    let [files] = staged.shards() else {
        return Err(Error::Corruption {
            what: "manifest",
            detail: format!(
                "expected one file list for the changeset, found={} shard_id={}",
                staged.shards().len(),
                shard.id
            ),
            path: inner.manifest.path().to_path_buf(),
            offset: 0,
        });
    };
    let next = ShardData::derive(files.clone(), &open, source)?;
    inner.manifest.commit(staged)?;
    let next = {
        // The memtables of the moment of the swap: writers swap in a new state too, to
        // freeze the active memtable, and only under `write`.
        let _w = shard.write.lock();
        let now = shard.data.load();
        let next = Arc::new(next.with_memtables(now.mem.clone(), now.frozen.clone()));
        shard.data.store(next.clone());
        next
    };
    crate::file_gc::retire(inner, open.without(&next));
    Ok(if conflicted {
        ApplyOutcome::Conflicted
    } else {
        ApplyOutcome::Applied
    })
}
