//! The object store is chosen by configuration: a local directory, or S3 behind a file cache.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/s3_server.rs"]
mod s3_server;

use std::sync::Arc;

use kvengine::{
    CacheConfig, ColumnFamily, DfsConfig, Engine, EngineOptions, FileId, SyncPolicy, WriteBatch,
};
use s3_server::S3Server;

fn roundtrip(dir: &std::path::Path, cfg: &DfsConfig) -> Vec<u64> {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.wal_sync = SyncPolicy::Off;
    let engine = Engine::open(o.clone(), cfg.open().unwrap()).unwrap();
    engine.create_shard(1, b"", b"").unwrap();
    for i in 0..100u64 {
        let mut b = WriteBatch::new();
        b.put(
            ColumnFamily::Write,
            format!("k{i:03}").as_bytes(),
            i + 1,
            b"",
            b"v",
        );
        engine.write(1, &b).unwrap();
    }
    engine.close(true).unwrap();
    drop(engine);
    let engine = Engine::open(o, cfg.open().unwrap()).unwrap();
    let snap = engine.snapshot(1).unwrap();
    assert!(
        snap.get(ColumnFamily::Write, b"k042", u64::MAX)
            .unwrap()
            .is_some()
    );
    engine.live_file_ids().into_iter().collect()
}

#[test]
fn local_config_stores_files_in_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DfsConfig::Local {
        dir: dir.path().join("dfs"),
    };
    let ids = roundtrip(dir.path(), &cfg);
    assert!(!ids.is_empty());
    assert!(
        dir.path()
            .join("dfs")
            .join(format!("{:016x}.sst", ids[0]))
            .exists()
    );
}

#[test]
fn s3_config_stores_files_in_the_bucket_behind_a_file_cache() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start();
    let cfg = DfsConfig::S3 {
        options: server.options("cfg/"),
        credentials: Some(s3_server::credentials()),
        cache: Some(CacheConfig {
            dir: dir.path().join("cache"),
            budget_bytes: 64 << 20,
        }),
    };
    let ids = roundtrip(dir.path(), &cfg);
    let s3: Arc<dyn kvengine::Dfs> = Arc::new(server.dfs("cfg/"));
    for id in &ids {
        assert!(
            s3.get(FileId(*id)).is_ok(),
            "file {id} missing from the bucket"
        );
    }
    assert!(
        !dir.path().join("dfs").exists(),
        "no local object store was used"
    );
}
