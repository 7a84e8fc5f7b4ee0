//! Writes realistic seed inputs for the `wal_record` and `manifest` fuzz targets:
//! `fuzz/corpus/wal_record/*.wal` (segment files written by a real [`Wal`]) and
//! `fuzz/corpus/manifest/*.manifest` (MANIFEST files written by a real [`Manifest`]), plus the
//! damaged variants a crash or bit rot leaves (torn tail, zero fill, flipped byte).
//!
//! Run with `cargo run -p kvengine --example wal_manifest_fuzz_seeds`. Existing files of the
//! same name are overwritten; other corpus files are left alone. The output is deterministic.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use changeset::{
    Change, ChangeSet, ColumnFamily, Compaction, Flush, L0Create, ShardFiles, ShardSplitInfo,
    Split, TableCreate,
};
use kvengine::WriteBatch;
use kvengine::manifest::{MANIFEST_FILE_NAME, Manifest, ManifestOptions};
use kvengine::wal::{SyncPolicy, Wal, WalOptions};

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn segments(dir: &Path) -> AnyResult<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "wal") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A WAL in `dir` with 1 MiB segments that never fsyncs.
fn open_wal(dir: &Path) -> AnyResult<Wal> {
    let opts = WalOptions {
        dir: dir.to_path_buf(),
        segment_size: 1 << 20,
        sync: SyncPolicy::Off,
    };
    Ok(Wal::open(opts, |_| Ok(()))?)
}

fn wal_seeds() -> AnyResult<Vec<(&'static str, Vec<u8>)>> {
    let dir = tempfile::tempdir()?;
    let wal = open_wal(dir.path())?;
    // Payloads shaped like encoded write batches: a few puts with keys and values.
    for sequence in 1..=4u64 {
        for shard in [1u64, 2] {
            let payload: Vec<u8> = format!("put t_{shard}_row{sequence:03} value-{sequence}")
                .into_bytes()
                .repeat(sequence as usize);
            wal.append(shard, sequence, &payload)?;
        }
    }
    wal.append(3, 1, b"")?;
    wal.roll()?;
    wal.append(1, 5, b"put t_1_row005 after roll")?;
    wal.append(2, 5, &[0xff; 64])?;
    drop(wal);

    let files = segments(dir.path())?;
    let first = fs::read(&files[0])?;
    let second = fs::read(&files[1])?;
    let mut seeds = vec![
        ("two_shards.wal", first.clone()),
        ("after_roll.wal", second.clone()),
        ("header_only.wal", first[..16].to_vec()),
    ];
    // A crash in the middle of the last record's write.
    seeds.push(("torn_last_record.wal", second[..second.len() - 30].to_vec()));
    // Preallocated zeros after the last record.
    let mut zero_tail = second.clone();
    zero_tail.extend_from_slice(&[0; 256]);
    seeds.push(("zero_tail.wal", zero_tail));
    // Bit rot in the second record, with valid records after it.
    let mut corrupt = first.clone();
    corrupt[16 + 60] ^= 0x04;
    seeds.push(("corrupt_middle_record.wal", corrupt));
    seeds.push(("write_batches.wal", write_batch_segment()?));
    Ok(seeds)
}

/// A segment whose records are real write batches (what the engine appends): puts and deletes
/// of the WRITE CF with WRITE metas, a lock and its removal, and an empty batch.
fn write_batch_segment() -> AnyResult<Vec<u8>> {
    let dir = tempfile::tempdir()?;
    let wal = open_wal(dir.path())?;
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, b"t_1_r0001", 11, &[1; 17], b"row one");
    b.put(ColumnFamily::Write, b"t_1_r0002", 11, &[1; 17], b"row two");
    b.delete(ColumnFamily::Write, b"t_1_r0003", 11, &[2; 17]);
    wal.append(1, 1, b.as_bytes())?;
    let mut locks = WriteBatch::new();
    locks.put_lock(b"t_1_r0004", b"lock record");
    locks.delete_lock(b"t_1_r0005");
    wal.append(1, 2, locks.as_bytes())?;
    wal.append(1, 3, WriteBatch::new().as_bytes())?;
    drop(wal);
    let files = segments(dir.path())?;
    Ok(fs::read(&files[0])?)
}

