//! The bytes of a Raft log segment (format version 2): encoders and a pure decoder.
//!
//! # Layout (segment format version 2)
//!
//! The segment header and the frames are the engine WAL's (`wal/segment_codec.rs`,
//! `wal/frame.rs`); only the header's version (2) and the frame bodies differ. Integers are
//! little-endian.
//!
//! ```text
//! segment    := header(format_version = 2) checkpoint_frame? frame*
//! frame      := len:u32 body_crc:u32 header_crc:u32 body          (wal/frame.rs)
//! body       := 0x01 count:u32 (count >= 1) op{count}             a batch: one RaftLog::write
//!             | 0x02 count:u32 region_state{count}                a checkpoint (region ids
//!                                                                 strictly increasing)
//!             | 0x03 count:u32 region_state_at{count}             a checkpoint where some
//!                                                                 conf index is not 0
//! op         := region_id:u64 op_kind:u8 payload
//!   op_kind 1 entries:        first_index:u64 n:u32 (n >= 1) entry{n}
//!                             (indexes first_index .. first_index + n - 1, no overflow)
//!   op_kind 2 hard state:     term:u64 vote:u64 commit:u64
//!   op_kind 3 conf state:     conf
//!   op_kind 4 truncated:      index:u64 term:u64
//!   op_kind 5 region removed: (no payload)
//!   op_kind 6 conf state at:  conf conf_index:u64 (not 0; a conf index of 0 is op_kind 3)
//! entry      := term:u64 entry_kind:u8 (0 normal, 1 conf change, 2 conf change v2)
//!               data_len:u32 data context_len:u32 context
//! region_state := region_id:u64 truncated_index:u64 truncated_term:u64
//!                 last_index:u64 (>= truncated_index) term:u64 vote:u64 commit:u64 conf
//! region_state_at := region_state conf_index:u64
//! conf       := voters:ids learners:ids voters_outgoing:ids learners_next:ids
//!               auto_leave:u8 (0 or 1)
//! ids        := n:u32 u64{n}
//! ```
//!
//! A whole batch is one frame, so its checksum makes it atomic: after a crash the last batch
//! is whole or absent, never half there. A body is at least 5 bytes and at most
//! [`MAX_RECORD_BODY`] (256 MiB, the engine WAL's limit). Every content has exactly one
//! encoding (no trailing bytes, flags 0 or 1, known kinds only), so re-encoding what was
//! decoded gives the same bytes, which the fuzz target checks. A frame whose checksums hold but
//! whose body does not decode was written that way (or crafted): corruption, never a torn tail.

use bytes::Bytes;

use crate::raft_log::log_batch::{LogBatch, LogOp, RegionOp};
use crate::raft_log::log_entry::{ConfState, EntryKind, HardState, LogEntry};
use crate::raft_log::log_error::BatchError;
use crate::wal::frame::{self, FrameLimits, FramesEnd};
use crate::wal::segment_codec::{
    MAX_RECORD_BODY, RAFT_LOG_FORMAT_VERSION, SEGMENT_HEADER_LEN, SegmentFrames,
    SegmentHeaderFault, decode_segment_frames, encode_versioned_segment_header,
};

const BODY_BATCH: u8 = 1;
const BODY_CHECKPOINT: u8 = 2;
const OP_ENTRIES: u8 = 1;
const OP_HARD_STATE: u8 = 2;
const OP_CONF_STATE: u8 = 3;
const OP_TRUNCATED: u8 = 4;
const OP_REGION_REMOVED: u8 = 5;
const OP_CONF_STATE_AT: u8 = 6;
const BODY_CHECKPOINT_AT: u8 = 3;

/// Bounds on a format version 2 record body: a kind byte and a count at least.
pub(crate) const RAFT_RECORD_LIMITS: FrameLimits = FrameLimits {
    min_body: 5,
    max_body: MAX_RECORD_BODY,
};

/// A region's state as a checkpoint at the start of a segment records it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionCheckpoint {
    pub region_id: u64,
    pub truncated_index: u64,
    pub truncated_term: u64,
    pub last_index: u64,
    pub hard_state: HardState,
    pub conf_state: ConfState,
}

