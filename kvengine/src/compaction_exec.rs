//! Running a compaction described as a [`CompactionJob`], here or on another process.
//!
//! A planned compaction ([`compaction::Plan`]) becomes a job ([`job_of`]): its inputs by file
//! id, its range, safe point, bottommost flags and table options. [`merge_job`] runs a job
//! over opened inputs, storing each output as soon as it is built under the next id it is
//! given; the local compaction and a worker's `POST /compact` ([`run_compaction_job`]) both
//! call it, so a worker's outputs are byte for byte those the server would have written
//! (nothing in a table names its file id).
//!
//! **Offloading** ([`CompactionOffload`], installed by the server): when the owner wants a
//! compaction elsewhere, the engine allocates the output ids itself (it stays the only
//! allocator of its ids), records them in an *intent* file (below), and hands the job over. A
//! result is used only once [`verify`] opened every output from the object store and found
//! what the worker claimed (ids it was given, the output level, its column families, keys in
//! the range and in order, the sizes); then it is proposed exactly as a local compaction's,
//! and an input that changed meanwhile makes the apply reject it as conflicted (its outputs
//! then go to file GC like any unused output). Anything else — the owner could not get a
//! result, or the result is garbage — compacts here, and the job's ids are *doomed*: deleted
//! by file GC once the job's deadline and a grace as long as its timeout passed (a worker
//! stores nothing after the deadline, and a store begun before it has the grace to finish),
//! unless a file list names one.
//!
//! **Intents.** Before a job is sent, `dir/compaction-jobs/<first id>.job` durably lists its
//! ids and deadline; it is removed *before* the result is proposed (after that, the ids belong
//! to the Raft log's outcome: applied, or handed to file GC as unused) or once the doomed ids
//! were deleted. An intent found at open is therefore a job whose result was never proposed:
//! its ids are doomed, and file GC removes whatever a worker stored, so a server that dies
//! mid-job leaves only orphans that GC removes. Layout of an intent (format version 1):
//!
//! ```text
//! magic "SCJI"  format_version:u16le (= 1)  reserved:u16le (= 0)  deadline_ms:u64le
//! count:u32le  id:u64le × count  crc32:u32le
//! ```
//!
//! `crc32` covers everything before it. Written with [`write_atomically`], so never torn; an
//! intent that does not decode is reported and left in place (a leak, never a loss).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use changeset::{CfInputs, CompactionJob, CompactionResult, InputFile, OutputOptions, TableCreate};
use memtable::ColumnFamily;
use sst::{BuilderOptions, Compression, FormatVersion, L0Table, Table};
use types::FileId;

use crate::compaction::{self, Plan};
use crate::dfs::Dfs;
use crate::durable_file::write_atomically;
use crate::engine::Inner;
use crate::error::{Error, Result};
use crate::options::EngineOptions;
use crate::shard_data::{OpenTables, TableSource};

