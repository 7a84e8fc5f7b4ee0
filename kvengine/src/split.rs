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

use std::sync::atomic::Ordering;

use bytes::Bytes;
use changeset::{Change, ShardSplitInfo, Split};

use crate::apply::{self, ApplyOutcome};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::shard::Shard;
use crate::shard_data::OpenTables;

impl Engine {
    /// Splits shard `shard_id` at `key` into `left_id` = `[start, key)` and `right_id` =
    /// `[key, end)` (module docs).
    pub fn split(&self, shard_id: u64, key: &[u8], left_id: u64, right_id: u64) -> Result<()> {
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
