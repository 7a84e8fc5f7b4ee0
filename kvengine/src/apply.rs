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
//! build their outputs and end in [`apply_locked`], whichever log the engine keeps; engine
//! open derives every shard from the manifest the same way (see `recovery`).
//!
//! * With its own WAL (`LogMode::Internal`), a job's result becomes the shard's next ChangeSet
//!   at once ([`submit`] → [`propose`], sequence `meta_seq + 1`).
//! * **Followers**, and leaders, of a log kept outside the engine (`LogMode::External`, a Raft
//!   group): only the leader runs flush and compaction, and [`submit`] hands the result to the
//!   owner's `ChangeSetSink` (`change_set_sink`). Every replica then applies the entry when its
//!   log delivers it, with [`Engine::apply_change_set_at`] (`apply_at_index`): the ChangeSet's
//!   sequence becomes the entry's log index, and it goes through the same staging, derivation
//!   and commit, with the tables opened from the object store the leader wrote them to. A
//!   Split is decided at apply time on every replica (`Engine::apply_split`). Applying the
//!   same entry twice is harmless (its index is not above `meta_seq` the second time:
//!   skipped); a compaction whose inputs a replica no longer has is conflicted on every
//!   replica alike, because the decision depends only on the file list; and an entry made
//!   stale by a split or by an earlier flush of the same memtable is rejected on every replica
//!   alike, because it depends only on the state at the entry's index. The files an apply
//!   retires are recorded with the entry's index and deleted once no replica of the region
//!   needs them any more (`file_gc`).

use std::sync::Arc;

use changeset::{Applied, Change, ChangeSet};
use parking_lot::MutexGuard;

use crate::engine::{Engine, Inner};
use crate::error::{Error, Result};
use crate::options::LogMode;
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
    /// The shard split: it is gone, and these children (in key order) took its place. The
    /// left child of a split applied from an external log keeps the shard's id.
    Split { children: Vec<u64> },
    /// `External` log mode only: the entry was decided against at its index, the same way on
    /// every replica (a split over non-empty memtables or outside the range, a ChangeSet made
    /// for an older shard version or for a memtable already flushed). Nothing changed but the
    /// write sequence, which is the entry's index.
    Rejected { reason: String },
}

impl Engine {
    /// Applies a ChangeSet that was decided elsewhere (a tool, a test) to the shard it names,
    /// through the one apply path (module docs). Its sequence must be above the shard's
    /// `meta_seq` or an already applied one (skipped).
    ///
    /// Errors: an unknown shard is [`Error::ShardNotFound`]; a ChangeSet the file list
    /// rejects (wrong shard version, malformed content) is [`Error::ChangeSet`]; a table that
    /// cannot be read fails with the object store's or the table's error. On any error nothing
    /// changed.
    ///
    /// `Internal` log mode only: with an external log, ChangeSets are entries of the log and
    /// arrive with their index through [`Engine::apply_change_set_at`].
    pub fn apply_change_set(&self, cs: &ChangeSet) -> Result<ApplyOutcome> {
        self.inner
            .expect_log_mode("apply_change_set", LogMode::Internal)?;
        self.check_open()?;
        let shard = self.shard(cs.shard_id)?;
        let meta = shard.meta.lock();
        apply_locked(&self.inner, &shard, &meta, cs, OpenTables::default())
    }
}

/// A background job's result: `change`, computed from the shard state `read`, with `outputs`
/// the tables it adds, already open. With the engine's own log it is applied at once
/// ([`propose`]); with an external one it is proposed to the log and applied when the log
/// delivers it (`change_set_sink::propose`). Returns the apply's outcome.
pub(crate) fn submit(
    inner: &Inner,
    shard: &Shard,
    read: &ShardData,
    change: Change,
    outputs: OpenTables,
) -> Result<ApplyOutcome> {
    match inner.log_mode() {
        LogMode::Internal => propose(inner, shard, change, outputs),
        LogMode::External => {
            crate::change_set_sink::propose(inner, shard.id, read.ver(), change, outputs)
        }
    }
}

/// `change` becomes the shard's next ChangeSet (sequence `meta_seq + 1`) and is applied.
/// `outputs` holds the tables the change adds, already open.
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
///
/// Split children start with empty memtables and `write_sequence = data_sequence`, which the
/// split stamps (an external log: its index) or inherits from the parent (every write was
/// flushed first).
pub(crate) fn apply_locked(
    inner: &Inner,
    shard: &Shard,
    _meta: &MutexGuard<'_, ()>,
    cs: &ChangeSet,
    mut open: OpenTables,
) -> Result<ApplyOutcome> {
    // Before the outputs are visible: a reader checks its timestamp against the safe point
    // after taking its snapshot, so a snapshot holding these files sees this safe point.
    if let Some(Change::Compaction(c)) = &cs.change {
        inner
            .gc_safe_point
            .fetch_max(c.safe_point, std::sync::atomic::Ordering::AcqRel);
    }
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
        for child in &children {
            open = open.without(child);
        }
        // Retired before the children are in place: the left child keeps the shard's id and
        // starts at the split's index, and a replica's GC safe index must not read that index
        // before the files it retired are pending (`file_gc`). The parent's state, still in
        // place, holds them meanwhile.
        let before = shard.data.load();
        crate::file_gc::retire(
            inner,
            open,
            Some(before.files()),
            inner.retirement(before.files(), cs.sequence),
        );
        let mut shards = inner.shards.write();
        shards.remove(&shard.id);
        for child in children {
            let id = child.files().id();
            let write_sequence = child.data_sequence();
            shards.insert(id, Arc::new(Shard::new(id, write_sequence, child)));
        }
        drop(shards);
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
    let before = shard.data.load_full();
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
    crate::file_gc::retire(
        inner,
        open.without(&next),
        Some(before.files()),
        inner.retirement(before.files(), cs.sequence),
    );
    Ok(if conflicted {
        ApplyOutcome::Conflicted
    } else {
        ApplyOutcome::Applied
    })
}
