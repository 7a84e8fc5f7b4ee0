//! File GC: deleting files from the object store once nothing can read them.
//!
//! When an apply derives a state that no longer uses some tables (a compaction's inputs, a
//! parent's files that no child overlaps, a conflicted compaction's outputs, the files a Raft
//! snapshot replaced), it hands them here ([`retire`]) with their open handles. A retired file
//! is deleted when all of these hold:
//!
//! * no shard's file list here references it (`Manifest::live_file_ids`): split children share
//!   their parent's files, so a file one child compacted away may still be another's;
//! * no snapshot here holds it: the retired handle is the only one left (`handle_count() == 1`);
//! * with an external (Raft) log, **no replica of the region needs it any more**.
//!
//! **Across replicas** (`LogMode::External`). Every replica applies the same ChangeSet at the
//! same log index, so the same entry retires the same file everywhere; each retirement is
//! recorded with that index ([`Retirement`]). A replica that has not applied the entry yet
//! still names the file, and one serving a read may hold a snapshot of it. So each replica
//! reports its **safe index** for the region ([`Engine::file_gc_safe_index`]): the highest
//! index such that it needs no file the region retired at or below it, i.e. its applied index,
//! lowered below the retirement of every pending file a snapshot here still holds. The owner
//! of the log (`raftstore`) carries the reports to the leader, whose minimum over every voter
//! (one that never reported counts as 0) is the region's **group index**: no replica needs a
//! file the region retired at or below it. Every replica learns it
//! ([`Engine::raise_file_gc_group_index`]) and deletes a file once the group index of each
//! region that retired it reached the retirement. Every replica deletes, not only the leader:
//! a delete is idempotent, and a leader that dies between learning the group index and
//! deleting leaves the file to the others instead of leaking it.
//!
//! Both indexes only grow, and once true stay true: a file retired at or below a replica's
//! safe index is not in its file list (an index once applied is never unapplied, a restart
//! rebuilds the state from the manifest, past every retirement), and a snapshot of it can no
//! longer be taken (snapshots come from the live state).
//!
//! **Split children** share their parent's files, and each child retires a shared file in its
//! own log. Each retirement is recorded on the one pending entry of the file, and the file
//! waits for all of them, and for no file list here to name it (the siblings' replicas are on
//! the same servers, so a sibling that still names it here has not retired it anywhere yet).
//! While a sibling here still names it, the file does not count against the safe index of the
//! children that retired it (it would hold back every later delete of theirs until the sibling
//! compacts, maybe never); a snapshot holding it then is seen by the sibling that retires it
//! last, whose group index the file waits for too.
//!
//! **Restart.** Pending files live in memory: what was retired before a restart and not yet
//! deleted stays in the object store (a leak, never a loss). And a replica that restarted has
//! forgotten which regions retired a file split children shared: a sibling's retirement after
//! the restart would otherwise let it delete a file a lagging replica of the other child still
//! names. So until every region's group index reached the index its manifest held at open
//! (`meta_seq`, past every retirement before the restart), no retired file is deleted here.
//!
//! **Replicas that moved** (membership changes). "The siblings' replicas are on the same
//! servers" stops holding once replicas move: a server may hold one child of a split and not
//! the other, whose replicas elsewhere still read the files the two shared. So a retired file
//! is deleted only once the regions that retired it here **cover its key range**: each
//! retirement records the retiring region's range, and each file the key range its file list
//! gave it. A file only one region ever held lies inside that region's range; a file a split
//! shared waits until every sibling's range that overlaps it retired it here too. When a
//! sibling lives on other servers only, this server never deletes the file (a leak, never a
//! loss): the servers that hold every sibling do. Files no file list named (a conflicted
//! compaction's outputs) have no range to cover.
//!
//! A failed delete is retried at the next collection. GC runs after every compaction round (on
//! every replica) and on demand ([`Engine::collect_garbage`]); deletes run without the lock the
//! store loop's reports take.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;

use bytes::Bytes;

use sst::{L0Table, Table};
use types::FileId;

use crate::engine::{Engine, Inner};
use crate::metrics;
use crate::shard_data::OpenTables;

/// Where an apply retired a file (`LogMode::External`): the entry `index` of shard (region)
/// `shard_id`'s log, the same entry on every replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retirement {
    pub(crate) shard_id: u64,
    pub(crate) index: u64,
    /// The retiring region's range then (`end` empty: unbounded): what of the retired files'
    /// key ranges it vouches for (module docs, "Replicas that moved").
    pub(crate) start: Bytes,
    pub(crate) end: Bytes,
}