/// Where an engine's compactions may run elsewhere. The server implements it over its
/// workers; the engine calls it from its compaction thread (blocking calls are fine).
pub trait CompactionOffload: Send + Sync {
    /// Whether the compaction of `input_bytes` planned for `shard_id` should run elsewhere.
    /// The implementor counts why (its decision metric).
    fn wants(&self, shard_id: u64, input_bytes: u64) -> bool;
    /// How long a job may take: its deadline is now plus this.
    fn timeout(&self) -> Duration;
    /// Runs `job` elsewhere: the worker's result, or why there is none. The engine verifies
    /// a result before using it. A retry must send the job `retry` returns (the same job with
    /// fresh output ids, so a slow first attempt can never overwrite the outputs of a second;
    /// `None`: no retry possible).
    fn run(
        &self,
        job: &CompactionJob,
        retry: &mut dyn FnMut() -> Option<CompactionJob>,
    ) -> std::result::Result<CompactionResult, String>;
    /// How the offloaded compaction ended, once the engine knows (the implementor counts it).
    fn finished(&self, shard_id: u64, outcome: OffloadOutcome<'_>);
}

/// How an offloaded compaction ended ([`CompactionOffload::finished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadOutcome<'a> {
    /// A worker's outputs passed [`verify`] and are proposed; `attempts` jobs were sent.
    Used { attempts: usize },
    /// No worker's result came back: the engine compacts here.
    Failed { reason: &'a str },
    /// A result came back but failed [`verify`] (or its intent could not be removed): the
    /// engine compacts here.
    Rejected { reason: &'a str },
}

/// The job of `plan` for shard `shard_id` at version `shard_ver`, without output ids.
pub(crate) fn job_of(
    plan: &Plan,
    opts: &EngineOptions,
    safe_point: u64,
    shard_id: u64,
    shard_ver: u64,
) -> CompactionJob {
    let cfs = ColumnFamily::ALL
        .iter()
        .filter(|cf| !plan.inputs[cf.index()].is_empty())
        .map(|cf| CfInputs {
            cf: cf.as_u32(),
            bottommost: plan.bottommost[cf.index()],
            inputs: plan.inputs[cf.index()]
                .iter()
                .map(|t| InputFile {
                    id: t.file_id(),
                    l0: plan.level == 0 && plan.top.contains(&t.file_id()),
                    smallest: Bytes::copy_from_slice(&t.properties().smallest),
                    biggest: Bytes::copy_from_slice(&t.properties().biggest),
                })
                .collect(),
        })
        .collect();
    let (compression, zstd_level) = match opts.level_compression {
        Compression::None => (0, 0),
        Compression::Zstd(level) => (1, level),
    };
    CompactionJob {
        shard_id,
        shard_ver,
        start: plan.start.clone(),
        end: plan.end.clone(),
        level: plan.level,
        safe_point,
        cfs,
        options: Some(OutputOptions {
            block_size: u32::try_from(opts.block_size)
                .unwrap_or(changeset::compaction_job::MAX_BLOCK_SIZE),
            compression,
            zstd_level,
            filter_bits_per_key: FILTER_BITS_PER_KEY,
            target_file_size: opts.target_file_size,
            table_format_version: u32::from(opts.table_format_version.as_u16()),
        }),
        output_ids: Vec::new(),
        deadline_ms: 0,
    }
}

// A job's table format bound (changeset does not depend on sst) is the newest sst writes.
const _: () = assert!(
    changeset::compaction_job::MAX_TABLE_FORMAT_VERSION == FormatVersion::NEWEST.as_u16() as u32,
    "a job's table format bound must be the newest version sst writes"
);

/// Bits of filter per key of compaction outputs.
pub(crate) const FILTER_BITS_PER_KEY: u32 = 10;

/// The sum of the input sizes of `plan` (what the offload decision weighs).
pub(crate) fn input_bytes(plan: &Plan) -> u64 {
    plan.inputs.iter().flatten().map(|t| t.size()).sum()
}

/// How many output ids a job over `input_bytes` gets: room for outputs twice the inputs'
/// size (a merge writes at most what it reads, plus each table's index and filter, and
/// outputs are cut near the target size) and one extra table per column family.
pub(crate) fn output_id_budget(job: &CompactionJob, input_bytes: u64) -> usize {
    let target = job
        .options
        .as_ref()
        .map_or(1, |o| o.target_file_size.max(1));
    let by_size = (input_bytes.saturating_mul(2) / target) as usize;
    (by_size + 2 * job.cfs.len() + 2).min(MAX_OUTPUT_IDS)
}

/// The most ids one job gets (a 64 GiB compaction at the default 8 MiB target).
const MAX_OUTPUT_IDS: usize = 16_384;

fn builder_options(job: &CompactionJob) -> Result<(BuilderOptions, u64)> {
    let o = job.options.as_ref().ok_or_else(|| Error::CompactionJob {
        shard_id: job.shard_id,
        detail: "no output options".into(),
    })?;
    let compression = match o.compression {
        0 => Compression::None,
        1 => Compression::Zstd(o.zstd_level),
        other => {
            return Err(Error::CompactionJob {
                shard_id: job.shard_id,
                detail: format!("unknown compression kind {other}"),
            });
        }
    };
    // 0: a server from before the field, which only knew version 1.
    let format_version = match o.table_format_version {
        0 => Some(FormatVersion::V1),
        v => u16::try_from(v).ok().and_then(FormatVersion::from_u16),
    }
    .ok_or_else(|| Error::CompactionJob {
        shard_id: job.shard_id,
        detail: format!(
            "unknown table format version {}: expected at most {}",
            o.table_format_version,
            FormatVersion::NEWEST.as_u16()
        ),
    })?;
    Ok((
        BuilderOptions {
            block_size: o.block_size as usize,
            compression,
            filter_bits_per_key: o.filter_bits_per_key,
            format_version,
        },
        o.target_file_size,
    ))
}

/// The inputs of one column family of a job, opened.
pub(crate) struct OpenedCf {
    pub(crate) cf: ColumnFamily,
    pub(crate) bottommost: bool,
    pub(crate) tables: Vec<Table>,
}

/// Runs `job` over `inputs`: merges each column family (`compaction::merge`), stores each
/// output under the next id of `next_id` as soon as it is built, and appends its
/// `TableCreate` to `created` (so a caller whose job failed midway knows what was stored).
/// With a `deadline`, no output is stored after it.
pub(crate) fn merge_job(
    dfs: &dyn Dfs,
    job: &CompactionJob,
    inputs: &[OpenedCf],
    next_id: &mut dyn FnMut() -> Result<FileId>,
    deadline: Option<SystemTime>,
    created: &mut Vec<TableCreate>,
) -> Result<()> {
    let (opts, target_file_size) = builder_options(job)?;
    let out_level = job.output_level();
    let started = Instant::now();
    for c in inputs {
        compaction::merge(
            &c.tables,
            (&job.start, &job.end),
            c.cf,
            job.safe_point,
            c.bottommost,
            &opts,
            target_file_size,
            |b| {
                if let Some(deadline) = deadline
                    && SystemTime::now() >= deadline
                {
                    return Err(Error::Timeout {
                        op: "compaction job",
                        shard_id: job.shard_id,
                        waited_ms: started.elapsed().as_millis() as u64,
                    });
                }
                let id = next_id()?;
                let size = b.data.len() as u64;
                let (smallest, biggest) =
                    (b.properties.smallest.clone(), b.properties.biggest.clone());
                dfs.put(id, Bytes::from(b.data))?;
                created.push(TableCreate {
                    id: id.get(),
                    level: out_level,
                    cf: c.cf.as_u32(),
                    smallest: Bytes::from(smallest),
                    biggest: Bytes::from(biggest),
                    size,
                });
                Ok(())
            },
        )?;
    }
    Ok(())
}

/// Opens the inputs a job names from `source` (an L0 file once, whatever number of its
/// sections the job reads).
fn open_inputs(source: &TableSource<'_>, job: &CompactionJob) -> Result<Vec<OpenedCf>> {
    let mut l0s: Vec<L0Table> = Vec::new();
    let mut opened = Vec::with_capacity(job.cfs.len());
    for c in &job.cfs {
        let cf = ColumnFamily::from_u32(c.cf).ok_or_else(|| Error::CompactionJob {
            shard_id: job.shard_id,
            detail: format!("unknown column family {}", c.cf),
        })?;
        let mut tables = Vec::with_capacity(c.inputs.len());
        for input in &c.inputs {
            if !input.l0 {
                tables.push(source.open_table(input.id)?);
                continue;
            }
            if !l0s.iter().any(|f| f.file_id() == input.id) {
                l0s.push(source.open_l0(input.id)?);
            }
            let section = l0s
                .iter()
                .find(|f| f.file_id() == input.id)
                .and_then(|f| f.cf(cf))
                .ok_or_else(|| Error::CompactionJob {
                    shard_id: job.shard_id,
                    detail: format!("L0 file {:#x} has no {} section", input.id, cf.as_str()),
                })?;
            tables.push(section.clone());
        }
        opened.push(OpenedCf {
            cf,
            bottommost: c.bottommost,
            tables,
        });
    }
    Ok(opened)
}

/// A worker's side of `POST /compact`: opens the inputs `job` names from `dfs`, merges them,
/// and stores the outputs under the job's ids, in order (more outputs than ids fails the job;
/// none is stored past its deadline). The job must have passed [`CompactionJob::check`].
pub fn run_compaction_job(
    dfs: &dyn Dfs,
    block_cache: Option<&Arc<dyn sst::BlockCache>>,
    job: &CompactionJob,
) -> Result<CompactionResult> {
    let started = Instant::now();
    let source = TableSource { dfs, block_cache };
    let inputs = open_inputs(&source, job)?;
    let input_bytes = inputs
        .iter()
        .flat_map(|c| &c.tables)
        .map(|t| t.size())
        .sum();
    let mut ids = job.output_ids.iter();
    let given = job.output_ids.len();
    let mut next_id = || {
        ids.next()
            .map(|id| FileId(*id))
            .ok_or_else(|| Error::CompactionJob {
                shard_id: job.shard_id,
                detail: format!("the outputs need more than the {given} ids the job gave"),
            })
    };
    let deadline =
        (job.deadline_ms > 0).then(|| UNIX_EPOCH + Duration::from_millis(job.deadline_ms));
    let mut outputs = Vec::new();
    merge_job(dfs, job, &inputs, &mut next_id, deadline, &mut outputs)?;
    Ok(CompactionResult {
        outputs,
        input_bytes,
        merge_ms: started.elapsed().as_millis() as u64,
    })
}

/// Checks a worker's `result` for `job` against the object store, opening every output; the
/// opened outputs, or what is wrong.
pub(crate) fn verify(
    source: &TableSource<'_>,
    job: &CompactionJob,
    result: &CompactionResult,
) -> std::result::Result<OpenTables, String> {
    let mut opened = OpenTables::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut last: Option<(u32, Bytes)> = None;
    // The worker takes the job's ids in order: its outputs name a prefix of them, in order.
    let used: Vec<u64> = result.outputs.iter().map(|t| t.id).collect();
    if !job.output_ids.starts_with(&used) {
        return Err(format!(
            "the outputs do not take the job's ids in order: used {used:x?}"
        ));
    }
    // A column family whose tombstones must stay keeps at least one version of some key: no
    // output for it means the worker left it out.
    if let Some(c) = job.cfs.iter().find(|c| {
        !c.bottommost && !c.inputs.is_empty() && !result.outputs.iter().any(|t| t.cf == c.cf)
    }) {
        return Err(format!(
            "no output for column family {}, whose inputs always keep a version",
            c.cf
        ));
    }
    // Where no key can vanish, the outputs span exactly the inputs' keys when the inputs lie
    // inside the range: a missing first or last output shows. No key vanishes from a column
    // family that keeps its tombstones (not the bottommost), except, in WRITE, a key whose
    // records at or below the safe point are all Lock/Rollback (`compaction::gc_versions`).
    let write = ColumnFamily::Write.as_u32();
    for c in job
        .cfs
        .iter()
        .filter(|c| !c.bottommost && !c.inputs.is_empty() && (c.cf != write || job.safe_point == 0))
    {
        let lo = c.inputs.iter().map(|i| &i.smallest).min();
        let hi = c.inputs.iter().map(|i| &i.biggest).max();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            continue;
        };
        let inside = *lo >= job.start && (job.end.is_empty() || *hi < job.end);
        let mine: Vec<&TableCreate> = result.outputs.iter().filter(|t| t.cf == c.cf).collect();
        if let (true, Some(first), Some(last)) = (inside, mine.first(), mine.last())
            && (first.smallest != *lo || last.biggest != *hi)
        {
            return Err(format!(
                "the outputs of column family {} span {:?}..{:?}, the inputs {lo:?}..{hi:?}",
                c.cf, first.smallest, last.biggest
            ));
        }
    }
    for t in &result.outputs {
        if !job.output_ids.contains(&t.id) {
            return Err(format!("output {:#x} is not an id the job gave", t.id));
        }
        if !seen.insert(t.id) {
            return Err(format!("output {:#x} is listed twice", t.id));
        }
        if t.level != job.output_level() {
            return Err(format!(
                "output {:#x} is at level {}, expected {}",
                t.id,
                t.level,
                job.output_level()
            ));
        }
        if !job.cfs.iter().any(|c| c.cf == t.cf) {
            return Err(format!(
                "output {:#x} holds column family {}, which the job did not merge",
                t.id, t.cf
            ));
        }
        if t.smallest > t.biggest
            || t.smallest < job.start
            || (!job.end.is_empty() && t.biggest >= job.end)
        {
            return Err(format!(
                "output {:#x}'s keys lie outside the job's range",
                t.id
            ));
        }
        if let Some((cf, biggest)) = &last
            && *cf == t.cf
            && t.smallest <= *biggest
        {
            return Err(format!("output {:#x} overlaps the output before it", t.id));
        }
        last = Some((t.cf, t.biggest.clone()));
        let table = source
            .open_table(t.id)
            .map_err(|e| format!("output {:#x} does not open: {e}", t.id))?;
        let p = table.properties();
        if table.size() != t.size
            || p.smallest.as_slice() != t.smallest.as_ref()
            || p.biggest.as_slice() != t.biggest.as_ref()
        {
            return Err(format!(
                "output {:#x} is not what the worker described: size {} (said {}), keys {:?}..{:?}",
                t.id,
                table.size(),
                t.size,
                Bytes::copy_from_slice(&p.smallest),
                Bytes::copy_from_slice(&p.biggest)
            ));
        }
        opened.add_table(table);
    }
    Ok(opened)
}

// -- intents ---------------------------------------------------------------------------------

/// The directory of intent files in an engine's directory.
pub const INTENT_DIR: &str = "compaction-jobs";
const INTENT_MAGIC: [u8; 4] = *b"SCJI";
const INTENT_VERSION: u16 = 1;

/// A job's ids and deadline, as its intent file holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    pub deadline_ms: u64,
    pub ids: Vec<u64>,
}

