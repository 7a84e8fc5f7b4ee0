//! Segment files on disk: their names, listing them, creating one durably, and what a log
//! remembers about a sealed one. Shared by the engine WAL (format version 1) and the Raft log
//! (format version 2); each log keeps its segments in its own directory.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::wal::segment_codec::encode_versioned_segment_header;

/// The file name of segment `seq`: 16 lowercase hex digits, so names sort like numbers.
pub(crate) fn segment_file_name(seq: u64) -> String {
    format!("{seq:016x}.wal")
}

/// The segment number of a file name, if it is one [`segment_file_name`] produces.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".wal")?;
    let is_lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if hex.len() != 16 || !hex.chars().all(is_lower_hex) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The segments in `dir`, oldest first. Other files are ignored.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::io("read dir", dir))? {
        let entry = entry.map_err(Error::io("read dir", dir))?;
        let Some(seq) = entry.file_name().to_str().and_then(parse_segment_file_name) else {
            continue;
        };
        segments.push((seq, entry.path()));
    }
    segments.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(segments)
}

/// An open segment file and its path, shared by appenders and the group-commit leader (which
/// syncs through its own reference, outside the append lock).
#[derive(Debug)]
pub(crate) struct SegmentHandle {
    pub(crate) file: File,
    pub(crate) path: PathBuf,
}

/// Creates segment `seq` of format `version` holding its header followed by `preamble` (encoded
/// frames the log wants at the start of every segment; the Raft log's checkpoint), and makes
/// both the file and its directory entry durable before returning, so that a record appended
/// to it is never lost with the file itself, and a later purge may rely on the preamble.
pub(crate) fn create_segment(
    dir: &Path,
    seq: u64,
    version: u16,
    preamble: &[u8],
) -> Result<SegmentHandle> {
    let path = dir.join(segment_file_name(seq));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(Error::io("create", &path))?;
    let mut head = encode_versioned_segment_header(version, seq).to_vec();
    head.extend_from_slice(preamble);
    file.write_all(&head).map_err(Error::io("write", &path))?;
    file.sync_all().map_err(Error::io("fsync", &path))?;
    sync_dir(dir)?;
    Ok(SegmentHandle { file, path })
}

/// A segment that receives no more records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SealedSegment {
    pub(crate) seq: u64,
    pub(crate) path: PathBuf,
    /// Per shard id (engine WAL: the highest record sequence) or region id (Raft log: the
    /// highest entry index) in the segment.
    pub(crate) shard_max: BTreeMap<u64, u64>,
}

impl SealedSegment {
    /// Whether every record's sequence is at most `covered(record.shard_id)`.
    pub(crate) fn is_covered(&self, covered: &dyn Fn(u64) -> u64) -> bool {
        self.shard_max
            .iter()
            .all(|(&shard_id, &max)| max <= covered(shard_id))
    }
}

/// Notes that a record of `shard_id` with `sequence` (or an entry of region `shard_id` at index
/// `sequence`) is in a segment.
pub(crate) fn note_record(shard_max: &mut BTreeMap<u64, u64>, shard_id: u64, sequence: u64) {
    let max = shard_max.entry(shard_id).or_insert(sequence);
    *max = (*max).max(sequence);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_round_trip_and_others_are_ignored() {
        assert_eq!(segment_file_name(0x2a), "000000000000002a.wal");
        assert_eq!(parse_segment_file_name("000000000000002a.wal"), Some(0x2a));
        for other in [
            "2a.wal",
            "000000000000002A.wal",
            "000000000000002a.tmp",
            "+00000000000002a.wal",
        ] {
            assert_eq!(parse_segment_file_name(other), None, "{other}");
        }
    }
}
