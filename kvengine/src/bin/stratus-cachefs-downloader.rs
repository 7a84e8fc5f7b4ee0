//! Test helper for `tests/cachefs.rs`: downloads one file through a [`kvengine::CacheFs`] in
//! front of a local object store, prints `done`, then sleeps. The test SIGKILLs it while the
//! download is being written and checks that the half-written file is never served. Not meant
//! for anything else.
//!
//! `stratus-cachefs-downloader REMOTE_DIR CACHE_DIR FILE_ID`

use std::sync::Arc;
use std::time::Duration;

use kvengine::{CacheFs, Dfs, FileId, LocalDfs};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [remote, cache, id] = args.as_slice() else {
        eprintln!("usage: stratus-cachefs-downloader REMOTE_DIR CACHE_DIR FILE_ID");
        std::process::exit(2);
    };
    let file_id: u64 = id.parse().expect("file id");
    let run = || -> kvengine::Result<()> {
        let inner: Arc<dyn Dfs> = Arc::new(LocalDfs::open(remote)?);
        let cache = CacheFs::open(inner, cache, u64::MAX)?;
        let data = cache.get(FileId(file_id))?;
        println!("done {}", data.len());
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("cachefs downloader failed: {e}");
        std::process::exit(1);
    }
    // Stay alive so that the test's kill always finds a running process.
    std::thread::sleep(Duration::from_secs(60));
}