fn key(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn changeset(shard: &ShardFiles, change: Change) -> ChangeSet {
    ChangeSet {
        shard_id: shard.id(),
        shard_ver: shard.ver(),
        sequence: shard.meta_seq() + 1,
        properties: BTreeMap::new(),
        change: Some(change),
    }
}

fn flush(m: &Manifest, shard_id: u64, id: u64, lo: &str, hi: &str) -> AnyResult<()> {
    let shard = m.shard(shard_id).ok_or("no shard")?;
    let data_sequence = shard.data_sequence() + 100;
    let cs = changeset(
        &shard,
        Change::Flush(Flush {
            l0_create: Some(L0Create {
                id,
                smallest: key(lo),
                biggest: key(hi),
                size: 4 << 20,
            }),
            data_sequence,
            version: shard.base_version() + data_sequence,
        }),
    );
    m.record(&cs)?;
    Ok(())
}

fn compact(
    m: &Manifest,
    shard_id: u64,
    inputs: &[u64],
    output: u64,
    lo: &str,
    hi: &str,
) -> AnyResult<()> {
    let shard = m.shard(shard_id).ok_or("no shard")?;
    let cs = changeset(
        &shard,
        Change::Compaction(Compaction {
            cf: 0,
            level: 0,
            top_deletes: inputs.to_vec(),
            bottom_deletes: vec![],
            table_creates: vec![TableCreate {
                id: output,
                level: 1,
                cf: ColumnFamily::Write.as_u32(),
                smallest: key(lo),
                biggest: key(hi),
                size: 8 << 20,
            }],
            conflicted: false,
            safe_point: 0,
        }),
    );
    m.record(&cs)?;
    Ok(())
}

fn manifest_seeds() -> AnyResult<Vec<(&'static str, Vec<u8>)>> {
    let dir = tempfile::tempdir()?;
    let opts = ManifestOptions {
        dir: dir.path().to_path_buf(),
        rewrite_after: 1_000_000,
    };
    let path = dir.path().join(MANIFEST_FILE_NAME);
    let m = Manifest::open(opts)?;
    let empty = fs::read(&path)?;
    m.create_shard(&ShardFiles::new(1, 1, key("t_1_"), key("t_2_"), 0))?;
    m.create_shard(&ShardFiles::new(2, 1, key("t_2_"), Bytes::new(), 0))?;
    flush(&m, 1, 101, "t_1_a", "t_1_m")?;
    flush(&m, 1, 102, "t_1_c", "t_1_z")?;
    flush(&m, 2, 201, "t_2_a", "t_9_z")?;
    compact(&m, 1, &[101, 102], 103, "t_1_a", "t_1_z")?;
    // Inputs gone: recorded conflicted.
    compact(&m, 1, &[101], 104, "t_1_a", "t_1_b")?;
    let shard = m.shard(2).ok_or("no shard")?;
    let base_version = shard.base_version() + shard.data_sequence() + 1;
    let split = changeset(
        &shard,
        Change::Split(Split {
            new_shards: vec![
                ShardSplitInfo {
                    id: 2,
                    start: key("t_2_"),
                    end: key("t_5_"),
                    base_version,
                    data_sequence: 0,
                },
                ShardSplitInfo {
                    id: 3,
                    start: key("t_5_"),
                    end: Bytes::new(),
                    base_version,
                    data_sequence: 0,
                },
            ],
        }),
    );
    m.record(&split)?;
    flush(&m, 3, 301, "t_5_a", "t_6_b")?;
    let log = fs::read(&path)?;
    m.rewrite()?;
    let rewritten = fs::read(&path)?;
    drop(m);

    let mut torn = log.clone();
    torn.truncate(log.len() - 7);
    let mut corrupt = log.clone();
    corrupt[empty.len() + 20] ^= 0x10;
    Ok(vec![
        ("empty.manifest", empty),
        ("log.manifest", log),
        ("rewritten.manifest", rewritten),
        ("torn_last_record.manifest", torn),
        ("corrupt_first_record.manifest", corrupt),
    ])
}

fn write_all(corpus: &Path, name: &str, seeds: &[(&str, Vec<u8>)]) -> AnyResult<()> {
    let dir = corpus.join(name);
    fs::create_dir_all(&dir)?;
    for (file, bytes) in seeds {
        fs::write(dir.join(file), bytes)?;
    }
    println!("wrote {} seeds to {}", seeds.len(), dir.display());
    Ok(())
}

fn main() -> AnyResult<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    write_all(&corpus, "wal_record", &wal_seeds()?)?;
    write_all(&corpus, "manifest", &manifest_seeds()?)?;
    Ok(())
}
