//! The WAL: appending records durably, rolling and purging segments.
//!
//! One mutex (the append lock) guards the active segment. It is held only to write the encoded
//! record (encoding and checksumming happen before it is taken) and, when the segment is full,
//! to roll. fdatasync always runs outside it: under `EveryBatch` each appender syncs through
//! its own reference to the segment file, under `GroupCommit` the leader does (see
//! `group_commit.rs`). Writers to different shards therefore serialize only for the
//! `write(2)` of their record.
//!
//! Rolling seals the active segment with an fdatasync (whatever the policy) before the next
//! segment exists, so only the newest segment can ever hold a torn tail.
//!
//! A failed write or fdatasync makes the WAL refuse every later append: a partial record may
//! sit at the end of the segment, and after a failed fdatasync the kernel may have dropped
//! pages that a later one would not rewrite. Reopening (which truncates a torn tail) recovers.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::wal::group_commit::{GroupCommit, failed_earlier};
use crate::wal::options::{SyncPolicy, WalOptions};
use crate::wal::replay::replay_segments;
use crate::wal::segment_codec::{
    MAX_PAYLOAD_LEN, SEGMENT_HEADER_LEN, encode_record, encoded_record_len,
};
use crate::wal::segment_files::{SealedSegment, SegmentHandle, create_segment, note_record};

/// One replayed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalRecord {
    /// The shard the write batch belongs to.
    pub shard_id: u64,
    /// The batch's sequence within its shard.
    pub sequence: u64,
    /// The encoded write batch, opaque to the WAL.
    pub payload: Bytes,
}

/// Counters of a WAL since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Bytes of records appended (frame headers included, segment headers not).
    pub bytes_written: u64,
    /// fdatasync calls made to make appended records durable: per append, per group-commit
    /// round, and per segment sealed by a roll.
    pub fsyncs: u64,
    /// Records appended.
    pub records: u64,
    /// Segment files that exist now, the active one included (a gauge, not a counter).
    pub segments: u64,
}

/// The segment receiving appends.
struct ActiveSegment {
    seq: u64,
    handle: Arc<SegmentHandle>,
    /// Bytes in the file, header included.
    len: u64,
    records: u64,
    shard_max: BTreeMap<u64, u64>,
}

impl ActiveSegment {
    fn new(seq: u64, handle: SegmentHandle) -> Self {
        Self {
            seq,
            handle: Arc::new(handle),
            len: SEGMENT_HEADER_LEN as u64,
            records: 0,
            shard_max: BTreeMap::new(),
        }
    }
}

/// Under the append lock: the active segment and the ticket of the newest appended record.
struct AppendState {
    active: ActiveSegment,
    /// Records appended since open; a record's ticket is this count just after it is written.
    appended: u64,
}

/// The write-ahead log of every shard of an engine. `Send + Sync`; share it as `Arc<Wal>`.
pub struct Wal {
    dir: PathBuf,
    segment_size: u64,
    policy: SyncPolicy,
    /// The append lock. Lock order: `append` before `sealed`.
    append: Mutex<AppendState>,
    sealed: Mutex<Vec<SealedSegment>>,
    group: GroupCommit,
    /// Set by a failed write or fdatasync; every later append fails.
    failed: AtomicBool,
    bytes_written: AtomicU64,
    fsyncs: AtomicU64,
    records: AtomicU64,
}