impl Intent {
    /// The file of the job whose first id is `ids[0]`.
    pub(crate) fn path(dir: &Path, first_id: u64) -> PathBuf {
        dir.join(INTENT_DIR).join(format!("{first_id:016x}.job"))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + 8 * self.ids.len());
        out.extend_from_slice(&INTENT_MAGIC);
        out.extend_from_slice(&INTENT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.deadline_ms.to_le_bytes());
        out.extend_from_slice(&(self.ids.len() as u32).to_le_bytes());
        for id in &self.ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(data: &[u8]) -> std::result::Result<Intent, String> {
        if data.len() < 24 {
            return Err(format!(
                "too short: expected at least 24 bytes, found {}",
                data.len()
            ));
        }
        let (body, crc) = data.split_at(data.len() - 4);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(format!(
                "checksum mismatch stored={stored:#010x} computed={computed:#010x}"
            ));
        }
        if body[0..4] != INTENT_MAGIC {
            return Err(format!("bad magic {:?}", &body[0..4]));
        }
        let version = u16::from_le_bytes([body[4], body[5]]);
        if version != INTENT_VERSION {
            return Err(format!(
                "unknown format version: expected {INTENT_VERSION}, found {version}"
            ));
        }
        let mut deadline = [0u8; 8];
        deadline.copy_from_slice(&body[8..16]);
        let mut count = [0u8; 4];
        count.copy_from_slice(&body[16..20]);
        let count = u32::from_le_bytes(count) as usize;
        let ids_bytes = &body[20..];
        if ids_bytes.len() != count.saturating_mul(8) {
            return Err(format!(
                "wrong length: {count} ids need {} bytes, found {}",
                count.saturating_mul(8),
                ids_bytes.len()
            ));
        }
        let ids = ids_bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        Ok(Intent {
            deadline_ms: u64::from_le_bytes(deadline),
            ids,
        })
    }
}

