//! Writes seed inputs for the `lock_record` and `write_meta` fuzz targets:
//! `fuzz/corpus/lock_record/*.lock` (LOCK-CF values of every lock type and shape) and
//! `fuzz/corpus/write_meta/*.meta` (WRITE-CF user meta of every kind), plus the damaged variants
//! a truncated transfer or bit rot leaves (truncations, unknown version, type or flags,
//! trailing bytes).
//!
//! Run with `cargo run -p kvengine --example mvcc_record_fuzz_seeds`. Existing files of the same
//! name are overwritten; other corpus files are left alone. The output is deterministic.

use std::fs;
use std::path::Path;

use kvengine::mvcc::{Lock, LockType, WriteKind, WriteMeta};

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The valid locks the replay test pins as format-version-1 fixtures, by file name.
fn locks() -> Vec<(&'static str, Lock)> {
    let base = Lock {
        lock_type: LockType::Put,
        primary: b"t_1_r0001".to_vec(),
        start_ts: 400_000 << 18,
        ttl_ms: 3000,
        min_commit_ts: (400_000 << 18) + 1,
        txn_size: 2,
        value: Some(b"row value 1".to_vec()),
        secondaries: None,
    };
    vec![
        ("put_2pc.lock", base.clone()),
        (
            "delete_2pc.lock",
            Lock {
                lock_type: LockType::Delete,
                value: None,
                ..base.clone()
            },
        ),
        (
            "lock_type_lock.lock",
            Lock {
                lock_type: LockType::Lock,
                value: None,
                txn_size: 1,
                ..base.clone()
            },
        ),
        (
            "pessimistic.lock",
            Lock {
                lock_type: LockType::Pessimistic,
                value: None,
                ..base.clone()
            },
        ),
        (
            "async_commit_primary.lock",
            Lock {
                secondaries: Some(vec![b"t_1_r0002".to_vec(), b"t_1_r0003".to_vec()]),
                txn_size: 3,
                ..base.clone()
            },
        ),
        (
            "async_commit_no_secondaries.lock",
            Lock {
                secondaries: Some(Vec::new()),
                value: Some(Vec::new()),
                ..base.clone()
            },
        ),
        (
            "empty_primary.lock",
            Lock {
                primary: Vec::new(),
                value: None,
                start_ts: 0,
                min_commit_ts: 0,
                ttl_ms: 0,
                txn_size: 0,
                ..base
            },
        ),
    ]
}

fn metas() -> Vec<(&'static str, WriteMeta)> {
    let ts = 400_000u64 << 18;
    vec![
        (
            "put.meta",
            WriteMeta {
                kind: WriteKind::Put,
                start_ts: ts,
                commit_ts: ts + 5,
            },
        ),
        (
            "delete.meta",
            WriteMeta {
                kind: WriteKind::Delete,
                start_ts: ts,
                commit_ts: ts + 5,
            },
        ),
        (
            "lock.meta",
            WriteMeta {
                kind: WriteKind::Lock,
                start_ts: ts,
                commit_ts: ts + 5,
            },
        ),
        (
            "rollback.meta",
            WriteMeta {
                kind: WriteKind::Rollback,
                start_ts: ts,
                commit_ts: ts,
            },
        ),
    ]
}

fn lock_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, lock) in locks() {
        let enc = lock.encode();
        let stem = name.trim_end_matches(".lock");
        out.push((
            format!("truncated_half_{stem}.lock"),
            enc[..enc.len() / 2].to_vec(),
        ));
        out.push((
            format!("truncated_last_{stem}.lock"),
            enc[..enc.len() - 1].to_vec(),
        ));
        out.push((name.to_string(), enc));
    }
    let put = locks()[0].1.encode();
    let mut v2 = put.clone();
    v2[0] = 2;
    out.push(("unknown_version.lock".into(), v2));
    let mut bad_type = put.clone();
    bad_type[1] = 9;
    out.push(("unknown_type.lock".into(), bad_type));
    let mut bad_flags = put.clone();
    bad_flags[2] |= 0x80;
    out.push(("unknown_flags.lock".into(), bad_flags));
    let mut trailing = put.clone();
    trailing.push(0);
    out.push(("trailing_byte.lock".into(), trailing));
    // An async-commit lock claiming far more secondaries than its bytes hold.
    let mut huge = locks()[4].1.encode();
    let count_at = huge.len() - 2 * (4 + 9) - 4;
    huge[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    out.push(("huge_secondary_count.lock".into(), huge));
    out
}

fn meta_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, meta) in metas() {
        out.push((name.to_string(), meta.encode().to_vec()));
    }
    let put = metas()[0].1.encode();
    out.push(("truncated.meta".into(), put[..16].to_vec()));
    out.push(("kind_only.meta".into(), put[..1].to_vec()));
    let mut long = put.to_vec();
    long.push(0);
    out.push(("trailing_byte.meta".into(), long));
    let mut bad = put.to_vec();
    bad[0] = 9;
    out.push(("unknown_kind.meta".into(), bad));
    out.push(("empty.meta".into(), Vec::new()));
    // Boundary timestamps: a put at the largest ts, and a rollback whose commit_ts is below
    // its start_ts (the decoder takes any pair; readers order by commit_ts).
    let mut max = put.to_vec();
    max[1..17].fill(0xff);
    out.push(("max_ts.meta".into(), max));
    let mut inverted = metas()[2].1.encode().to_vec();
    inverted[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
    inverted[9..17].copy_from_slice(&1u64.to_le_bytes());
    out.push(("commit_below_start.meta".into(), inverted));
    out
}

fn write_all(corpus: &Path, name: &str, seeds: &[(String, Vec<u8>)]) -> AnyResult<()> {
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
    write_all(&corpus, "lock_record", &lock_seeds())?;
    write_all(&corpus, "write_meta", &meta_seeds())?;
    Ok(())
}