impl Wal {
    /// Opens the WAL in `opts.dir` (creating the directory if needed), replays every segment
    /// oldest first calling `f` for each record in order, truncates a torn tail of the newest
    /// segment, and starts a new segment for appends. A damaged record followed by valid ones,
    /// or damage in any segment but the newest, is [`Error::Corruption`] naming the segment
    /// and offset. An error returned by `f` stops the open and is returned.
    pub fn open(opts: WalOptions, mut f: impl FnMut(WalRecord) -> Result<()>) -> Result<Wal> {
        fs::create_dir_all(&opts.dir).map_err(Error::io("create dir", &opts.dir))?;
        let replayed = replay_segments(&opts.dir, &mut f)?;
        let handle = create_segment(&opts.dir, replayed.next_seq)?;
        Ok(Wal {
            dir: opts.dir,
            segment_size: opts.segment_size,
            policy: opts.sync,
            append: Mutex::new(AppendState {
                active: ActiveSegment::new(replayed.next_seq, handle),
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

    /// Appends a record and returns once it is durable per the sync policy.
    pub fn append(&self, shard_id: u64, sequence: u64, payload: &[u8]) -> Result<()> {
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(Error::InvalidArgument {
                what: format!(
                    "wal record payload too large len={} max={MAX_PAYLOAD_LEN}",
                    payload.len()
                ),
            });
        }
        let mut record = Vec::with_capacity(encoded_record_len(payload.len()));
        encode_record(shard_id, sequence, payload, &mut record);

        let (ticket, handle) = {
            let mut state = self.append.lock();
            self.check_usable()?;
            let active = &state.active;
            if active.records > 0 && active.len + record.len() as u64 > self.segment_size {
                self.roll_locked(&mut state)?;
            }
            let active = &mut state.active;
            if let Err(source) = (&active.handle.file).write_all(&record) {
                self.failed.store(true, Ordering::SeqCst);
                return Err(Error::Io {
                    op: "write",
                    path: active.handle.path.clone(),
                    source,
                });
            }
            active.len += record.len() as u64;
            active.records += 1;
            note_record(&mut active.shard_max, shard_id, sequence);
            state.appended += 1;
            (state.appended, state.active.handle.clone())
        };
        self.records.fetch_add(1, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(record.len() as u64, Ordering::Relaxed);

        match self.policy {
            SyncPolicy::Off => Ok(()),
            SyncPolicy::EveryBatch => self.sync(&handle),
            SyncPolicy::GroupCommit => self.group.wait_durable(ticket, || {
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

    /// Seals the active segment and starts a new one, so that the records appended so far
    /// become purgeable once covered. Does nothing when the active segment holds no record.
    pub fn roll(&self) -> Result<()> {
        let mut state = self.append.lock();
        self.check_usable()?;
        if state.active.records == 0 {
            return Ok(());
        }
        self.roll_locked(&mut state)
    }

    /// Deletes every sealed segment (never the active one) all of whose records have
    /// `sequence <= covered(shard_id)`, then fsyncs the directory. `covered` is called without
    /// any WAL lock held, once per shard per segment; for a shard that no longer exists (a
    /// split parent) it should return `u64::MAX`. Returns how many segments were deleted.
    pub fn purge(&self, covered: &dyn Fn(u64) -> u64) -> Result<usize> {
        let candidates: Vec<SealedSegment> = self.sealed.lock().clone();
        let doomed: Vec<u64> = candidates
            .iter()
            .filter(|segment| segment.is_covered(covered))
            .map(|segment| segment.seq)
            .collect();
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
            sync_dir(&self.dir)?;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    /// Counters since open, and the current segment count.
    pub fn stats(&self) -> WalStats {
        WalStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            segments: self.segment_count() as u64,
        }
    }

    /// Segment files that exist now, the active one included.
    pub fn segment_count(&self) -> usize {
        self.sealed.lock().len() + 1
    }

    /// The policy appends follow.
    pub fn sync_policy(&self) -> SyncPolicy {
        self.policy
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
    fn roll_locked(&self, state: &mut AppendState) -> Result<()> {
        self.sync(&state.active.handle)?;
        let seq = state.active.seq + 1;
        let handle = create_segment(&self.dir, seq)?;
        let old = std::mem::replace(&mut state.active, ActiveSegment::new(seq, handle));
        self.sealed.lock().push(SealedSegment {
            seq: old.seq,
            path: old.handle.path.clone(),
            shard_max: old.shard_max,
        });
        Ok(())
    }
}
