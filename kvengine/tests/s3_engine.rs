//! The engine with its SST files on S3 (s3s-fs in process on 127.0.0.1): the WAL and manifest
//! stay in the local directory, everything survives flush and reopen.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/engine_data.rs"]
mod engine_data;
#[path = "common/s3_server.rs"]
mod s3_server;

use kvengine::FileId;
use std::sync::Arc;

use engine_data::{SHARD, assert_holds, assert_manifest_files_exist, open, write};
use kvengine::Dfs;
use s3_server::S3Server;

#[test]
fn engine_on_s3_reads_everything_back_after_flush_and_reopen() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), Arc::new(server.dfs("node-0/")));
    engine.create_shard(SHARD, b"", b"").unwrap();
    write(&engine, 0..300);
    engine.flush_shard(SHARD).unwrap();
    assert_eq!(engine.shard_info(SHARD).unwrap().data_sequence, 300);
    // These stay in the WAL only (few enough to fit one memtable: see
    // engine_replay_flush.rs for several).
    write(&engine, 300..310);
    assert_holds(&engine, 310);
    engine.close(false).unwrap();
    drop(engine);

    let dfs = server.dfs("node-0/");
    let (live, stored) = assert_manifest_files_exist(dir.path(), &dfs);
    assert!(!live.is_empty());
    // SST files are objects under the prefix, not local files.
    let objects = std::fs::read_dir(server.root().join(s3_server::BUCKET).join("node-0")).unwrap();
    assert_eq!(objects.count(), stored.len());
    let local_ssts = walk(dir.path())
        .into_iter()
        .filter(|p| p.ends_with(".sst"))
        .count();
    assert_eq!(local_ssts, 0);

    let engine = open(dir.path(), Arc::new(dfs));
    assert_eq!(engine.shard_info(SHARD).unwrap().write_sequence, 310);
    assert_holds(&engine, 310);
    write(&engine, 310..400);
    engine.close(true).unwrap();
    drop(engine);
    let engine = open(dir.path(), Arc::new(server.dfs("node-0/")));
    assert_holds(&engine, 400);
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

#[test]
fn engines_sharing_a_bucket_under_different_prefixes_do_not_see_each_other() {
    let server = S3Server::start();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ea = open(a.path(), Arc::new(server.dfs("a/")));
    let eb = open(b.path(), Arc::new(server.dfs("b/")));
    for e in [&ea, &eb] {
        e.create_shard(SHARD, b"", b"").unwrap();
        write(e, 0..50);
        e.flush_shard(SHARD).unwrap();
        e.close(false).unwrap();
    }
    drop((ea, eb));
    let (_, stored_a) = assert_manifest_files_exist(a.path(), &server.dfs("a/"));
    let (_, stored_b) = assert_manifest_files_exist(b.path(), &server.dfs("b/"));
    // Both engines use node id 0, so their file ids coincide: only the prefix keeps them apart.
    assert!(
        stored_a.intersection(&stored_b).next().is_some(),
        "{stored_a:?} {stored_b:?}"
    );
    server
        .dfs("b/")
        .delete(FileId(*stored_b.iter().next().unwrap()))
        .unwrap();
    let ea = open(a.path(), Arc::new(server.dfs("a/")));
    assert_holds(&ea, 50);
}