/// Whether the ranges `[start, end)` of `retired` together hold every key of
/// `[smallest, biggest]` (module docs, "Replicas that moved").
fn covered(smallest: &[u8], biggest: &[u8], retired: &[Retirement]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8])> = retired
        .iter()
        .map(|r| (r.start.as_ref(), r.end.as_ref()))
        .collect();
    ranges.sort_unstable();
    // The first key not known to be covered yet.
    let mut from = smallest;
    for (start, end) in ranges {
        if start > from {
            return false;
        }
        if end.is_empty() || end > biggest {
            return true;
        }
        from = from.max(end);
    }
    false
}

/// A retired table; holds a handle so its reader count can be checked.
enum PendingTable {
    L0(L0Table),
    Table(Table),
}

/// A retired file waiting for deletion.
pub(crate) struct PendingFile {
    table: PendingTable,
    /// Every log entry that retired it (none with the engine's own log, and none for outputs
    /// no file list ever named): split children that shared it retire it each in their log.
    retired: Vec<Retirement>,
    /// Its key range `(smallest, biggest)` as the retiring file list named it (`None`: no
    /// list named it, nothing to cover).
    key_range: Option<(Bytes, Bytes)>,
    /// `External` log mode: another shard here still named it when it was last looked at
    /// (at each retirement and each collection). Only ever goes from true to false: a file
    /// list never names a retired file again.
    live_elsewhere: bool,
}

impl PendingFile {
    fn id(&self) -> u64 {
        match &self.table {
            PendingTable::L0(t) => t.file_id(),
            PendingTable::Table(t) => t.file_id(),
        }
    }

    /// True while something here still holds the file besides this entry: a snapshot, a job,
    /// or the live state of a shard that still names it.
    fn held(&self) -> bool {
        let handles = match &self.table {
            PendingTable::L0(t) => t.handle_count(),
            PendingTable::Table(t) => t.handle_count(),
        };
        handles > 1
    }

    /// Whether the regions that retired it must still count it against their safe index: it
    /// is held, and not because another shard here still names it (that shard retires it in
    /// its own log later, and counts the holds then: module docs).
    fn needed_by_retirers(&self) -> bool {
        self.held() && !self.live_elsewhere
    }
}

/// What file GC keeps between collections (behind `Inner::file_gc`).
#[derive(Default)]
pub(crate) struct FileGc {
    pending: Vec<PendingFile>,
    /// Ids of failed compaction jobs, deleted once their time came (`compaction_exec`):
    /// nothing ever opened them here, so no handle or replica holds them.
    pub(crate) doomed: Vec<crate::compaction_exec::DoomedJob>,
    /// `External` log mode: per region, the group index this replica knows (module docs).
    group: HashMap<u64, u64>,
    /// `External` log mode, after a restart: per region, the group index that must be reached
    /// before any retired file is deleted (module docs, "Restart"). Emptied once reached.
    restart_floor: BTreeMap<u64, u64>,
}

impl FileGc {
    /// The state of an engine that opened with `shards` as `(id, meta_seq)`: with an external
    /// log, nothing retired is deleted before every region's group index passed its
    /// `meta_seq`.
    pub(crate) fn opened(
        external_log: bool,
        shards: impl IntoIterator<Item = (u64, u64)>,
    ) -> FileGc {
        let restart_floor = if external_log {
            shards.into_iter().filter(|(_, seq)| *seq > 0).collect()
        } else {
            BTreeMap::new()
        };
        FileGc {
            restart_floor,
            ..FileGc::default()
        }
    }

    fn group_index(&self, shard_id: u64) -> u64 {
        self.group.get(&shard_id).copied().unwrap_or(0)
    }

    /// Whether no replica of any region that retired `f` still needs it, and no region
    /// whose replicas are elsewhere only may still name it (module docs).
    fn replicas_done(&self, f: &PendingFile) -> bool {
        f.retired.is_empty()
            || (self.restart_floor.is_empty()
                && f.retired
                    .iter()
                    .all(|r| self.group_index(r.shard_id) >= r.index)
                && f.key_range
                    .as_ref()
                    .is_none_or(|(lo, hi)| covered(lo, hi, &f.retired)))
    }
}

