//! Appending encoded records to numbered segment files durably, rolling and deleting segments:
//! the writer that both the engine WAL ([`crate::wal::Wal`], format version 1) and the Raft log
//! ([`crate::raft_log::RaftLog`], format version 2) are built on. It never looks inside a
//! record; each log encodes its own and tells the writer what a segment holds
//! ([`AppendGuard::note`]) so that it can later choose which sealed segments to delete.
//!
//! One mutex (the append lock) guards the active segment. It is held only to write an encoded
//! record (encoding and checksumming happen before it is taken) and, when the segment is full,
//! to roll. A log may do more under it through the [`AppendGuard`] (the Raft log validates a
//! batch and applies it to its in-memory state there, so both happen in file order). fdatasync
//! always runs outside it: under `EveryBatch` each appender syncs through its own reference to
//! the segment file, under `GroupCommit` the leader does (see `group_commit.rs`). Writers
//! therefore serialize only for the `write(2)` of their record.
//!
//! Rolling seals the active segment with an fdatasync (whatever the policy) before the next
//! segment exists, so only the newest segment can ever hold a torn tail. A new segment starts
//! with its header and the log's preamble (the Raft log's checkpoint), made durable before the
//! segment takes records.
//!
//! A failed write or fdatasync makes the writer refuse every later append: a partial record
//! may sit at the end of the segment, and after a failed fdatasync the kernel may have dropped
//! pages that a later one would not rewrite. Reopening (which truncates a torn tail) recovers.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::wal::group_commit::{GroupCommit, failed_earlier};
use crate::wal::options::SyncPolicy;
use crate::wal::replay::Replayed;
use crate::wal::segment_codec::SEGMENT_HEADER_LEN;
use crate::wal::segment_files::{SealedSegment, SegmentHandle, create_segment, note_record};
use crate::wal::writer::WalStats;

/// Where and how a [`SegmentWriter`] writes.
#[derive(Clone, Debug)]
pub(crate) struct SegmentWriterOptions {
    pub(crate) dir: PathBuf,
    /// Roll threshold in bytes; see [`crate::wal::WalOptions::segment_size`].
    pub(crate) segment_size: u64,
    pub(crate) policy: SyncPolicy,
    /// The format version written in every segment header.
    pub(crate) version: u16,
}

/// The segment receiving appends.
struct ActiveSegment {
    seq: u64,
    handle: Arc<SegmentHandle>,
    /// Bytes in the file, header and preamble included.
    len: u64,
    /// Records appended (the preamble is not one).
    records: u64,
    shard_max: BTreeMap<u64, u64>,
}

/// Under the append lock: the active segment and the ticket of the newest appended record.
struct AppendState {
    active: ActiveSegment,
    /// Records appended since open; a record's ticket is this count just after it is written.
    appended: u64,
}

/// Appends records to segment files. `Send + Sync`.
pub(crate) struct SegmentWriter {
    opts: SegmentWriterOptions,
    /// The append lock. Lock order: `append` before `sealed` (and before any lock a log takes
    /// inside an [`AppendGuard`]).
    append: Mutex<AppendState>,
    sealed: Mutex<Vec<SealedSegment>>,
    group: GroupCommit,
    /// Set by a failed write or fdatasync; every later append fails.
    failed: AtomicBool,
    bytes_written: AtomicU64,
    fsyncs: AtomicU64,
    records: AtomicU64,
}

/// A written record, to be made durable with [`SegmentWriter::wait_durable`] once the append
/// lock is released.
pub(crate) struct Written {
    ticket: u64,
    handle: Arc<SegmentHandle>,
}

/// The append lock, held. Dropping it releases the lock.
pub(crate) struct AppendGuard<'a> {
    writer: &'a SegmentWriter,
    state: MutexGuard<'a, AppendState>,
}

