//! A compaction described for another process: what a storage server sends a worker's
//! `POST /compact`, and what the worker answers.
//!
//! The server plans the compaction (which files, which output level) exactly as for a local
//! one; the job names the inputs by file id, so the worker opens them from the shared object
//! store, and carries everything that decides the output bytes (range, GC safe point, which
//! column families may drop tombstones, the table options, the target file size), so a
//! worker's outputs are those the server would have written. The output file ids are
//! allocated by the server (it stays the only allocator of its ids): the worker uses them in
//! order and fails the job rather than invent one. Knowing every name a job may write is also
//! what lets the server delete the outputs of a job that failed.
//!
//! Both messages are protobuf (prost-derived, like `messages`): a field is never renumbered,
//! a new one gets a new tag. [`CompactionJob::check`] is what a worker runs on a decoded job
//! before it reads anything: a job that fails it is answered 400.

use bytes::Bytes;
use prost::Message;

use crate::messages::TableCreate;
use types::ColumnFamily;

/// The newest SST format version a job may ask for (`sst::FormatVersion::NEWEST`; this crate
/// does not depend on `sst`, and the engine checks the two agree).
pub const MAX_TABLE_FORMAT_VERSION: u32 = 2;

/// One compaction to run: inputs, where the outputs go, how to build them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionJob {
    /// The shard (region) compacted.
    #[prost(uint64, tag = "1")]
    pub shard_id: u64,
    /// The shard's version (epoch) the plan was made at: informational for the worker; the
    /// server's apply rejects a result made for another version.
    #[prost(uint64, tag = "2")]
    pub shard_ver: u64,
    /// The shard's range `[start, end)` (`end` empty: unbounded). Inputs shared with a split
    /// sibling hold keys outside it, which the merge drops.
    #[prost(bytes = "bytes", tag = "3")]
    pub start: Bytes,
    #[prost(bytes = "bytes", tag = "4")]
    pub end: Bytes,
    /// The upper level: 0 for L0 → L1. Outputs go to `level + 1`.
    #[prost(uint32, tag = "5")]
    pub level: u32,
    /// The GC safe point the merge drops versions below (`compaction::gc_versions`).
    #[prost(uint64, tag = "6")]
    pub safe_point: u64,
    /// The column families merged, each with its inputs.
    #[prost(message, repeated, tag = "7")]
    pub cfs: Vec<CfInputs>,
    /// How output tables are built.
    #[prost(message, optional, tag = "8")]
    pub options: Option<OutputOptions>,
    /// The ids the outputs take, in order. A job needing more fails.
    #[prost(uint64, repeated, tag = "9")]
    pub output_ids: Vec<u64>,
    /// Unix milliseconds after which the worker starts storing no output: the server deletes
    /// the ids of a failed job only once it passed (0: none).
    #[prost(uint64, tag = "10")]
    pub deadline_ms: u64,
}

/// The inputs of one column family, newest data first.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CfInputs {
    /// Column family wire number ([`ColumnFamily::as_u32`]).
    #[prost(uint32, tag = "1")]
    pub cf: u32,
    /// No deeper level of this column family overlaps the inputs: a tombstone that ends up a
    /// key's oldest kept version may be dropped.
    #[prost(bool, tag = "2")]
    pub bottommost: bool,
    #[prost(message, repeated, tag = "3")]
    pub inputs: Vec<InputFile>,
}

/// One input: an L0 file (its section of the column family) or a level table.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InputFile {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(bool, tag = "2")]
    pub l0: bool,
    /// Its smallest and biggest user key (of the section, for an L0 file), inclusive: the
    /// server checks a result's key span against them.
    #[prost(bytes = "bytes", tag = "3")]
    pub smallest: Bytes,
    #[prost(bytes = "bytes", tag = "4")]
    pub biggest: Bytes,
}

/// The table options of the outputs (`sst::BuilderOptions` and the target file size).
#[derive(Clone, PartialEq, prost::Message)]
pub struct OutputOptions {
    #[prost(uint32, tag = "1")]
    pub block_size: u32,
    /// 0: none, 1: zstd at `zstd_level` (the kinds of `sst::Compression::kind`).
    #[prost(uint32, tag = "2")]
    pub compression: u32,
    #[prost(int32, tag = "3")]
    pub zstd_level: i32,
    #[prost(uint32, tag = "4")]
    pub filter_bits_per_key: u32,
    /// An output is cut once it reaches this many bytes.
    #[prost(uint64, tag = "5")]
    pub target_file_size: u64,
    /// The SST format version of the outputs (`sst::FormatVersion`): 0 (a server from before
    /// the field) means 1, the only one there was.
    #[prost(uint32, tag = "6")]
    pub table_format_version: u32,
}