/// One decoded frame body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaftRecord {
    /// What one [`crate::raft_log::RaftLog::write`] wrote.
    Batch(LogBatch),
    /// Every live region's state when the segment was started, oldest region id first.
    Checkpoint(Vec<RegionCheckpoint>),
}

/// Why a frame body is not a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordFault {
    #[error("record body ends early at={at} needed={needed} len={len}")]
    Truncated {
        at: usize,
        needed: usize,
        len: usize,
    },
    #[error("unknown record kind kind={kind}")]
    UnknownKind { kind: u8 },
    #[error("unknown raft log operation op={op} region_id={region_id}")]
    UnknownOp { op: u8, region_id: u64 },
    #[error("unknown entry kind kind={kind} region_id={region_id}")]
    UnknownEntryKind { kind: u8, region_id: u64 },
    #[error("flag is neither 0 nor 1 value={value}")]
    BadFlag { value: u8 },
    #[error("batch holds no operation")]
    EmptyBatch,
    #[error("append holds no entry region_id={region_id}")]
    EmptyAppend { region_id: u64 },
    #[error("entry indexes overflow region_id={region_id} first_index={first_index} count={count}")]
    IndexOverflow {
        region_id: u64,
        first_index: u64,
        count: u32,
    },
    #[error("checkpoint regions out of order region_id={region_id} previous={previous}")]
    UnorderedCheckpoint { region_id: u64, previous: u64 },
    #[error(
        "checkpoint last index below truncated index region_id={region_id} last_index={last_index} truncated_index={truncated_index}"
    )]
    CheckpointBelowTruncated {
        region_id: u64,
        last_index: u64,
        truncated_index: u64,
    },
    #[error("record body has trailing bytes len={len}")]
    TrailingBytes { len: usize },
    #[error("a conf state with a conf index holds index 0 (that is the plain form's)")]
    ZeroConfIndex,
}

/// Why a segment file cannot be read as a Raft log segment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RaftSegmentFault {
    #[error("bad segment header")]
    Header(#[from] SegmentHeaderFault),
    /// A frame is intact but its body is not a record.
    #[error("bad record offset={offset}")]
    Record {
        offset: u64,
        #[source]
        fault: RecordFault,
    },
}

/// The header of Raft log segment `segment_seq`.
pub fn encode_segment_header(segment_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    encode_versioned_segment_header(RAFT_LOG_FORMAT_VERSION, segment_seq)
}

/// Appends the frame of `batch` to `out`. The caller checks the batch is not empty.
pub fn encode_batch_record(batch: &LogBatch, out: &mut Vec<u8>) -> Result<(), BatchError> {
    let mut body = Vec::with_capacity(batch_body_len(batch));
    body.push(BODY_BATCH);
    put_count(&mut body, batch.ops().len());
    for RegionOp { region_id, op } in batch.ops() {
        body.extend_from_slice(&region_id.to_le_bytes());
        match op {
            LogOp::Append(entries) => {
                body.push(OP_ENTRIES);
                let first = entries.first().map_or(0, |e| e.index);
                body.extend_from_slice(&first.to_le_bytes());
                put_count(&mut body, entries.len());
                for e in entries {
                    body.extend_from_slice(&e.term.to_le_bytes());
                    body.push(e.kind.as_u8());
                    put_bytes(&mut body, &e.data);
                    put_bytes(&mut body, &e.context);
                }
            }
            LogOp::HardState(hs) => {
                body.push(OP_HARD_STATE);
                put_hard_state(&mut body, hs);
            }
            LogOp::ConfState(cs) if cs.index == 0 => {
                body.push(OP_CONF_STATE);
                put_conf_state(&mut body, cs);
            }
            LogOp::ConfState(cs) => {
                body.push(OP_CONF_STATE_AT);
                put_conf_state(&mut body, cs);
                body.extend_from_slice(&cs.index.to_le_bytes());
            }
            LogOp::Truncate { index, term } => {
                body.push(OP_TRUNCATED);
                body.extend_from_slice(&index.to_le_bytes());
                body.extend_from_slice(&term.to_le_bytes());
            }
            LogOp::RemoveRegion => body.push(OP_REGION_REMOVED),
        }
    }
    frame_body(&body, out)
}