/// A failed job's ids, deleted by file GC from `not_before` on (module docs), with the intent
/// file to remove once they are.
#[derive(Debug)]
pub(crate) struct DoomedJob {
    pub(crate) ids: Vec<u64>,
    pub(crate) not_before: SystemTime,
    pub(crate) intent: Option<PathBuf>,
}

/// Reads the intents left in `dir` (a previous run's jobs whose results were never proposed)
/// as doomed jobs. An intent that does not decode is reported and left in place.
pub(crate) fn recover_intents(dir: &Path) -> Vec<DoomedJob> {
    let intents = dir.join(INTENT_DIR);
    let Ok(entries) = std::fs::read_dir(&intents) else {
        return Vec::new();
    };
    let mut doomed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("job") {
            continue;
        }
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|data| Intent::decode(&data))
        {
            Ok(intent) => {
                tracing::info!(path = %path.display(), ids = intent.ids.len(), "a compaction job of the previous run was never proposed: its outputs will be deleted");
                doomed.push(DoomedJob {
                    not_before: UNIX_EPOCH + Duration::from_millis(intent.deadline_ms),
                    ids: intent.ids,
                    intent: Some(path),
                });
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable compaction job intent left in place (its outputs, if any, leak)");
            }
        }
    }
    doomed
}

