//! Splitting a shard: a flushed shard becomes two through a Split ChangeSet.
//!
//! The shard is flushed first (writes are refused meanwhile with `ShardBusy`), so the children
//! start with every row in files they share with the parent and with empty memtables; reads
//! clip each child's files to its range, and compaction rewrites the shared files per child.
//! Both children get `ver + 1` and a base_version above the parent's SnapVersion, so their
//! data versions never repeat one the parent handed out.
//!
//! The Split ChangeSet goes through the one apply path (`apply`): [`changeset::ShardFiles::apply`]
//! decides which files each child keeps, and the children's live states are derived from the
//! file lists it returns.
//!
//! **With a log outside the engine** (`LogMode::External`) a split is a log entry, decided when
//! it is applied ([`Engine::apply_split`]), the same way on every replica. The shard cannot be
//! flushed first (Freeze and Flush are entries of their own), so "every write is in a file"
//! becomes "every memtable is empty": a split over a non-empty memtable, or at a key outside
//! the range, is rejected (the leader freezes, flushes and proposes it again). The left child
//! keeps the shard's id, so the shard's log goes on as the left child's; the right child gets
//! a new id (a new log). At index N both children get `data_sequence = write_sequence = N`,
//! stamped in the Split ChangeSet, and `base_version = base_version + N + 1`: the first
//! version a child hands out, `base_version + 2N + 1`, is above every one the parent handed
//! out (at most `base_version + N`).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use changeset::{Change, ShardSplitInfo, Split};

use crate::apply::{self, ApplyOutcome};
use crate::apply_at_index::{Position, advance, position};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::LogMode;
use crate::shard::Shard;
use crate::shard_data::{OpenTables, ShardData};

impl Engine {
    /// Splits shard `shard_id` at `key` into `left_id` = `[start, key)` and `right_id` =
    /// `[key, end)` (module docs). `left_id` may be `shard_id`.
    ///
    /// `Internal` log mode only: with an external log, a split is an entry applied with
    /// [`Engine::apply_split`].
    pub fn split(&self, shard_id: u64, key: &[u8], left_id: u64, right_id: u64) -> Result<()> {
        self.inner.expect_log_mode("split", LogMode::Internal)?;
        self.check_open()?;
        let shard = self.shard(shard_id)?;
        {
            let d = shard.data.load();
            let (start, end) = (d.start(), d.end());
            if key <= start.as_ref() || (!end.is_empty() && key >= end.as_ref()) {
                return Err(Error::InvalidArgument {
                    what: format!(
                        "split key must be strictly inside the shard range: shard_id={shard_id} key={key:?}"
                    ),
                });
            }
        }
        if left_id == right_id {
            return Err(Error::InvalidArgument {
                what: format!("split children need two ids, found={left_id} twice"),
            });
        }
        {
            let shards = self.inner.shards.read();
            for id in [left_id, right_id] {
                if id != shard_id && shards.contains_key(&id) {
                    return Err(Error::ShardExists { shard_id: id });
                }
            }
        }
        if shard.splitting.swap(true, Ordering::AcqRel) {
            return Err(Error::ShardBusy {
                shard_id,
                reason: "already splitting",
            });
        }
        let r = self.split_flushed(&shard, key, left_id, right_id);
        if r.is_err() {
            shard.splitting.store(false, Ordering::Release);
        }
        r
    }