/// The length of `batch`'s body as `encode_batch_record` writes it, so the body is allocated
/// once (a Raft round writes one record; growing the buffer was a tenth of its cost).
fn batch_body_len(batch: &LogBatch) -> usize {
    let ops: usize = batch
        .ops()
        .iter()
        .map(|RegionOp { op, .. }| {
            8 + 1
                + match op {
                    LogOp::Append(entries) => {
                        8 + 4
                            + entries
                                .iter()
                                .map(|e| 8 + 1 + 4 + e.data.len() + 4 + e.context.len())
                                .sum::<usize>()
                    }
                    LogOp::HardState(_) => 3 * 8,
                    LogOp::ConfState(cs) => {
                        let ids = cs.voters.len()
                            + cs.learners.len()
                            + cs.voters_outgoing.len()
                            + cs.learners_next.len();
                        4 * 4 + 8 * ids + 1 + if cs.index == 0 { 0 } else { 8 }
                    }
                    LogOp::Truncate { .. } => 2 * 8,
                    LogOp::RemoveRegion => 0,
                }
        })
        .sum();
    1 + 4 + ops
}

/// Appends the frame of a checkpoint to `out`; `regions` sorted by region id, no repeats.
pub fn encode_checkpoint_record(
    regions: &[RegionCheckpoint],
    out: &mut Vec<u8>,
) -> Result<(), BatchError> {
    let mut body = Vec::new();
    let with_index = regions.iter().any(|r| r.conf_state.index != 0);
    body.push(if with_index {
        BODY_CHECKPOINT_AT
    } else {
        BODY_CHECKPOINT
    });
    put_count(&mut body, regions.len());
    for r in regions {
        body.extend_from_slice(&r.region_id.to_le_bytes());
        body.extend_from_slice(&r.truncated_index.to_le_bytes());
        body.extend_from_slice(&r.truncated_term.to_le_bytes());
        body.extend_from_slice(&r.last_index.to_le_bytes());
        put_hard_state(&mut body, &r.hard_state);
        put_conf_state(&mut body, &r.conf_state);
        if with_index {
            body.extend_from_slice(&r.conf_state.index.to_le_bytes());
        }
    }
    frame_body(&body, out)
}

fn frame_body(body: &[u8], out: &mut Vec<u8>) -> Result<(), BatchError> {
    if body.len() > MAX_RECORD_BODY as usize {
        return Err(BatchError::TooLarge {
            len: body.len() as u64,
            max: u64::from(MAX_RECORD_BODY),
        });
    }
    frame::encode_frame(body, out);
    Ok(())
}