impl AppendGuard<'_> {
    /// Writes one encoded record to the active segment. When the segment already holds a
    /// record and this one would grow it past the roll threshold, the segment is sealed first
    /// and the next one started with `preamble()` (called only then, under the lock, so it sees
    /// the log as of this record). A record larger than the threshold gets a segment of its
    /// own.
    pub(crate) fn write(
        &mut self,
        record: &[u8],
        preamble: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Written> {
        let writer = self.writer;
        let active = &self.state.active;
        if active.records > 0 && active.len + record.len() as u64 > writer.opts.segment_size {
            writer.roll_locked(&mut self.state, &preamble()?)?;
        }
        let active = &mut self.state.active;
        if let Err(source) = (&active.handle.file).write_all(record) {
            writer.failed.store(true, Ordering::SeqCst);
            return Err(Error::Io {
                op: "write",
                path: active.handle.path.clone(),
                source,
            });
        }
        active.len += record.len() as u64;
        active.records += 1;
        self.state.appended += 1;
        writer.records.fetch_add(1, Ordering::Relaxed);
        writer
            .bytes_written
            .fetch_add(record.len() as u64, Ordering::Relaxed);
        Ok(Written {
            ticket: self.state.appended,
            handle: self.state.active.handle.clone(),
        })
    }

    /// Notes that the active segment holds a record of `key` at `value` (the shard's sequence
    /// or the region's entry index); [`SealedSegment::shard_max`] keeps the highest.
    pub(crate) fn note(&mut self, key: u64, value: u64) {
        note_record(&mut self.state.active.shard_max, key, value);
    }
}

impl SegmentWriter {
    /// Starts segment `replayed.next_seq`, beginning with `preamble`, after the segments that
    /// replay left.
    pub(crate) fn open(
        opts: SegmentWriterOptions,
        replayed: Replayed,
        preamble: &[u8],
    ) -> Result<SegmentWriter> {
        let handle = create_segment(&opts.dir, replayed.next_seq, opts.version, preamble)?;
        let active = ActiveSegment {
            seq: replayed.next_seq,
            handle: Arc::new(handle),
            len: (SEGMENT_HEADER_LEN + preamble.len()) as u64,
            records: 0,
            shard_max: BTreeMap::new(),
        };
        Ok(SegmentWriter {
            opts,
            append: Mutex::new(AppendState {
                active,
                appended: 0,
            }),
            sealed: Mutex::new(replayed.sealed),
            group: GroupCommit::default(),
            failed: AtomicBool::new(false),
            bytes_written: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            records: AtomicU64::new(0),
        })
    }