/// One attempt's job: fresh output ids (recorded in an intent file before it is sent) over
/// the same inputs and deadline.
struct Attempt {
    job: CompactionJob,
    intent: PathBuf,
}

fn new_attempt(
    inner: &Inner,
    base: &CompactionJob,
    n_ids: usize,
    not_before_ms: u64,
) -> Result<Attempt> {
    let mut job = base.clone();
    job.output_ids = Vec::with_capacity(n_ids);
    for _ in 0..n_ids.max(1) {
        job.output_ids.push(inner.ids.next()?.get());
    }
    let intent = Intent {
        deadline_ms: not_before_ms,
        ids: job.output_ids.clone(),
    };
    let path = Intent::path(&inner.opts.dir, job.output_ids[0]);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("create dir", parent))?;
    }
    write_atomically(&path, &intent.encode())?;
    Ok(Attempt { job, intent: path })
}

/// Tries `job` on the installed offload (module docs): the verified outputs and their
/// `TableCreate`s, or `None` to compact here. Every attempt gets its own output ids (a retry
/// never reuses the ids of an attempt that may still be storing); the ids of every attempt
/// whose outputs are not used are doomed.
pub(crate) fn try_offload(
    inner: &Inner,
    offload: &dyn CompactionOffload,
    mut job: CompactionJob,
    input_bytes: u64,
) -> Result<Option<(Vec<TableCreate>, OpenTables)>> {
    let n_ids = output_id_budget(&job, input_bytes);
    let timeout = offload.timeout();
    let deadline = SystemTime::now() + timeout;
    let not_before = deadline + timeout;
    let ms = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    job.deadline_ms = ms(deadline);
    let first = match new_attempt(inner, &job, n_ids, ms(not_before)) {
        Ok(first) => first,
        Err(e) => {
            let reason = format!("cannot prepare the job: {e}");
            tracing::warn!(shard_id = job.shard_id, %reason, "compacting here");
            offload.finished(job.shard_id, OffloadOutcome::Failed { reason: &reason });
            return Ok(None);
        }
    };
    let first_job = first.job.clone();
    let mut attempts = vec![first];
    let outcome = {
        let mut retry = || match new_attempt(inner, &job, n_ids, ms(not_before)) {
            Ok(a) => {
                let next = a.job.clone();
                attempts.push(a);
                Some(next)
            }
            Err(e) => {
                tracing::warn!(shard_id = job.shard_id, error = %e, "cannot prepare a compaction retry");
                None
            }
        };
        offload.run(&first_job, &mut retry)
    };
    let doom_all_but = |winner: Option<usize>, reason: &str| {
        if winner.is_none() {
            tracing::info!(
                shard_id = job.shard_id,
                reason,
                "remote compaction failed: compacting here"
            );
        }
        for (i, a) in attempts.iter().enumerate() {
            if Some(i) == winner {
                continue;
            }
            crate::file_gc::doom(
                inner,
                DoomedJob {
                    ids: a.job.output_ids.clone(),
                    not_before,
                    intent: Some(a.intent.clone()),
                },
            );
        }
    };
    let result = match outcome {
        Ok(result) => result,
        Err(reason) => {
            offload.finished(job.shard_id, OffloadOutcome::Failed { reason: &reason });
            doom_all_but(None, &reason);
            return Ok(None);
        }
    };
    // The attempt whose ids the outputs use (an empty result: the last one answered).
    let winner = match result.outputs.first() {
        Some(t) => attempts
            .iter()
            .position(|a| a.job.output_ids.contains(&t.id)),
        None => Some(attempts.len() - 1),
    };
    let checked = match winner {
        Some(w) => verify(&inner.table_source(), &attempts[w].job, &result).map(|o| (w, o)),
        None => Err("the outputs use ids no attempt was given".to_string()),
    };
    // The intent must be gone, durably, before the result is proposed: an intent found at the
    // next open dooms its ids, which a committed entry would then name (module docs).
    let checked = checked.and_then(|(w, opened)| {
        remove_intent(&attempts[w].intent)
            .map(|()| (w, opened))
            .map_err(|e| format!("cannot remove the job's intent, so its result is not used: {e}"))
    });
    match checked {
        Ok((w, opened)) => {
            doom_all_but(Some(w), "");
            offload.finished(
                job.shard_id,
                OffloadOutcome::Used {
                    attempts: attempts.len(),
                },
            );
            Ok(Some((result.outputs, opened)))
        }
        Err(reason) => {
            offload.finished(job.shard_id, OffloadOutcome::Rejected { reason: &reason });
            doom_all_but(None, &reason);
            Ok(None)
        }
    }
}