/// Counts and lengths are u32; anything larger cannot fit a record and is rejected by the
/// body length check, so saturating here only keeps the encoder panic-free.
fn put_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_count(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_hard_state(out: &mut Vec<u8>, hs: &HardState) {
    out.extend_from_slice(&hs.term.to_le_bytes());
    out.extend_from_slice(&hs.vote.to_le_bytes());
    out.extend_from_slice(&hs.commit.to_le_bytes());
}

fn put_conf_state(out: &mut Vec<u8>, cs: &ConfState) {
    for ids in [
        &cs.voters,
        &cs.learners,
        &cs.voters_outgoing,
        &cs.learners_next,
    ] {
        put_count(out, ids.len());
        for id in ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out.push(u8::from(cs.auto_leave));
}

/// Reads a body front to back; every read checks the bytes left.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordFault> {
        let left = self.data.len() - self.at;
        if n > left {
            return Err(RecordFault::Truncated {
                at: self.at,
                needed: n,
                len: self.data.len(),
            });
        }
        let bytes = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, RecordFault> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, RecordFault> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, RecordFault> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn flag(&mut self) -> Result<bool, RecordFault> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(RecordFault::BadFlag { value }),
        }
    }

    /// A length-prefixed byte string, copied: replay keeps entries, not the segment buffer.
    fn bytes(&mut self) -> Result<Bytes, RecordFault> {
        let len = self.u32()? as usize;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }

    fn ids(&mut self) -> Result<Vec<u64>, RecordFault> {
        let n = self.u32()? as usize;
        // Checked before allocating: a count never reserves more than the bytes present.
        let raw = self.take(n.saturating_mul(8))?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }

    fn hard_state(&mut self) -> Result<HardState, RecordFault> {
        Ok(HardState {
            term: self.u64()?,
            vote: self.u64()?,
            commit: self.u64()?,
        })
    }

    fn conf_state(&mut self) -> Result<ConfState, RecordFault> {
        Ok(ConfState {
            voters: self.ids()?,
            learners: self.ids()?,
            voters_outgoing: self.ids()?,
            learners_next: self.ids()?,
            auto_leave: self.flag()?,
            index: 0,
        })
    }

    fn conf_state_at(&mut self) -> Result<ConfState, RecordFault> {
        let mut cs = self.conf_state()?;
        cs.index = self.u64()?;
        if cs.index == 0 {
            return Err(RecordFault::ZeroConfIndex);
        }
        Ok(cs)
    }

    fn entries(&mut self, region_id: u64) -> Result<Vec<LogEntry>, RecordFault> {
        let first_index = self.u64()?;
        let count = self.u32()?;
        if count == 0 {
            return Err(RecordFault::EmptyAppend { region_id });
        }
        if first_index.checked_add(u64::from(count) - 1).is_none() {
            return Err(RecordFault::IndexOverflow {
                region_id,
                first_index,
                count,
            });
        }
        let mut entries = Vec::new();
        for i in 0..u64::from(count) {
            let term = self.u64()?;
            let kind_byte = self.u8()?;
            let kind = EntryKind::from_u8(kind_byte).ok_or(RecordFault::UnknownEntryKind {
                kind: kind_byte,
                region_id,
            })?;
            entries.push(LogEntry {
                index: first_index + i,
                term,
                kind,
                data: self.bytes()?,
                context: self.bytes()?,
            });
        }
        Ok(entries)
    }

    fn batch(&mut self, count: u32) -> Result<LogBatch, RecordFault> {
        if count == 0 {
            return Err(RecordFault::EmptyBatch);
        }
        let mut batch = LogBatch::default();
        for _ in 0..count {
            let region_id = self.u64()?;
            let op = match self.u8()? {
                OP_ENTRIES => LogOp::Append(self.entries(region_id)?),
                OP_HARD_STATE => LogOp::HardState(self.hard_state()?),
                OP_CONF_STATE => LogOp::ConfState(self.conf_state()?),
                OP_CONF_STATE_AT => LogOp::ConfState(self.conf_state_at()?),
                OP_TRUNCATED => LogOp::Truncate {
                    index: self.u64()?,
                    term: self.u64()?,
                },
                OP_REGION_REMOVED => LogOp::RemoveRegion,
                op => return Err(RecordFault::UnknownOp { op, region_id }),
            };
            batch.push(region_id, op);
        }
        Ok(batch)
    }

    fn checkpoint(
        &mut self,
        count: u32,
        with_index: bool,
    ) -> Result<Vec<RegionCheckpoint>, RecordFault> {
        let mut regions: Vec<RegionCheckpoint> = Vec::new();
        for _ in 0..count {
            let mut region = RegionCheckpoint {
                region_id: self.u64()?,
                truncated_index: self.u64()?,
                truncated_term: self.u64()?,
                last_index: self.u64()?,
                hard_state: self.hard_state()?,
                conf_state: self.conf_state()?,
            };
            if with_index {
                region.conf_state.index = self.u64()?;
            }
            if let Some(previous) = regions.last().map(|r| r.region_id)
                && region.region_id <= previous
            {
                return Err(RecordFault::UnorderedCheckpoint {
                    region_id: region.region_id,
                    previous,
                });
            }
            if region.last_index < region.truncated_index {
                return Err(RecordFault::CheckpointBelowTruncated {
                    region_id: region.region_id,
                    last_index: region.last_index,
                    truncated_index: region.truncated_index,
                });
            }
            regions.push(region);
        }
        if with_index && regions.iter().all(|r| r.conf_state.index == 0) {
            // The plain checkpoint's form: one content, one encoding.
            return Err(RecordFault::ZeroConfIndex);
        }
        Ok(regions)
    }
}