/// Queues tables a new state no longer uses for deletion; `from` is the file list they leave
/// (`None` for outputs no file list ever named) and `at` the log entry that retired them
/// (`None` with the engine's own log, or for those outputs).
///
/// A file already queued is not queued again: split children share their parent's table
/// handles, so each child retires the same file, and two queued handles would keep its handle
/// count above one for ever. Its entry records this retirement too.
pub(crate) fn retire(
    inner: &Inner,
    unused: OpenTables,
    from: Option<&changeset::ShardFiles>,
    at: Option<Retirement>,
) {
    let (l0s, tables) = unused.into_tables();
    if l0s.is_empty() && tables.is_empty() {
        return;
    }
    // Read after the apply committed: a file another shard still names is only marked so
    // (`live_elsewhere`), and the last retirement reads it gone, whatever order concurrent
    // retirements take the lock in (the mark only goes from true to false).
    let live = match &at {
        Some(_) => inner.manifest.live_file_ids(),
        None => BTreeSet::new(),
    };
    let mut gc = inner.file_gc.lock();
    let mut queued: HashMap<u64, usize> = gc
        .pending
        .iter()
        .enumerate()
        .map(|(i, f)| (f.id(), i))
        .collect();
    let files = l0s
        .into_iter()
        .map(PendingTable::L0)
        .chain(tables.into_iter().map(PendingTable::Table));
    for table in files {
        let id = match &table {
            PendingTable::L0(t) => t.file_id(),
            PendingTable::Table(t) => t.file_id(),
        };
        let key_range = from
            .and_then(|files| files.file_meta(id))
            .map(|m| (m.smallest.clone(), m.biggest.clone()));
        let mut file = PendingFile {
            table,
            retired: at.iter().cloned().collect(),
            key_range,
            live_elsewhere: false,
        };
        file.live_elsewhere = live.contains(&file.id());
        match queued.get(&file.id()) {
            Some(&i) => {
                let entry = &mut gc.pending[i];
                entry.live_elsewhere &= file.live_elsewhere;
                if entry.key_range.is_none() {
                    entry.key_range = file.key_range;
                }
                if let Some(at) = &at
                    && !entry.retired.contains(at)
                {
                    entry.retired.push(at.clone());
                }
            }
            None => {
                queued.insert(file.id(), gc.pending.len());
                gc.pending.push(file);
            }
        }
    }
    metrics::FILES_PENDING_DELETE.set(gc.pending.len() as i64);
}

/// Queues the ids of a failed compaction job for deletion from `job.not_before` on
/// (`compaction_exec`).
pub(crate) fn doom(inner: &Inner, job: crate::compaction_exec::DoomedJob) {
    inner.file_gc.lock().doomed.push(job);
}

/// Deletes the ids of failed compaction jobs whose time came: an id a file list names is
/// kept (never the case for a job whose result was not proposed, but a delete is not undone).
/// An intent file goes once every id of its job is deleted.
fn collect_doomed(inner: &Inner, live: &BTreeSet<u64>) {
    let now = std::time::SystemTime::now();
    let due: Vec<crate::compaction_exec::DoomedJob> = {
        let mut gc = inner.file_gc.lock();
        let (due, later) = std::mem::take(&mut gc.doomed)
            .into_iter()
            .partition(|j| j.not_before <= now);
        gc.doomed = later;
        due
    };
    for mut job in due {
        job.ids.retain(|id| {
            if live.contains(id) {
                return false;
            }
            match inner.dfs.delete(FileId(*id)) {
                Ok(()) => {
                    metrics::DOOMED_FILES_DELETED.inc();
                    false
                }
                Err(e) => {
                    tracing::warn!(file_id = id, error = %e, "delete of a failed job's output failed; will retry");
                    true
                }
            }
        });
        if job.ids.is_empty() {
            // A failed removal leaves the intent for the next open, which dooms its ids again:
            // they are deleted already, and no file list names them.
            if let Some(path) = &job.intent
                && let Err(e) = crate::compaction_exec::remove_intent(path)
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a compaction job intent");
            }
        } else {
            inner.file_gc.lock().doomed.push(job);
        }
    }
}

/// Deletes every retired file that no shard references, no snapshot holds and no replica
/// needs (module docs), and the ids of failed jobs whose time came. The object store is
/// called without the lock.
pub(crate) fn collect(inner: &Inner) {
    // Read before the lock: a file list never names a retired file again, so a file missing
    // here is still missing when the lock is taken.
    let live = {
        let (pending, doomed) = {
            let gc = inner.file_gc.lock();
            (!gc.pending.is_empty(), !gc.doomed.is_empty())
        };
        if !pending && !doomed {
            return;
        }
        let live = inner.manifest.live_file_ids();
        if doomed {
            collect_doomed(inner, &live);
        }
        if !pending {
            return;
        }
        live
    };
    let deletable = {
        let mut gc = inner.file_gc.lock();
        let reached = gc
            .restart_floor
            .iter()
            .all(|(shard, index)| gc.group_index(*shard) >= *index);
        if reached {
            gc.restart_floor.clear();
        }
        for f in &mut gc.pending {
            f.live_elsewhere &= live.contains(&f.id());
        }
        let (deletable, kept): (Vec<PendingFile>, Vec<PendingFile>) =
            std::mem::take(&mut gc.pending)
                .into_iter()
                .partition(|f| !f.held() && !live.contains(&f.id()) && gc.replicas_done(f));
        gc.pending = kept;
        deletable
    };
    if deletable.is_empty() {
        return;
    }
    let mut failed = Vec::new();
    for f in deletable {
        match inner.dfs.delete(FileId(f.id())) {
            Ok(()) => metrics::FILES_DELETED.inc(),
            Err(e) => {
                tracing::warn!(file_id = f.id(), error = %e, "delete of a replaced file failed; will retry");
                failed.push(f);
            }
        }
    }
    let mut gc = inner.file_gc.lock();
    gc.pending.extend(failed);
    metrics::FILES_PENDING_DELETE.set(gc.pending.len() as i64);
}