/// Removes an intent file durably (the directory synced): `Err` when that cannot be known.
pub(crate) fn remove_intent(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => match path.parent() {
            Some(dir) => crate::durable_file::sync_dir(dir),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn intents_round_trip_and_any_flipped_byte_is_caught(
            deadline_ms in any::<u64>(),
            ids in proptest::collection::vec(any::<u64>(), 1..40),
            flip in any::<prop::sample::Index>(),
        ) {
            let intent = Intent { deadline_ms, ids };
            let bytes = intent.encode();
            prop_assert_eq!(Intent::decode(&bytes).unwrap(), intent);
            let mut bad = bytes.clone();
            let i = flip.index(bad.len());
            bad[i] ^= 0x40;
            prop_assert!(Intent::decode(&bad).is_err());
            prop_assert!(Intent::decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }

    #[test]
    fn the_id_budget_grows_with_the_inputs_and_is_bounded() {
        let job = CompactionJob {
            cfs: vec![CfInputs::default(), CfInputs::default()],
            options: Some(OutputOptions {
                target_file_size: 1 << 20,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(output_id_budget(&job, 0), 6);
        assert_eq!(output_id_budget(&job, 10 << 20), 26);
        assert_eq!(output_id_budget(&job, u64::MAX), MAX_OUTPUT_IDS);
    }
}
