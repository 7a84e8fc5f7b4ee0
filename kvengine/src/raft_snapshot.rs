//! Raft snapshots of a shard (`LogMode::External`): what a replica that is behind the leader's
//! truncated log installs instead of the entries it missed.
//!
//! **What travels: the file list, nothing else.** The snapshot is the shard's file list as a
//! ChangeSet holding a [`Change::Snapshot`] (the same description a manifest rewrite stores),
//! and it stands for the log index equal to its `data_sequence`: every write at or below that
//! index is in the files, which the receiver opens from the shared object store; no SST is
//! copied. Memtable rows do not travel: the leader's log is never truncated above its own
//! `data_sequence`, so the receiver gets every entry after the snapshot's index from the log,
//! and applying them rebuilds the memtables *and* makes them durable on the receiver (its own
//! Raft log holds them). Rows shipped inside the snapshot would exist on the receiver only in
//! memory until its next flush, and a crash would lose them with the log already past them.
//!
//! **Install.** The receiver's files become the snapshot's (the one apply path), its memtables
//! are dropped (every row in them is at or below its applied index, which is below the
//! snapshot's, so the files hold them), and `write_sequence` becomes the index. Its `meta_seq`
//! becomes the sender's (the ChangeSet's `sequence`): the sender's files may already hold the
//! effect of Flush and compaction entries above the index, and the receiver replays those
//! entries as a restart does, skipping every ChangeSet at or below `meta_seq`. The range and
//! version must be the receiver's own: a replica that missed a split cannot catch up this way
//! (an error; the owner stops rather than diverge).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use changeset::{Change, ChangeSet};
use memtable::Memtable;

use crate::apply::{ApplyOutcome, apply_locked};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::shard_data::OpenTables;

/// The ChangeSet property of a Raft snapshot holding the sender's GC safe point (u64
/// big-endian): its files may have been compacted at it.
pub const GC_SAFE_POINT_PROPERTY: &str = "gc_safe_point";

impl Engine {
    /// The leader's side: the shard's file list as a snapshot ChangeSet. Its
    /// `Snapshot::data_sequence` is the log index the snapshot stands for.
    pub fn raft_snapshot(&self, shard_id: u64) -> Result<ChangeSet> {
        let shard = self.entry_shard("raft_snapshot", shard_id)?;
        let _m = shard.meta.lock();
        let mut cs = shard.data.load().files().to_changeset();
        // Its files were compacted at most at this safe point; the receiver starts there.
        cs.properties.insert(
            GC_SAFE_POINT_PROPERTY.to_string(),
            self.gc_safe_point().to_be_bytes().to_vec(),
        );
        Ok(cs)
    }

    /// A new replica's side, before [`Engine::install_raft_snapshot`]: creates the empty shard
    /// the snapshot `cs` describes (its id, range, version and base version; no files, nothing
    /// applied), so that the install finds a shard of the same range and version. A replica
    /// added to a region by a membership change has nothing before its first snapshot.
    pub fn create_shard_for_raft_snapshot(&self, cs: &ChangeSet) -> Result<()> {
        let Some(Change::Snapshot(snap)) = &cs.change else {
            return Err(Error::InvalidArgument {
                what: format!(
                    "expected a snapshot changeset to create shard {} from, found another change",
                    cs.shard_id
                ),
            });
        };
        let empty = changeset::Snapshot {
            start: snap.start.clone(),
            end: snap.end.clone(),
            base_version: snap.base_version,
            data_sequence: 0,
            l0_creates: Vec::new(),
            table_creates: Vec::new(),
        };
        let files = changeset::ShardFiles::from_snapshot(cs.shard_id, cs.shard_ver, 0, &empty)?;
        self.insert_new_shard(files)
    }

    /// The receiver's side: installs `cs` (from [`Engine::raft_snapshot`] on the leader) as
    /// the state at log index `index` (module docs). `Skipped` when this replica applied
    /// `index` already.
    ///
    /// Errors: `cs` is not a snapshot, or stands for another index, or for another range or
    /// version of the shard ([`Error::InvalidArgument`]); a table that cannot be opened fails
    /// with the object store's error. On any error nothing changed.
    pub fn install_raft_snapshot(&self, index: u64, cs: &ChangeSet) -> Result<ApplyOutcome> {
        let shard = self.entry_shard("install_raft_snapshot", cs.shard_id)?;
        let invalid = |what: String| Error::InvalidArgument { what };
        let Some(Change::Snapshot(snap)) = &cs.change else {
            return Err(invalid(format!(
                "expected a snapshot changeset for a raft snapshot, found another change: shard_id={}",
                cs.shard_id
            )));
        };
        if snap.data_sequence != index {
            return Err(invalid(format!(
                "raft snapshot at index {index} describes data_sequence={}: expected them equal",
                snap.data_sequence
            )));
        }
        let meta = shard.meta.lock();
        if index <= shard.write_sequence.load(Ordering::Acquire) {
            return Ok(ApplyOutcome::Skipped);
        }
        if let Some(sp) = cs
            .properties
            .get(GC_SAFE_POINT_PROPERTY)
            .and_then(|b| b.as_slice().try_into().ok())
            .map(u64::from_be_bytes)
        {
            // Before the files are visible (see `apply_locked`).
            self.set_gc_safe_point(sp);
        }
        let cur = shard.data.load_full();
        if cs.shard_ver != cur.ver() || snap.start != cur.start() || snap.end != cur.end() {
            return Err(invalid(format!(
                "raft snapshot of shard {} is for another range or version (a split this replica missed?): expected ver={} found ver={}",
                cs.shard_id,
                cur.ver(),
                cs.shard_ver
            )));
        }
        // The state's `meta_seq` is the sender's (`cs.sequence`): the last ChangeSet entry
        // whose effect its files hold, at or above `index`. The entries above `index` come
        // from the log next; a Flush or compaction among them at or below it is then skipped
        // as a restart skips it, where a receiver at `meta_seq = index` would refuse it (no
        // frozen memtable, inputs gone) and doom the files it created, which the snapshot
        // names, off the shared object store.
        let mut stamped = cs.clone();
        stamped.sequence = index.max(cs.sequence);
        let outcome = apply_locked(&self.inner, &shard, &meta, &stamped, OpenTables::default())?;
        let _w = shard.write.lock();
        let now = shard.data.load_full();
        let emptied = (*now)
            .clone()
            .with_memtables(Arc::new(Memtable::new()), Vec::new());
        shard.data.store(Arc::new(emptied));
        shard.freeze_proposed_at.store(0, Ordering::Release);
        shard.write_sequence.store(index, Ordering::Release);
        Ok(outcome)
    }
}