impl Engine {
    /// Every file id the manifest references.
    pub fn live_file_ids(&self) -> BTreeSet<u64> {
        self.inner.manifest.live_file_ids()
    }

    /// Retired files still waiting: for their last reader, for a shard that still names them,
    /// or (external log) for a replica that may still need them.
    pub fn pending_deletes(&self) -> usize {
        self.inner.file_gc.lock().pending.len()
    }

    /// Deletes retired files that nothing needs any more (module docs). Runs after every
    /// compaction and periodically in the background; exposed for tests and tools.
    pub fn collect_garbage(&self) {
        collect(&self.inner);
    }

    /// `External` log mode: this replica's safe index for region `shard_id`, the highest index
    /// such that it needs no file the region retired at or below it: its applied index,
    /// lowered below the retirement of each pending file a snapshot here still holds (a file
    /// another shard here still names counts for that shard instead, when it retires it). The
    /// owner reports it to the region's leader. 0 for a shard this engine does not hold.
    pub fn file_gc_safe_index(&self, shard_id: u64) -> u64 {
        let Ok(shard) = self.inner.shard(shard_id) else {
            return 0;
        };
        // Applied index first: an apply records its retirements before it advances the
        // index, so every file retired at or below what is read here is in the list below.
        let applied = shard.write_sequence.load(Ordering::Acquire);
        let gc = self.inner.file_gc.lock();
        gc.pending
            .iter()
            .filter(|f| f.needed_by_retirers())
            .flat_map(|f| f.retired.iter())
            .filter(|r| r.shard_id == shard_id)
            .fold(applied, |safe, r| safe.min(r.index.saturating_sub(1)))
    }

    /// `External` log mode: learns that no replica of region `shard_id` needs a file the
    /// region retired at or below `index` (its leader's minimum over the voters' safe
    /// indexes). Never lowers what is known.
    pub fn raise_file_gc_group_index(&self, shard_id: u64, index: u64) {
        let mut gc = self.inner.file_gc.lock();
        let known = gc.group.entry(shard_id).or_insert(0);
        *known = (*known).max(index);
    }

    /// The group index this replica knows for region `shard_id` (0 when it knows none).
    pub fn file_gc_group_index(&self, shard_id: u64) -> u64 {
        self.inner.file_gc.lock().group_index(shard_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retired(start: &'static [u8], end: &'static [u8]) -> Retirement {
        Retirement {
            shard_id: 1,
            index: 1,
            start: Bytes::from_static(start),
            end: Bytes::from_static(end),
        }
    }

    #[test]
    fn a_file_inside_the_retiring_range_is_covered() {
        assert!(covered(b"b", b"c", &[retired(b"a", b"d")]));
        assert!(covered(b"b", b"c", &[retired(b"", b"")]));
        assert!(covered(b"b", b"zzz", &[retired(b"b", b"")]));
    }

    #[test]
    fn a_file_a_split_shared_waits_for_every_sibling_it_overlaps() {
        // A file of the parent [a, z) that spans the split key m.
        let left = retired(b"a", b"m");
        let right = retired(b"m", b"z");
        assert!(!covered(b"c", b"q", std::slice::from_ref(&left)));
        assert!(!covered(b"c", b"q", std::slice::from_ref(&right)));
        assert!(covered(b"c", b"q", &[right.clone(), left.clone()]));
        // The end key is exclusive: a file reaching the split key itself needs the right.
        assert!(!covered(b"c", b"m", std::slice::from_ref(&left)));
        // A gap between the ranges is not covered.
        assert!(!covered(
            b"c",
            b"q",
            &[retired(b"a", b"k"), retired(b"m", b"z")]
        ));
    }
}
