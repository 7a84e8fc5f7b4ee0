//! Recovery: rebuilding every shard when the engine opens.
//!
//! 1. The manifest replays its ChangeSet log (each through [`changeset::ShardFiles::apply`],
//!    the same function every live change runs) into one file list per shard.
//! 2. Each shard's live state is derived from its file list exactly as after a live change
//!    ([`ShardData::derive`]), with every table opened from the object store.
//! 3. The WAL replays every record after the shard's `data_sequence` into its memtable; a
//!    memtable that fills up is frozen, and the flush threads pick it up once they start.
//!
//! In `External` log mode ([`crate::LogMode`]) there is no WAL and recovery stops after step 2:
//! memtables are empty and `write_sequence = data_sequence`. The owner of the log re-applies
//! the entries above `data_sequence` through `Engine::apply_*`, which rebuilds the memtables,
//! their Freeze boundaries included, exactly as they were (an entry whose ChangeSet the
//! manifest already holds, `index <= meta_seq`, is skipped).
//!
//! A gap in a shard's sequences is corruption: an acknowledged write is missing. Records of a
//! shard the manifest no longer has belong to a parent retired by a split, which flushed every
//! write first: they are covered.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::options::{EngineOptions, LogMode};
use crate::shard::Shard;
use crate::shard_data::{OpenTables, ShardData, TableSource};
use crate::wal::{Wal, WalOptions};
use crate::write_batch::WriteBatch;
use crate::write_path::{apply_batch, frozen_state};

/// What opening found: the shards, the WAL ready for appends (none in `External` log mode), and
/// the shards with memtables frozen during replay (to queue for the flush threads).
pub(crate) struct Recovered {
    pub(crate) shards: HashMap<u64, Arc<Shard>>,
    pub(crate) wal: Option<Wal>,
    pub(crate) to_flush: Vec<u64>,
}

pub(crate) fn recover(
    opts: &EngineOptions,
    manifest: &Manifest,
    source: TableSource<'_>,
) -> Result<Recovered> {
    let mut shards = HashMap::new();
    for files in manifest.shards() {
        let id = files.id();
        let data = ShardData::derive(files, &OpenTables::default(), source)?;
        let write_sequence = data.data_sequence();
        shards.insert(id, Arc::new(Shard::new(id, write_sequence, data)));
    }
    let wal = match opts.log_mode {
        LogMode::Internal => Some(Wal::open(
            WalOptions {
                dir: opts.dir.join("wal"),
                segment_size: opts.wal_segment_size,
                sync: opts.wal_sync,
            },
            |rec| replay_record(&shards, opts, rec.shard_id, rec.sequence, &rec.payload),
        )?),
        LogMode::External => None,
    };
    let mut to_flush: Vec<u64> = shards
        .iter()
        .filter(|(_, s)| !s.data.load().frozen.is_empty())
        .map(|(id, _)| *id)
        .collect();
    to_flush.sort_unstable();
    Ok(Recovered {
        shards,
        wal,
        to_flush,
    })
}

fn replay_record(
    shards: &HashMap<u64, Arc<Shard>>,
    opts: &EngineOptions,
    shard_id: u64,
    sequence: u64,
    payload: &[u8],
) -> Result<()> {
    let corrupt = |detail: String| Error::Corruption {
        what: "wal replay",
        detail,
        path: opts.dir.join("wal"),
        offset: 0,
    };
    let Some(shard) = shards.get(&shard_id) else {
        // Shards are created in the manifest before their first write, so a shard the
        // manifest no longer has was retired by a split, after its data was flushed (a split
        // flushes first). Its records are covered; the CRC already vouched for the record.
        tracing::debug!(shard_id, sequence, "skipping wal record of a retired shard");
        return Ok(());
    };
    let data = shard.data.load_full();
    if sequence <= data.data_sequence() {
        return Ok(());
    }
    let last = shard.write_sequence.load(Ordering::Relaxed);
    if sequence != last + 1 {
        return Err(corrupt(format!(
            "sequence gap: shard_id={shard_id} expected={} found={sequence}",
            last + 1
        )));
    }
    let batch = WriteBatch::decode(payload).map_err(|e| {
        corrupt(format!(
            "undecodable batch: shard_id={shard_id} sequence={sequence}: {e}"
        ))
    })?;
    apply_batch(&data.mem, &batch, data.base_version() + sequence);
    shard.write_sequence.store(sequence, Ordering::Release);
    if data.mem.size() >= opts.memtable_size {
        shard.data.store(Arc::new(frozen_state(&data, sequence)));
    }
    Ok(())
}
