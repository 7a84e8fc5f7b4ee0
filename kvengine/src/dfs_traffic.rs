//! The bytes a process moves to and from an object store over the network, reported to
//! whoever meters network traffic (the node programs count them as `object_store` traffic,
//! cross-zone when the store's `[dfs] zone` differs from the node's). The engine knows nothing
//! of zones or metrics: it calls the two functions of a [`DfsTraffic`].
//!
//! Only a store reached over the network is wrapped ([`crate::DfsConfig::open_metered`]: S3,
//! beneath the local file cache, so a read the cache answers is not counted). A local
//! directory is not network traffic.

use std::sync::Arc;

use bytes::Bytes;
use types::FileId;

use crate::dfs::Dfs;
use crate::error::Result;

type Report = Arc<dyn Fn(u64) + Send + Sync>;

/// Where a store reports its bytes: file data read (whole files and ranges) and written.
#[derive(Clone)]
pub struct DfsTraffic {
    read: Report,
    written: Report,
}

impl DfsTraffic {
    pub fn new(
        read: impl Fn(u64) + Send + Sync + 'static,
        written: impl Fn(u64) + Send + Sync + 'static,
    ) -> DfsTraffic {
        DfsTraffic {
            read: Arc::new(read),
            written: Arc::new(written),
        }
    }
}

impl std::fmt::Debug for DfsTraffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DfsTraffic")
    }
}

/// A store that reports the bytes of its successful gets, range gets and puts.
pub struct MeteredDfs {
    inner: Arc<dyn Dfs>,
    traffic: DfsTraffic,
}

impl MeteredDfs {
    pub fn new(inner: Arc<dyn Dfs>, traffic: DfsTraffic) -> MeteredDfs {
        MeteredDfs { inner, traffic }
    }
}

impl Dfs for MeteredDfs {
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
        let len = data.len() as u64;
        self.inner.put(file_id, data)?;
        (self.traffic.written)(len);
        Ok(())
    }

    fn put_with(
        &self,
        file_id: FileId,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> Result<()>,
    ) -> Result<u64> {
        let len = self.inner.put_with(file_id, write)?;
        (self.traffic.written)(len);
        Ok(len)
    }

    fn get(&self, file_id: FileId) -> Result<Bytes> {
        let data = self.inner.get(file_id)?;
        (self.traffic.read)(data.len() as u64);
        Ok(data)
    }

    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes> {
        let data = self.inner.get_range(file_id, offset, len)?;
        (self.traffic.read)(data.len() as u64);
        Ok(data)
    }

    /// Counted as a whole-file read, as `get` is: the file was fetched whole.
    fn open_local(&self, file_id: FileId) -> Result<Option<std::fs::File>> {
        let file = self.inner.open_local(file_id)?;
        if let Some(f) = &file {
            (self.traffic.read)(f.metadata().map_or(0, |m| m.len()));
        }
        Ok(file)
    }

    fn note_use(&self, file_id: FileId) {
        self.inner.note_use(file_id);
    }

    fn delete(&self, file_id: FileId) -> Result<()> {
        self.inner.delete(file_id)
    }

    fn list(&self) -> Result<Vec<FileId>> {
        self.inner.list()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::cachefs::CacheFs;
    use crate::dfs::LocalDfs;

    #[test]
    fn reads_and_writes_report_their_bytes_and_cache_hits_report_none() {
        let dir = tempfile::tempdir().unwrap();
        let read = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let traffic = {
            let (r, w) = (read.clone(), written.clone());
            DfsTraffic::new(
                move |n| {
                    r.fetch_add(n, Ordering::Relaxed);
                },
                move |n| {
                    w.fetch_add(n, Ordering::Relaxed);
                },
            )
        };
        let store: Arc<dyn Dfs> = Arc::new(LocalDfs::open(dir.path().join("store")).unwrap());
        let metered: Arc<dyn Dfs> = Arc::new(MeteredDfs::new(store, traffic));
        metered
            .put(FileId(1), Bytes::from_static(b"0123456789"))
            .unwrap();
        assert_eq!(written.load(Ordering::Relaxed), 10);
        assert_eq!(metered.get_range(FileId(1), 2, 3).unwrap(), "234");
        assert_eq!(read.load(Ordering::Relaxed), 3);
        // Behind a file cache: the first get goes to the store, the second is a hit.
        let cached = CacheFs::open(metered, dir.path().join("cache"), 1 << 20).unwrap();
        assert_eq!(cached.get(FileId(1)).unwrap().len(), 10);
        assert_eq!(read.load(Ordering::Relaxed), 13);
        assert_eq!(cached.get(FileId(1)).unwrap().len(), 10);
        assert_eq!(read.load(Ordering::Relaxed), 13);
        // A failed read reports nothing.
        assert!(cached.get(FileId(2)).is_err());
        assert_eq!(read.load(Ordering::Relaxed), 13);
    }
}