/// Decodes one frame body. Never panics; allocates no more than the body's size.
pub fn decode_record(body: &[u8]) -> Result<RaftRecord, RecordFault> {
    let mut r = Reader { data: body, at: 0 };
    let kind = r.u8()?;
    let count = r.u32()?;
    let record = match kind {
        BODY_BATCH => RaftRecord::Batch(r.batch(count)?),
        BODY_CHECKPOINT => RaftRecord::Checkpoint(r.checkpoint(count, false)?),
        BODY_CHECKPOINT_AT => RaftRecord::Checkpoint(r.checkpoint(count, true)?),
        kind => return Err(RecordFault::UnknownKind { kind }),
    };
    if r.at != body.len() {
        return Err(RecordFault::TrailingBytes {
            len: body.len() - r.at,
        });
    }
    Ok(record)
}

/// A decoded Raft log segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRaftSegment {
    /// The segment number its header states.
    pub segment_seq: u64,
    /// The records before the first damaged frame, in file order, with their offsets.
    pub records: Vec<(u64, RaftRecord)>,
    /// Whether the frames end cleanly, in a torn tail, or in corruption.
    pub end: FramesEnd,
}

/// Decodes a whole Raft log segment file. Never panics.
pub fn decode_raft_segment(data: &[u8]) -> Result<DecodedRaftSegment, RaftSegmentFault> {
    let SegmentFrames {
        segment_seq,
        frames,
        end,
    } = decode_segment_frames(data, RAFT_LOG_FORMAT_VERSION, RAFT_RECORD_LIMITS)?;
    let records = frames
        .iter()
        .map(|f| {
            decode_record(f.body)
                .map(|record| (f.offset, record))
                .map_err(|fault| RaftSegmentFault::Record {
                    offset: f.offset,
                    fault,
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(DecodedRaftSegment {
        segment_seq,
        records,
        end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins format version 2: segment 7 holding a checkpoint of region 3 and a batch that
    /// appends entry 6 to it and truncates it at 5, byte for byte, as computed by hand from the
    /// layout above. A format change bumps the version and keeps decoding this (and the golden
    /// files under `fuzz/corpus/raft_log_segment`).
    const V2_SEGMENT: &str = concat!(
        "5357414c",
        "0200",
        "0000",
        "0700000000000000", // header: magic, version 2, reserved, seq 7
        "56000000",
        "449f5191",
        "48dafa30", // frame: len 86, body crc, header crc
        "02",
        "01000000", // checkpoint, 1 region
        "0300000000000000",
        "0500000000000000",
        "0500000000000000",
        "0500000000000000", // region 3, truncated (5, 5), last 5
        "0100000000000000",
        "0100000000000000",
        "0500000000000000", // hard state: term 1, vote 1, commit 5
        "01000000",
        "0100000000000000",
        "00000000",
        "00000000",
        "00000000",
        "00", // conf: voters [1], no learners, outgoing, next; auto_leave 0
        "46000000",
        "523adf77",
        "238ee90a", // frame: len 70, body crc, header crc
        "01",
        "02000000", // batch, 2 operations
        "0300000000000000",
        "01",
        "0600000000000000",
        "01000000", // region 3, entries from 6, 1 entry
        "0100000000000000",
        "00",
        "02000000",
        "6162",
        "00000000", // term 1, normal, data "ab", no context
        "0300000000000000",
        "04",
        "0500000000000000",
        "0500000000000000", // region 3, truncated (5, 5)
    );

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_conf_index_round_trips_in_batches_and_checkpoints_and_zero_has_one_form() {
        let conf = ConfState {
            voters: vec![1, 2, 4],
            learners: vec![5],
            index: 433,
            ..Default::default()
        };
        let mut batch = LogBatch::default();
        batch.set_conf_state(9, conf.clone());
        let mut framed = Vec::new();
        encode_batch_record(&batch, &mut framed).unwrap();
        let body = &framed[frame::FRAME_HEADER_LEN..];
        assert_eq!(decode_record(body), Ok(RaftRecord::Batch(batch)));
        let regions = vec![
            RegionCheckpoint {
                region_id: 1,
                ..RegionCheckpoint::default()
            },
            RegionCheckpoint {
                region_id: 9,
                conf_state: conf,
                ..RegionCheckpoint::default()
            },
        ];
        let mut framed = Vec::new();
        encode_checkpoint_record(&regions, &mut framed).unwrap();
        let body = framed[frame::FRAME_HEADER_LEN..].to_vec();
        assert_eq!(decode_record(&body), Ok(RaftRecord::Checkpoint(regions)));
        // A conf index of 0 in the indexed forms is refused: it has the plain form.
        let mut zero = body.clone();
        let len = zero.len();
        zero[len - 8..].fill(0);
        assert_eq!(decode_record(&zero), Err(RecordFault::ZeroConfIndex));
    }

    fn pinned_records() -> (Vec<RegionCheckpoint>, LogBatch) {
        let checkpoint = vec![RegionCheckpoint {
            region_id: 3,
            truncated_index: 5,
            truncated_term: 5,
            last_index: 5,
            hard_state: HardState {
                term: 1,
                vote: 1,
                commit: 5,
            },
            conf_state: ConfState {
                voters: vec![1],
                ..Default::default()
            },
        }];
        let mut batch = LogBatch::default();
        batch.append(
            3,
            vec![LogEntry {
                index: 6,
                term: 1,
                kind: EntryKind::Normal,
                data: Bytes::from_static(b"ab"),
                context: Bytes::new(),
            }],
        );
        batch.truncate(3, 5, 5);
        (checkpoint, batch)
    }

    #[test]
    fn format_v2_segment_bytes_are_pinned() {
        let (checkpoint, batch) = pinned_records();
        let mut data = encode_segment_header(7).to_vec();
        encode_checkpoint_record(&checkpoint, &mut data).unwrap();
        encode_batch_record(&batch, &mut data).unwrap();
        assert_eq!(data, unhex(V2_SEGMENT));
    }

    #[test]
    fn format_v2_segment_still_decodes() {
        let (checkpoint, batch) = pinned_records();
        let decoded = decode_raft_segment(&unhex(V2_SEGMENT)).unwrap();
        assert_eq!(decoded.segment_seq, 7);
        assert_eq!(decoded.end, FramesEnd::Clean);
        assert_eq!(
            decoded.records,
            [
                (16, RaftRecord::Checkpoint(checkpoint)),
                (114, RaftRecord::Batch(batch))
            ]
        );
    }

    #[test]
    fn a_batch_body_is_allocated_at_its_encoded_length() {
        let (_, mut batch) = pinned_records();
        batch.set_hard_state(
            3,
            HardState {
                term: 2,
                vote: 1,
                commit: 6,
            },
        );
        batch.set_conf_state(
            4,
            ConfState {
                voters: vec![1, 2, 3],
                learners: vec![4],
                voters_outgoing: vec![5],
                learners_next: vec![6, 7],
                auto_leave: true,
                index: 0,
            },
        );
        batch.set_conf_state(
            6,
            ConfState {
                voters: vec![1, 4],
                index: 17,
                ..Default::default()
            },
        );
        batch.remove_region(5);
        let mut framed = Vec::new();
        encode_batch_record(&batch, &mut framed).unwrap();
        assert_eq!(
            batch_body_len(&batch),
            framed.len() - frame::FRAME_HEADER_LEN
        );
    }

    #[test]
    fn bodies_with_more_than_one_encoding_are_refused() {
        let body = |bytes: &[u8]| decode_record(bytes);
        assert_eq!(body(&[1, 0, 0, 0, 0]), Err(RecordFault::EmptyBatch));
        assert_eq!(
            body(&[2, 0, 0, 0, 0, 7]),
            Err(RecordFault::TrailingBytes { len: 1 })
        );
        let mut bad_flag = vec![2, 1, 0, 0, 0];
        bad_flag.extend_from_slice(&[0; 8 * 7 + 4 * 4]);
        bad_flag.push(2);
        assert_eq!(body(&bad_flag), Err(RecordFault::BadFlag { value: 2 }));
        let mut empty_append = vec![1, 1, 0, 0, 0];
        empty_append.extend_from_slice(&9u64.to_le_bytes());
        empty_append.push(1);
        empty_append.extend_from_slice(&[0; 8 + 4]);
        assert_eq!(
            body(&empty_append),
            Err(RecordFault::EmptyAppend { region_id: 9 })
        );
    }

    #[test]
    fn a_huge_count_is_refused_before_anything_is_allocated_for_it() {
        let mut body = vec![2, 1, 0, 0, 0];
        body.extend_from_slice(&[0; 8 * 7]);
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_record(&body),
            Err(RecordFault::Truncated { .. })
        ));
    }
}
