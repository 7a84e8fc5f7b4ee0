//! The bytes of the MANIFEST file: encoder and pure replay.
//!
//! # Layout (manifest format version 1)
//!
//! ```text
//! file   := header record*
//! header := magic "SMAN"  format_version:u16le (= 1)  reserved:u16le (= 0)
//! record := frame (see `wal/frame.rs`: len:u32le body_crc:u32le header_crc:u32le body)
//! body   := one ChangeSet, protobuf (`changeset::encode_changeset`)
//! ```
//!
//! A rewrite produces a header and one Snapshot ChangeSet per shard, in shard id order; every
//! later change appends one record. The file is created only by a rewrite (temp file, fsync,
//! rename, fsync dir), so its header is never torn. A torn last record is told from
//! corruption by the frame rule; a record that is intact but does not decode, names an unknown
//! shard without being a snapshot, or does not apply is corruption.

use bytes::Bytes;
use changeset::{Change, ShardFiles, decode_changeset, encode_changeset};

use crate::manifest::shard_map::ShardMap;
use crate::wal::frame::{self, FrameFault, FrameLimits, FramesEnd};

/// Version of the layout above.
pub const MANIFEST_FORMAT_VERSION: u16 = 1;

/// First bytes of the file.
pub const MANIFEST_MAGIC: [u8; 4] = *b"SMAN";

/// Bytes of the header.
pub const MANIFEST_HEADER_LEN: usize = 8;

/// Largest ChangeSet record (64 MiB): far above any real shard's file list, and a bound on
/// what a damaged length could make a reader accept.
pub const MAX_MANIFEST_RECORD: u32 = 64 << 20;

pub(crate) const RECORD_LIMITS: FrameLimits = FrameLimits {
    min_body: 1,
    max_body: MAX_MANIFEST_RECORD,
};

/// The file header.
pub fn encode_header() -> [u8; MANIFEST_HEADER_LEN] {
    let mut header = [0; MANIFEST_HEADER_LEN];
    header[0..4].copy_from_slice(&MANIFEST_MAGIC);
    header[4..6].copy_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
    header
}

/// A ChangeSet too large for one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("manifest record too large len={len} max={MAX_MANIFEST_RECORD}")]
pub struct RecordTooLarge {
    pub len: usize,
}

/// Appends one ChangeSet record to `out`.
pub fn encode_record(cs: &changeset::ChangeSet, out: &mut Vec<u8>) -> Result<(), RecordTooLarge> {
    let body = encode_changeset(cs);
    if body.is_empty() || body.len() > MAX_MANIFEST_RECORD as usize {
        // An empty body is a ChangeSet with every field at its default: no change kind, which
        // nothing can apply. It never reaches here through `Manifest::record`.
        return Err(RecordTooLarge { len: body.len() });
    }
    frame::encode_frame(&body, out);
    Ok(())
}

/// The bytes of a rewritten MANIFEST: the header and one Snapshot ChangeSet per shard.
pub fn encode_snapshot_file<'a>(
    shards: impl IntoIterator<Item = &'a ShardFiles>,
) -> Result<Vec<u8>, RecordTooLarge> {
    let mut out = encode_header().to_vec();
    for shard in shards {
        encode_record(&shard.to_changeset(), &mut out)?;
    }
    Ok(out)
}

/// What replaying a MANIFEST's bytes found.
#[derive(Clone, Debug)]
pub(crate) struct Replayed {
    pub(crate) shards: ShardMap,
    /// Length of the header and the whole records; a torn tail starts here.
    pub(crate) valid_len: u64,
    /// Why the bytes after `valid_len` are not a record, if there are any.
    pub(crate) torn: Option<FrameFault>,
    /// Records after the leading run of Snapshot records (what the last rewrite wrote).
    pub(crate) records_since_rewrite: usize,
}

/// Why the MANIFEST's bytes cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReplayError {
    pub(crate) offset: u64,
    pub(crate) detail: String,
}

fn fail(offset: u64, detail: impl Into<String>) -> ReplayError {
    ReplayError {
        offset,
        detail: detail.into(),
    }
}

/// Replays a MANIFEST's bytes into a shard map. Pure; never panics.
pub(crate) fn replay(data: &[u8]) -> Result<Replayed, ReplayError> {
    if data.len() < MANIFEST_HEADER_LEN {
        return Err(fail(
            0,
            format!("shorter than its header len={}", data.len()),
        ));
    }
    if data[0..4] != MANIFEST_MAGIC {
        return Err(fail(0, format!("bad magic found={:02x?}", &data[0..4])));
    }
    let version = u16::from_le_bytes([data[4], data[5]]);
    if version != MANIFEST_FORMAT_VERSION {
        return Err(fail(
            0,
            format!(
                "unsupported manifest format version found={version} supported={MANIFEST_FORMAT_VERSION}"
            ),
        ));
    }
    let reserved = u16::from_le_bytes([data[6], data[7]]);
    if reserved != 0 {
        return Err(fail(
            0,
            format!("header reserved field is not zero found={reserved:#06x}"),
        ));
    }
    let (frames, end) = frame::decode_frames(data, MANIFEST_HEADER_LEN, RECORD_LIMITS);
    let mut shards = ShardMap::default();
    let mut in_snapshot_prefix = true;
    let mut records_since_rewrite = 0;
    for record in &frames {
        let cs = decode_changeset(Bytes::copy_from_slice(record.body))
            .map_err(|e| fail(record.offset, format!("{e}: {}", source_text(&e))))?;
        if !matches!(cs.change, Some(Change::Snapshot(_))) {
            in_snapshot_prefix = false;
        }
        if !in_snapshot_prefix {
            records_since_rewrite += 1;
        }
        shards.replay(&cs).map_err(|e| {
            fail(
                record.offset,
                format!(
                    "{e}{} shard_id={} sequence={}",
                    source_suffix(&e),
                    cs.shard_id,
                    cs.sequence
                ),
            )
        })?;
    }
    let (valid_len, torn) = match end {
        FramesEnd::Clean => (data.len() as u64, None),
        FramesEnd::Torn { offset, fault } => (offset, Some(fault)),
        FramesEnd::Corrupt {
            offset,
            fault,
            next_valid,
        } => {
            return Err(fail(
                offset,
                format!("{fault} valid_record_at={next_valid}"),
            ));
        }
    };
    Ok(Replayed {
        shards,
        valid_len,
        torn,
        records_since_rewrite,
    })
}

/// The text of an error's source, for a detail string that stands on its own.
fn source_text(e: &dyn std::error::Error) -> String {
    e.source().map(|s| s.to_string()).unwrap_or_default()
}

fn source_suffix(e: &dyn std::error::Error) -> String {
    match e.source() {
        Some(source) => format!(": {source}"),
        None => String::new(),
    }
}
