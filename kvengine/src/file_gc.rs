//! File GC: deleting files from the object store once nothing can read them.
//!
//! When an apply derives a state that no longer uses some tables (a compaction's inputs, a
//! parent's files that no child overlaps, a conflicted compaction's outputs), it hands them here
//! ([`retire`]) with their open handles. A retired file is deleted when both hold:
//!
//! * no shard's file list references it (`Manifest::live_file_ids`): split children share
//!   their parent's files, so a file one child compacted away may still be another's;
//! * no snapshot holds it: the retired handle is the only one left (`handle_count() == 1`).
//!
//! A failed delete is retried at the next collection. GC runs after every compaction round and
//! on demand ([`Engine::collect_garbage`]).

use std::collections::BTreeSet;

use sst::{L0Table, Table};
use types::FileId;

use crate::engine::{Engine, Inner};
use crate::shard_data::OpenTables;

/// A retired file waiting for deletion; holds a handle so its reader count can be checked.
pub(crate) enum PendingFile {
    L0(L0Table),
    Table(Table),
}

impl PendingFile {
    fn id(&self) -> u64 {
        match self {
            PendingFile::L0(t) => t.file_id(),
            PendingFile::Table(t) => t.file_id(),
        }
    }

    /// True when only this pending entry still holds the file.
    fn unused(&self) -> bool {
        match self {
            PendingFile::L0(t) => t.handle_count() == 1,
            PendingFile::Table(t) => t.handle_count() == 1,
        }
    }
}

/// Queues tables a new state no longer uses for deletion.
///
/// A file already queued is not queued again: split children share their parent's table
/// handles, so each child retires the same file, and two queued handles would keep its handle
/// count above one for ever.
pub(crate) fn retire(inner: &Inner, unused: OpenTables) {
    let (l0s, tables) = unused.into_tables();
    if l0s.is_empty() && tables.is_empty() {
        return;
    }
    let mut pending = inner.pending_deletes.lock();
    let queued: BTreeSet<u64> = pending.iter().map(PendingFile::id).collect();
    let files = l0s
        .into_iter()
        .map(PendingFile::L0)
        .chain(tables.into_iter().map(PendingFile::Table));
    pending.extend(files.filter(|f| !queued.contains(&f.id())));
}

/// Deletes every retired file that no shard references and no snapshot holds.
pub(crate) fn collect(inner: &Inner) {
    let mut pending = inner.pending_deletes.lock();
    if pending.is_empty() {
        return;
    }
    let live = inner.manifest.live_file_ids();
    pending.retain(|f| {
        if !f.unused() || live.contains(&f.id()) {
            return true;
        }
        match inner.dfs.delete(FileId(f.id())) {
            Ok(()) => false,
            Err(e) => {
                tracing::warn!(file_id = f.id(), error = %e, "delete of a replaced file failed; will retry");
                true
            }
        }
    });
}

impl Engine {
    /// Every file id the manifest references.
    pub fn live_file_ids(&self) -> BTreeSet<u64> {
        self.inner.manifest.live_file_ids()
    }

    /// Retired files still waiting for their last reader.
    pub fn pending_deletes(&self) -> usize {
        self.inner.pending_deletes.lock().len()
    }

    /// Deletes retired files that no snapshot holds any more. Runs after every compaction and
    /// periodically in the background; exposed for tests and tools.
    pub fn collect_garbage(&self) {
        collect(&self.inner);
    }
}
