//! Replaying the segments found when a log opens: the part the engine WAL (format version 1)
//! and the Raft log (format version 2) share. What the records mean is the caller's business.
//!
//! Segments are read oldest first. Their valid frames are handed to the caller in file order.
//! Only the newest segment may end in a torn tail (see `frame.rs` for how a torn tail is told
//! from corruption): an older segment was fsync'd when it was sealed, before its successor was
//! created, so anything wrong in it is corruption. A torn tail is cut off and the truncation
//! made durable; a newest segment without a header (the process stopped while creating it)
//! holds no record and is deleted.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::wal::frame::{Frame, FrameLimits, FramesEnd};
use crate::wal::segment_codec::{SegmentFrames, SegmentHeaderFault, decode_segment_frames};
use crate::wal::segment_files::{SealedSegment, list_segments};

/// What replay leaves behind: the surviving segments (all sealed now) and the number for the
/// next segment.
pub(crate) struct Replayed {
    pub(crate) sealed: Vec<SealedSegment>,
    pub(crate) next_seq: u64,
}

/// The format of the segments a log reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentFormat {
    /// The header's format version this log accepts.
    pub(crate) version: u16,
    /// Bounds on a record body.
    pub(crate) limits: FrameLimits,
    /// Names the log in corruption errors ("wal segment", "raft log segment").
    pub(crate) what: &'static str,
}

impl SegmentFormat {
    pub(crate) fn corruption(&self, path: &Path, offset: u64, detail: String) -> Error {
        Error::Corruption {
            what: self.what,
            detail,
            path: path.to_path_buf(),
            offset,
        }
    }
}

/// The valid frames of one segment, as handed to the caller of [`replay_segments`].
pub(crate) struct SegmentRead<'a> {
    pub(crate) path: &'a Path,
    /// The whole file, for slicing payloads out of it without a copy.
    pub(crate) data: &'a Bytes,
    pub(crate) frames: &'a [Frame<'a>],
}

/// Replays every segment of `dir` oldest first. `read` interprets the valid frames of one
/// segment and returns its summary ([`SealedSegment::shard_max`]); an error from it stops the
/// open and is returned.
pub(crate) fn replay_segments(
    dir: &Path,
    format: SegmentFormat,
    read: &mut dyn FnMut(SegmentRead<'_>) -> Result<BTreeMap<u64, u64>>,
) -> Result<Replayed> {
    let segments = list_segments(dir)?;
    let mut sealed = Vec::with_capacity(segments.len());
    let mut next_seq = 1;
    for (index, (seq, path)) in segments.iter().enumerate() {
        let newest = index + 1 == segments.len();
        next_seq = seq + 1;
        if let Some(segment) = replay_segment(dir, format, *seq, path, newest, read)? {
            sealed.push(segment);
        }
    }
    Ok(Replayed { sealed, next_seq })
}

/// Replays one segment; `None` when it had no header and was deleted.
fn replay_segment(
    dir: &Path,
    format: SegmentFormat,
    seq: u64,
    path: &PathBuf,
    newest: bool,
    read: &mut dyn FnMut(SegmentRead<'_>) -> Result<BTreeMap<u64, u64>>,
) -> Result<Option<SealedSegment>> {
    let data = Bytes::from(fs::read(path).map_err(Error::io("read", path))?);
    let SegmentFrames {
        segment_seq,
        frames,
        end,
    } = match decode_segment_frames(&data, format.version, format.limits) {
        Ok(decoded) => decoded,
        Err(SegmentHeaderFault::Missing { len }) if newest => {
            tracing::warn!(path = %path.display(), len, what = format.what, "deleting wal segment without a header");
            fs::remove_file(path).map_err(Error::io("remove", path))?;
            sync_dir(dir)?;
            return Ok(None);
        }
        Err(fault) => return Err(format.corruption(path, 0, fault.to_string())),
    };
    if segment_seq != seq {
        return Err(format.corruption(
            path,
            0,
            format!("segment header names another segment header_seq={segment_seq} name_seq={seq}"),
        ));
    }
    let torn_at = match &end {
        FramesEnd::Clean => None,
        FramesEnd::Torn { offset, fault } if newest => {
            tracing::warn!(
                path = %path.display(),
                offset,
                dropped_bytes = data.len() as u64 - offset,
                reason = %fault,
                what = format.what,
                "truncating torn wal tail"
            );
            Some(*offset)
        }
        FramesEnd::Torn { offset, fault } => {
            return Err(format.corruption(
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
            return Err(format.corruption(
                path,
                *offset,
                format!("{fault} valid_record_at={next_valid}"),
            ));
        }
    };
    let shard_max = read(SegmentRead {
        path,
        data: &data,
        frames: &frames,
    })?;
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