/// What a worker answers: the outputs it stored, in key order per column family.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionResult {
    #[prost(message, repeated, tag = "1")]
    pub outputs: Vec<TableCreate>,
    /// Bytes of input tables read (their sizes).
    #[prost(uint64, tag = "2")]
    pub input_bytes: u64,
    /// Milliseconds the merge took on the worker.
    #[prost(uint64, tag = "3")]
    pub merge_ms: u64,
}

/// Why a job or a result is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("compaction job is not valid protobuf len={len}: {detail}")]
    Protobuf { len: usize, detail: String },
    #[error("compaction job has no output options")]
    NoOptions,
    #[error("compaction job names an unknown column family cf={cf}")]
    UnknownColumnFamily { cf: u32 },
    #[error("compaction job names column family {cf} twice")]
    DuplicateColumnFamily { cf: u32 },
    #[error("compaction job has no input")]
    NoInputs,
    #[error("compaction job has no output id")]
    NoOutputIds,
    #[error("compaction job's upper level is out of range: expected below {max}, found {found}")]
    LevelOutOfRange { max: u32, found: u32 },
    #[error("compaction job names an L0 input below level 0 id={id} level={level}")]
    L0BelowTop { id: u64, level: u32 },
    #[error(
        "compaction job's table options are out of range: block_size={block_size} \
         compression={compression} target_file_size={target_file_size} \
         table_format_version={table_format_version} (at most {MAX_TABLE_FORMAT_VERSION})"
    )]
    BadOptions {
        block_size: u32,
        compression: u32,
        target_file_size: u64,
        table_format_version: u32,
    },
    #[error("compaction job's range is empty start={start:?} end={end:?}")]
    EmptyRange { start: Bytes, end: Bytes },
}

/// Largest block size a job may ask for (as `sst::BuilderOptions`).
pub const MAX_BLOCK_SIZE: u32 = 64 << 20;

impl CompactionJob {
    pub fn encode_to_bytes(&self) -> Bytes {
        Bytes::from(self.encode_to_vec())
    }

    /// Decodes and [`check`](Self::check)s a job.
    pub fn decode_checked(buf: Bytes) -> Result<CompactionJob, JobError> {
        let len = buf.len();
        let job = CompactionJob::decode(buf).map_err(|e| JobError::Protobuf {
            len,
            detail: e.to_string(),
        })?;
        job.check()?;
        Ok(job)
    }

    /// What every job a server builds satisfies; a worker refuses the others before reading
    /// anything.
    pub fn check(&self) -> Result<(), JobError> {
        let opts = self.options.as_ref().ok_or(JobError::NoOptions)?;
        if opts.block_size == 0
            || opts.block_size > MAX_BLOCK_SIZE
            || opts.compression > 1
            || opts.target_file_size == 0
            || opts.table_format_version > MAX_TABLE_FORMAT_VERSION
        {
            return Err(JobError::BadOptions {
                block_size: opts.block_size,
                compression: opts.compression,
                target_file_size: opts.target_file_size,
                table_format_version: opts.table_format_version,
            });
        }
        if self.level >= crate::MAX_LEVEL {
            return Err(JobError::LevelOutOfRange {
                max: crate::MAX_LEVEL,
                found: self.level,
            });
        }
        if !self.end.is_empty() && self.start >= self.end {
            return Err(JobError::EmptyRange {
                start: self.start.clone(),
                end: self.end.clone(),
            });
        }
        let mut seen = Vec::new();
        for c in &self.cfs {
            if ColumnFamily::from_u32(c.cf).is_none() {
                return Err(JobError::UnknownColumnFamily { cf: c.cf });
            }
            if seen.contains(&c.cf) {
                return Err(JobError::DuplicateColumnFamily { cf: c.cf });
            }
            seen.push(c.cf);
            if let Some(i) = c.inputs.iter().find(|i| i.l0 && self.level != 0) {
                return Err(JobError::L0BelowTop {
                    id: i.id,
                    level: self.level,
                });
            }
        }
        if self.cfs.iter().all(|c| c.inputs.is_empty()) {
            return Err(JobError::NoInputs);
        }
        if self.output_ids.is_empty() {
            return Err(JobError::NoOutputIds);
        }
        Ok(())
    }

