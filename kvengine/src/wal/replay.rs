//! Replaying the segments found when the WAL opens.
//!
//! Segments are read oldest first. Every record is handed to the caller in file order. Only
//! the newest segment may end in a torn tail (see `frame.rs` for how a torn tail is told from
//! corruption): an older segment was fsync'd when it was sealed, before its successor was
//! created, so anything wrong in it is corruption. A torn tail is cut off and the truncation
//! made durable; a newest segment without a header (the process stopped while creating it)
//! holds no record and is deleted.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::wal::frame::FramesEnd;
use crate::wal::segment_codec::{SegmentHeaderFault, decode_segment};
use crate::wal::segment_files::{SealedSegment, list_segments, note_record};
use crate::wal::writer::WalRecord;

/// What replay leaves behind: the surviving segments (all sealed now) and the number for the
/// next segment.
pub(crate) struct Replayed {
    pub(crate) sealed: Vec<SealedSegment>,
    pub(crate) next_seq: u64,
}

fn corruption(path: &Path, offset: u64, detail: String) -> Error {
    Error::Corruption {
        what: "wal segment",
        detail,
        path: path.to_path_buf(),
        offset,
    }
}

pub(crate) fn replay_segments(
    dir: &Path,
    f: &mut dyn FnMut(WalRecord) -> Result<()>,
) -> Result<Replayed> {
    let segments = list_segments(dir)?;
    let mut sealed = Vec::with_capacity(segments.len());
    let mut next_seq = 1;
    for (index, (seq, path)) in segments.iter().enumerate() {
        let newest = index + 1 == segments.len();
        next_seq = seq + 1;
        if let Some(segment) = replay_segment(dir, *seq, path, newest, f)? {
            sealed.push(segment);
        }
    }
    Ok(Replayed { sealed, next_seq })
}

/// Replays one segment; `None` when it had no header and was deleted.
fn replay_segment(
    dir: &Path,
    seq: u64,
    path: &PathBuf,
    newest: bool,
    f: &mut dyn FnMut(WalRecord) -> Result<()>,
) -> Result<Option<SealedSegment>> {
    let data = Bytes::from(fs::read(path).map_err(Error::io("read", path))?);
    let decoded = match decode_segment(&data) {
        Ok(decoded) => decoded,
        Err(SegmentHeaderFault::Missing { len }) if newest => {
            tracing::warn!(path = %path.display(), len, "deleting wal segment without a header");
            fs::remove_file(path).map_err(Error::io("remove", path))?;
            sync_dir(dir)?;
            return Ok(None);
        }
        Err(fault) => return Err(corruption(path, 0, fault.to_string())),
    };
    if decoded.segment_seq != seq {
        return Err(corruption(
            path,
            0,
            format!(
                "segment header names another segment header_seq={} name_seq={seq}",
                decoded.segment_seq
            ),
        ));
    }
    let torn_at = match &decoded.end {
        FramesEnd::Clean => None,
        FramesEnd::Torn { offset, fault } if newest => {
            tracing::warn!(
                path = %path.display(),
                offset,
                dropped_bytes = data.len() as u64 - offset,
                reason = %fault,
                "truncating torn wal tail"
            );
            Some(*offset)
        }
        FramesEnd::Torn { offset, fault } => {
            return Err(corruption(
                path,
                *offset,
                format!("{fault} (in a sealed segment, not the newest)"),
            ));
        }
        FramesEnd::Corrupt {
            offset,
            fault,
            next_valid,
        } => {
            return Err(corruption(
                path,
                *offset,
                format!("{fault} valid_record_at={next_valid}"),
            ));
        }
    };
    let mut shard_max = BTreeMap::new();
    for record in &decoded.records {
        note_record(&mut shard_max, record.shard_id, record.sequence);
        f(WalRecord {
            shard_id: record.shard_id,
            sequence: record.sequence,
            payload: data.slice_ref(record.payload),
        })?;
    }
    if let Some(offset) = torn_at {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(Error::io("open", path))?;
        file.set_len(offset).map_err(Error::io("truncate", path))?;
        file.sync_all().map_err(Error::io("fsync", path))?;
    }
    Ok(Some(SealedSegment {
        seq,
        path: path.clone(),
        shard_max,
    }))
}