    /// Takes the append lock; fails when an earlier write or fdatasync failed.
    pub(crate) fn lock(&self) -> Result<AppendGuard<'_>> {
        let state = self.append.lock();
        self.check_usable()?;
        Ok(AppendGuard {
            writer: self,
            state,
        })
    }

    /// Returns once `written` is durable per the sync policy. Call it without the append lock.
    pub(crate) fn wait_durable(&self, written: Written) -> Result<()> {
        self.wait_durable_as(written, self.opts.policy)
    }

    /// Returns once `written` is durable as `policy` says (one write's [`super::Durability`]
    /// over the writer's own policy). Call it without the append lock.
    pub(crate) fn wait_durable_as(&self, written: Written, policy: SyncPolicy) -> Result<()> {
        match policy {
            SyncPolicy::Off => Ok(()),
            SyncPolicy::EveryBatch => self.sync(&written.handle),
            SyncPolicy::GroupCommit => self.group.wait_durable(written.ticket, || {
                let (covered, handle) = {
                    let state = self.append.lock();
                    (state.appended, state.active.handle.clone())
                };
                // Records of older segments were synced when those were sealed.
                self.sync(&handle)?;
                Ok(covered)
            }),
        }
    }

    /// Makes every record written so far durable, whatever the policy.
    pub(crate) fn sync_active(&self) -> Result<()> {
        let handle = self.append.lock().active.handle.clone();
        self.sync(&handle)
    }

    /// Seals the active segment and starts a new one beginning with `preamble()`, so that the
    /// records appended so far become purgeable. Does nothing when the active segment holds no
    /// record.
    pub(crate) fn roll(&self, preamble: impl FnOnce() -> Result<Vec<u8>>) -> Result<()> {
        let mut state = self.append.lock();
        self.check_usable()?;
        if state.active.records == 0 {
            return Ok(());
        }
        self.roll_locked(&mut state, &preamble()?)
    }

    /// Deletes the sealed segments (never the active one) whose numbers `select` returns, given
    /// the sealed segments oldest first, then fsyncs the directory. `select` runs without any
    /// writer lock held; an error from it deletes nothing. A segment whose deletion fails stays
    /// listed, so a later purge retries. Returns how many segments were deleted.
    pub(crate) fn purge(
        &self,
        select: impl FnOnce(&[SealedSegment]) -> Result<Vec<u64>>,
    ) -> Result<usize> {
        let candidates: Vec<SealedSegment> = self.sealed.lock().clone();
        let doomed = select(&candidates)?;
        if doomed.is_empty() {
            return Ok(0);
        }
        let mut removed = Vec::with_capacity(doomed.len());
        {
            let mut sealed = self.sealed.lock();
            sealed.retain(|segment| {
                if doomed.contains(&segment.seq) {
                    removed.push(segment.clone());
                    false
                } else {
                    true
                }
            });
        }
        let mut deleted = 0;
        let mut failure = None;
        let mut kept = Vec::new();
        for segment in removed {
            if failure.is_some() {
                kept.push(segment);
                continue;
            }
            match fs::remove_file(&segment.path) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => deleted += 1,
                Err(source) => {
                    failure = Some(Error::Io {
                        op: "remove",
                        path: segment.path.clone(),
                        source,
                    });
                    kept.push(segment);
                }
            }
        }
        if !kept.is_empty() {
            // Keep them so that a later purge retries.
            let mut sealed = self.sealed.lock();
            sealed.extend(kept);
            sealed.sort_unstable_by_key(|segment| segment.seq);
        }
        if deleted > 0 {
            sync_dir(&self.opts.dir)?;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    /// Counters since open, and the current segment count.
    pub(crate) fn stats(&self) -> WalStats {
        WalStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            segments: self.segment_count() as u64,
        }
    }

    /// Segment files that exist now, the active one included.
    pub(crate) fn segment_count(&self) -> usize {
        self.sealed.lock().len() + 1
    }

    /// The policy appends follow.
    pub(crate) fn sync_policy(&self) -> SyncPolicy {
        self.opts.policy
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed.load(Ordering::SeqCst) {
            Err(failed_earlier())
        } else {
            Ok(())
        }
    }

    fn sync(&self, handle: &SegmentHandle) -> Result<()> {
        match handle.file.sync_data() {
            Ok(()) => {
                self.fsyncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(source) => {
                self.failed.store(true, Ordering::SeqCst);
                Err(Error::Io {
                    op: "fdatasync",
                    path: handle.path.clone(),
                    source,
                })
            }
        }
    }

    /// Seals the active segment (fdatasync) and creates the next one. On failure to create
    /// the next segment the active one stays active.
    fn roll_locked(&self, state: &mut AppendState, preamble: &[u8]) -> Result<()> {
        self.sync(&state.active.handle)?;
        let seq = state.active.seq + 1;
        let handle = create_segment(&self.opts.dir, seq, self.opts.version, preamble)?;
        let next = ActiveSegment {
            seq,
            handle: Arc::new(handle),
            len: (SEGMENT_HEADER_LEN + preamble.len()) as u64,
            records: 0,
            shard_max: BTreeMap::new(),
        };
        let old = std::mem::replace(&mut state.active, next);
        self.sealed.lock().push(SealedSegment {
            seq: old.seq,
            path: old.handle.path.clone(),
            shard_max: old.shard_max,
        });
        Ok(())
    }
}