    /// Applies the log entry `index` of shard `shard_id`, a split at `key` (module docs): the
    /// shard becomes `[start, key)`, keeping `shard_id`, and `right_id` = `[key, end)`; both
    /// children start at `write_sequence = data_sequence = index` with `base_version =
    /// base_version + index + 1`, and return as [`ApplyOutcome::Split`].
    ///
    /// [`ApplyOutcome::Rejected`], with only the write sequence moved to `index`, when a
    /// memtable (active or frozen) is not empty, `key` is not strictly inside the range, or
    /// `right_id` is `shard_id`: the same on every replica. An already applied index is
    /// `Skipped`. Errors: [`Error::ShardExists`] when `right_id` names another shard of this
    /// engine (ids are unique per cluster: a caller's bug), and as
    /// [`Engine::apply_change_set_at`]; on any error nothing changed.
    pub fn apply_split(
        &self,
        shard_id: u64,
        index: u64,
        key: &[u8],
        right_id: u64,
    ) -> Result<ApplyOutcome> {
        let shard = self.entry_shard("apply_split", shard_id)?;
        let meta = shard.meta.lock();
        if let Position::Applied = position(&shard, index)? {
            return Ok(ApplyOutcome::Skipped);
        }
        let cur = shard.data.load_full();
        if index <= cur.meta_seq() {
            // Re-applied after a restart: had it split, the shard would be a child whose
            // data_sequence is at least `index`, and the entry would not be re-applied.
            advance(&shard, index);
            return Ok(ApplyOutcome::Skipped);
        }
        if let Some(reason) = split_rejection(&cur, key, shard_id, right_id) {
            advance(&shard, index);
            return Ok(ApplyOutcome::Rejected { reason });
        }
        if self.inner.shards.read().contains_key(&right_id) {
            return Err(Error::ShardExists { shard_id: right_id });
        }
        let base_version = cur.base_version() + index + 1;
        let child = |id, start: &Bytes, end: &Bytes| ShardSplitInfo {
            id,
            start: start.clone(),
            end: end.clone(),
            base_version,
            data_sequence: index,
        };
        let key = Bytes::copy_from_slice(key);
        let change = Change::Split(Split {
            new_shards: vec![
                child(shard_id, cur.start(), &key),
                child(right_id, &key, cur.end()),
            ],
        });
        let mut cs = apply::next_change_set(&shard, change);
        cs.sequence = index;
        match apply::apply_locked(&self.inner, &shard, &meta, &cs, OpenTables::default())? {
            outcome @ ApplyOutcome::Split { .. } => Ok(outcome),
            outcome => Err(Error::Corruption {
                what: "manifest",
                detail: format!(
                    "split was not applied as a split: shard_id={shard_id} index={index} outcome={outcome:?}"
                ),
                path: self.inner.manifest.path().to_path_buf(),
                offset: 0,
            }),
        }
    }

    fn split_flushed(&self, shard: &Shard, key: &[u8], left_id: u64, right_id: u64) -> Result<()> {
        let _c = shard.compacting.lock();
        loop {
            self.flush_shard(shard.id)?;
            let meta = shard.meta.lock();
            {
                let _w = shard.write.lock();
                let cur = shard.data.load();
                let ws = shard.write_sequence.load(Ordering::Acquire);
                // A write that passed the splitting check before the flag was set may have
                // landed after the flush: flush again. Once this holds under `write`, no write
                // can land any more (every later writer sees the flag).
                if !cur.frozen.is_empty() || !cur.mem.is_empty() || cur.data_sequence() != ws {
                    continue;
                }
            }
            let cur = shard.data.load();
            let base_version = cur.base_version() + cur.data_sequence() + 1;
            let child = |id, start: &Bytes, end: &Bytes| ShardSplitInfo {
                id,
                start: start.clone(),
                end: end.clone(),
                base_version,
                // The parent's: every write is flushed (checked above).
                data_sequence: 0,
            };
            let key = Bytes::copy_from_slice(key);
            let change = Change::Split(Split {
                new_shards: vec![
                    child(left_id, cur.start(), &key),
                    child(right_id, &key, cur.end()),
                ],
            });
            let cs = apply::next_change_set(shard, change);
            return match apply::apply_locked(&self.inner, shard, &meta, &cs, OpenTables::default())?
            {
                ApplyOutcome::Split { .. } => Ok(()),
                outcome => Err(Error::Corruption {
                    what: "manifest",
                    detail: format!(
                        "split was not applied as a split: shard_id={} outcome={outcome:?}",
                        shard.id
                    ),
                    path: self.inner.manifest.path().to_path_buf(),
                    offset: 0,
                }),
            };
        }
    }
}

/// Why a split entry at `key` cannot apply to the shard state `cur`, if it cannot. Depends only
/// on that state, which is the same on every replica at the same index.
fn split_rejection(cur: &ShardData, key: &[u8], shard_id: u64, right_id: u64) -> Option<String> {
    if right_id == shard_id {
        return Some(format!(
            "split needs a new id for the right child: right_id={right_id}"
        ));
    }
    if key <= cur.start().as_ref() || (!cur.end().is_empty() && key >= cur.end().as_ref()) {
        return Some(format!(
            "split key not strictly inside the shard range: key={key:?}"
        ));
    }
    if cur.memtables().any(|m| !m.is_empty()) {
        return Some(format!(
            "memtables not empty: frozen={} active_empty={}",
            cur.frozen.len(),
            cur.mem.is_empty()
        ));
    }
    None
}
