//! The main job until the cluster exists: build a table into a local directory, reopen it
//! through a memory map, and check every read against the data that went in.
//!
//! `cargo run --release -p sst --example sst_demo [-- --rows N --dir PATH]`

use std::collections::BTreeMap;
use std::time::Instant;

use sst::{BuilderOptions, Compression, Table, TableBuilder};

/// Versions of one key, newest first: (commit ts, value or None for a delete).
type Versions = Vec<(u64, Option<Vec<u8>>)>;

fn main() {
    if let Err(e) = run() {
        eprintln!("demo failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut rows = 200_000u64;
    let mut dir = std::env::temp_dir().join("stratus-demo");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rows" => {
                let v = args.next().unwrap_or_default();
                rows = v
                    .parse()
                    .map_err(|_| format!("--rows expects a positive integer, found={v:?}"))?;
            }
            "--dir" => dir = args.next().ok_or("--dir expects a path")?.into(),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: demo [--rows N] [--dir PATH]"
                )
                .into());
            }
        }
    }
    std::fs::create_dir_all(&dir)?;

    // Three versions per row: commit timestamps 10, 20, 30; every 10th row deleted at 30.
    let mut model: BTreeMap<Vec<u8>, Versions> = BTreeMap::new();
    for i in 0..rows {
        let key = format!("t1_r{i:012}").into_bytes();
        let versions = (1..=3u64)
            .rev()
            .map(|v| {
                let deleted = v == 3 && i % 10 == 0;
                (
                    v * 10,
                    (!deleted).then(|| format!("row {i} version {v}").into_bytes()),
                )
            })
            .collect();
        model.insert(key, versions);
    }

    for (label, compression) in [
        ("none", Compression::None),
        ("zstd(3)", Compression::Zstd(3)),
    ] {
        let t0 = Instant::now();
        let mut b = TableBuilder::new(BuilderOptions {
            compression,
            ..Default::default()
        })?;
        for (k, versions) in &model {
            for (ts, value) in versions {
                b.add(
                    k,
                    *ts,
                    b"",
                    value.as_deref().unwrap_or_default(),
                    value.is_none(),
                )?;
            }
        }
        let built = b.finish();
        let path = dir.join(format!("demo-{label}.sst"));
        write_durably(&path, &built.data)?;
        let build_ms = t0.elapsed().as_millis();

        let table = Table::open_file(1, &path)?;
        let p = table.properties();
        println!(
            "compression {label:8} file {:>7.1} MiB  {} keys, {} old versions, {} tombstones, {} data blocks; built in {build_ms} ms",
            table.size() as f64 / 1048576.0,
            p.entries,
            p.old_entries,
            p.tombstones,
            p.block_count
        );

        // Scan at each timestamp and compare with the model.
        for ts in [5, 15, 25, 35] {
            let t0 = Instant::now();
            let mut it = table.iter(ts);
            it.seek_to_first()?;
            let mut live = 0u64;
            let mut expected = model.iter().filter_map(|(k, vs)| {
                vs.iter()
                    .find(|(v, _)| *v <= ts)
                    .and_then(|(_, val)| val.as_ref().map(|val| (k, val)))
            });
            while it.valid() {
                if !it.is_tombstone() {
                    let (k, v) = expected
                        .next()
                        .ok_or("scan returned a row the model does not have")?;
                    if it.key() != k.as_slice() || it.value() != v.as_slice() {
                        return Err(format!(
                            "scan at ts={ts} disagrees at key {:?}",
                            String::from_utf8_lossy(it.key())
                        )
                        .into());
                    }
                    live += 1;
                }
                it.next()?;
            }
            if expected.next().is_some() {
                return Err(format!("scan at ts={ts} missed rows").into());
            }
            println!(
                "  scan at ts={ts:2}: {live:>7} live rows in {:>4} ms  ok",
                t0.elapsed().as_millis()
            );
        }
        let range = [(b"t1_r000000001000".to_vec(), b"t1_r000000002000".to_vec())];
        println!(
            "  estimate_blocks_size of 1000 rows: {} bytes (of {} in the table)",
            table.estimate_blocks_size(&range),
            table.size()
        );
    }
    println!("demo ok: tables under {}", dir.display());
    Ok(())
}

/// Write to a temp name, fsync, rename, fsync the directory.
fn write_durably(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}
