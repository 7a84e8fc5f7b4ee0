//! Rebuilding every region's log from the segments when the Raft log opens. The segment
//! mechanics (oldest first, torn tail of the newest truncated, damage anywhere else an error)
//! are the engine WAL's (`wal/replay.rs`); here each record is decoded and applied by the same
//! rule a live write follows (`region_log.rs`), checkpoints reconcile what purged segments took
//! away, and the result must be complete.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::raft_log::log_batch::{LogOp, RegionOp};
use crate::raft_log::record_codec::{RAFT_RECORD_LIMITS, RaftRecord, decode_record};
use crate::raft_log::region_log::{OpFault, RegionLogs};
use crate::wal::replay::{Replayed, SegmentFormat, SegmentRead, replay_segments};
use crate::wal::segment_codec::RAFT_LOG_FORMAT_VERSION;
use crate::wal::segment_files::note_record;

/// The segments of a Raft log.
pub(crate) const FORMAT: SegmentFormat = SegmentFormat {
    version: RAFT_LOG_FORMAT_VERSION,
    limits: RAFT_RECORD_LIMITS,
    what: "raft log segment",
};

/// Replays the segments of `dir` into region logs.
pub(crate) fn replay(dir: &Path) -> Result<(Replayed, RegionLogs)> {
    let mut logs = RegionLogs::default();
    let replayed = replay_segments(dir, FORMAT, &mut |segment| replay_one(&mut logs, segment))?;
    if let Some((region_id, state, first_held)) = logs.first_incomplete() {
        return Err(Error::Corruption {
            what: "raft log",
            detail: format!(
                "entries missing after replay (a segment holding them is gone) region_id={region_id} truncated_index={} last_index={} first_held={first_held}",
                state.truncated_index, state.last_index
            ),
            path: dir.to_path_buf(),
            offset: 0,
        });
    }
    Ok((replayed, logs))
}

/// Applies the records of one segment; returns the highest entry index per region in it.
fn replay_one(logs: &mut RegionLogs, segment: SegmentRead<'_>) -> Result<BTreeMap<u64, u64>> {
    let mut max_index = BTreeMap::new();
    for frame in segment.frames {
        let record = decode_record(frame.body)
            .map_err(|fault| FORMAT.corruption(segment.path, frame.offset, fault.to_string()))?;
        let batch = match record {
            RaftRecord::Checkpoint(regions) => {
                logs.apply_checkpoint(&regions);
                continue;
            }
            RaftRecord::Batch(batch) => batch,
        };
        for RegionOp { region_id, op } in batch.ops() {
            let region_id = *region_id;
            logs.apply(region_id, op).map_err(|fault| match fault {
                OpFault::Gap { expected, found } => Error::RaftLogGap {
                    region_id,
                    expected,
                    found,
                    path: segment.path.to_path_buf(),
                    offset: frame.offset,
                },
                fault @ OpFault::BelowTruncated { .. } => FORMAT.corruption(
                    segment.path,
                    frame.offset,
                    format!("{fault} region_id={region_id}"),
                ),
            })?;
            if let LogOp::Append(entries) = op
                && let Some(last) = entries.last()
            {
                note_record(&mut max_index, region_id, last.index);
            }
        }
    }
    Ok(max_index)
}