    /// The level the outputs go to.
    pub fn output_level(&self) -> u32 {
        self.level + 1
    }
}

impl CompactionResult {
    pub fn decode_bytes(buf: Bytes) -> Result<CompactionResult, JobError> {
        let len = buf.len();
        CompactionResult::decode(buf).map_err(|e| JobError::Protobuf {
            len,
            detail: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job() -> CompactionJob {
        CompactionJob {
            shard_id: 7,
            shard_ver: 2,
            start: Bytes::from_static(b"a"),
            end: Bytes::new(),
            level: 0,
            safe_point: 100,
            cfs: vec![CfInputs {
                cf: ColumnFamily::Write.as_u32(),
                bottommost: true,
                inputs: vec![
                    InputFile {
                        id: 3,
                        l0: true,
                        ..Default::default()
                    },
                    InputFile {
                        id: 1,
                        l0: false,
                        ..Default::default()
                    },
                ],
            }],
            options: Some(OutputOptions {
                block_size: 4096,
                compression: 1,
                zstd_level: 3,
                filter_bits_per_key: 10,
                target_file_size: 8 << 20,
                table_format_version: 2,
            }),
            output_ids: vec![10, 11],
            deadline_ms: 0,
        }
    }

    #[test]
    fn a_planned_job_passes_the_check_and_survives_a_round_trip() {
        let j = job();
        let back = CompactionJob::decode_checked(j.encode_to_bytes()).unwrap();
        assert_eq!(back, j);
        assert_eq!(back.output_level(), 1);
    }

    #[test]
    fn jobs_a_server_never_builds_are_refused_with_what_is_wrong() {
        let mut j = job();
        j.options = None;
        assert_eq!(j.check(), Err(JobError::NoOptions));
        let mut j = job();
        j.cfs[0].cf = 99;
        assert_eq!(j.check(), Err(JobError::UnknownColumnFamily { cf: 99 }));
        let mut j = job();
        j.cfs.push(j.cfs[0].clone());
        assert!(matches!(
            j.check(),
            Err(JobError::DuplicateColumnFamily { .. })
        ));
        let mut j = job();
        j.output_ids.clear();
        assert_eq!(j.check(), Err(JobError::NoOutputIds));
        let mut j = job();
        j.cfs[0].inputs.clear();
        assert_eq!(j.check(), Err(JobError::NoInputs));
        let mut j = job();
        j.level = 2;
        assert!(matches!(j.check(), Err(JobError::L0BelowTop { id: 3, .. })));
        let mut j = job();
        j.end = Bytes::from_static(b"a");
        assert!(matches!(j.check(), Err(JobError::EmptyRange { .. })));
        let mut j = job();
        j.options.as_mut().unwrap().target_file_size = 0;
        assert!(matches!(j.check(), Err(JobError::BadOptions { .. })));
        let mut j = job();
        j.options.as_mut().unwrap().table_format_version = MAX_TABLE_FORMAT_VERSION + 1;
        let err = j.check().unwrap_err();
        assert!(matches!(
            err,
            JobError::BadOptions {
                table_format_version: 3,
                ..
            }
        ));
        assert!(
            err.to_string()
                .contains("table_format_version=3 (at most 2)")
        );
        assert!(matches!(
            CompactionJob::decode_checked(Bytes::from_static(&[0xff, 0xff])),
            Err(JobError::Protobuf { len: 2, .. })
        ));
    }

    proptest! {
        #[test]
        fn any_job_round_trips(
            shard_id in any::<u64>(),
            level in 0u32..6,
            safe_point in any::<u64>(),
            ids in proptest::collection::vec(any::<u64>(), 0..8),
            inputs in proptest::collection::vec((any::<u64>(), any::<bool>()), 0..8),
            start in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let j = CompactionJob {
                shard_id,
                level,
                safe_point,
                start: Bytes::from(start),
                output_ids: ids,
                cfs: vec![CfInputs {
                    cf: 1,
                    bottommost: level > 2,
                    inputs: inputs.into_iter().map(|(id, l0)| InputFile { id, l0, ..Default::default() }).collect(),
                }],
                ..job()
            };
            let back = CompactionJob::decode(j.encode_to_bytes()).unwrap();
            prop_assert_eq!(&back, &j);
            // The check depends on the value only: the decoded copy agrees.
            prop_assert_eq!(back.check(), j.check());
        }
    }
}
