//! The object store ("DFS") holding SST files, and its local-directory implementation (the
//! embedded default). Files are write-once and named by globally unique ids; a put is atomic, so
//! a reader sees a whole file or none.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use types::FileId;

use crate::durable_file;
use crate::error::{Error, Result};
use crate::metrics;

/// An object store of immutable files named by id.
pub trait Dfs: Send + Sync + 'static {
    /// Stores a whole file, atomically. Putting an id that exists with the same bytes is fine
    /// (retries after a lost reply).
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()>;
    /// Stores a file that `write` produces, atomically, and returns its length: a writer that
    /// streams (a flush) never holds the whole file. A store that keeps files on local disk
    /// writes them straight to its temp file; the default collects the bytes and [`Dfs::put`]s
    /// them (an S3 upload is one PUT of the whole body). A `write` that fails stores nothing.
    fn put_with(
        &self,
        file_id: FileId,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> Result<()>,
    ) -> Result<u64> {
        let mut data = Vec::new();
        write(&mut data)?;
        let len = data.len() as u64;
        self.put(file_id, Bytes::from(data))?;
        Ok(len)
    }
    /// Reads a whole file.
    fn get(&self, file_id: FileId) -> Result<Bytes>;
    /// Reads `len` bytes at `offset`.
    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes>;
    /// The whole file as a local file, for positioned reads, when the store keeps it on local
    /// disk (a local directory, the disk cache in front of S3); `None` when it does not (read
    /// it with `get`).
    fn open_local(&self, file_id: FileId) -> Result<Option<std::fs::File>> {
        let _ = file_id;
        Ok(None)
    }
    /// Says that a file kept open elsewhere (a worker's `TableCache`) was just used, without
    /// a read here: a store with its own order of use (the S3 disk cache, which evicts the
    /// least recently used file) must not take the most used files for the least. Others
    /// ignore it.
    fn note_use(&self, file_id: FileId) {
        let _ = file_id;
    }
    /// Deletes a file; deleting a missing file is not an error.
    fn delete(&self, file_id: FileId) -> Result<()>;
    /// Every file id stored.
    fn list(&self) -> Result<Vec<FileId>>;
}

/// `len` bytes at `offset` of a whole file held in memory; a range past its end is an error.
pub(crate) fn slice_range(file_id: FileId, all: Bytes, offset: u64, len: u64) -> Result<Bytes> {
    let end = offset
        .checked_add(len)
        .filter(|e| *e <= all.len() as u64)
        .ok_or_else(|| Error::Dfs {
            op: "get_range",
            file_id,
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "range past end of file: offset={offset} len={len} size={}",
                    all.len()
                ),
            ),
        })?;
    Ok(all.slice(offset as usize..end as usize))
}

/// Files in a local directory, `{id:016x}.sst`, written with temp + fsync + rename and read
/// through memory maps.
pub struct LocalDfs {
    dir: PathBuf,
}

impl LocalDfs {
    pub fn open(dir: impl Into<PathBuf>) -> Result<LocalDfs> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(Error::io("create dir", &dir))?;
        Ok(LocalDfs { dir })
    }

    pub fn path_of(&self, file_id: FileId) -> PathBuf {
        self.dir.join(format!("{file_id:016x}.sst"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Dfs for LocalDfs {
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
        metrics::dfs_request("put");
        durable_file::write_atomically(&self.path_of(file_id), &data)
    }

    fn put_with(
        &self,
        file_id: FileId,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> Result<()>,
    ) -> Result<u64> {
        metrics::dfs_request("put");
        durable_file::write_atomically_with(&self.path_of(file_id), write)
    }

    fn get(&self, file_id: FileId) -> Result<Bytes> {
        metrics::dfs_request("get");
        let path = self.path_of(file_id);
        if !path.exists() {
            return Err(Error::FileNotFound { file_id });
        }
        Ok(sst::table::map_file(file_id.get(), &path)?)
    }

    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes> {
        metrics::dfs_request("get_range");
        slice_range(file_id, self.get(file_id)?, offset, len)
    }

    fn open_local(&self, file_id: FileId) -> Result<Option<std::fs::File>> {
        metrics::dfs_request("get");
        match std::fs::File::open(self.path_of(file_id)) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Error::FileNotFound { file_id })
            }
            Err(source) => Err(sst::Error::Io {
                file_id: file_id.get(),
                source,
            }
            .into()),
        }
    }

    fn delete(&self, file_id: FileId) -> Result<()> {
        metrics::dfs_request("delete");
        match std::fs::remove_file(self.path_of(file_id)) {
            Ok(()) => durable_file::sync_dir(&self.dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::Dfs {
                op: "delete",
                file_id,
                source: e,
            }),
        }
    }

    fn list(&self) -> Result<Vec<FileId>> {
        metrics::dfs_request("list");
        let mut ids = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(Error::io("list", &self.dir))? {
            let entry = entry.map_err(Error::io("list", &self.dir))?;
            let name = entry.file_name();
            if let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".sst"))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .map(FileId)
            {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_dfs_round_trips_files_and_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let dfs = LocalDfs::open(dir.path()).unwrap();
        dfs.put(FileId(7), Bytes::from_static(b"hello world"))
            .unwrap();
        assert_eq!(
            dfs.get(FileId(7)).unwrap(),
            Bytes::from_static(b"hello world")
        );
        assert_eq!(
            dfs.get_range(FileId(7), 6, 5).unwrap(),
            Bytes::from_static(b"world")
        );
        assert!(dfs.get_range(FileId(7), 6, 6).is_err());
        assert_eq!(dfs.list().unwrap(), vec![FileId(7)]);
        dfs.delete(FileId(7)).unwrap();
        dfs.delete(FileId(7)).unwrap();
        assert!(matches!(
            dfs.get(FileId(7)),
            Err(Error::FileNotFound { file_id: FileId(7) })
        ));
    }

    #[test]
    fn a_streamed_put_stores_the_bytes_written_and_a_failed_one_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dfs = LocalDfs::open(dir.path()).unwrap();
        let len = dfs
            .put_with(FileId(9), &mut |w| {
                for chunk in [&b"hello "[..], b"streamed ", b"world"] {
                    w.write_all(chunk).unwrap();
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(len, 20);
        assert_eq!(
            dfs.get(FileId(9)).unwrap(),
            Bytes::from_static(b"hello streamed world")
        );

        let failed = dfs.put_with(FileId(10), &mut |w| {
            w.write_all(b"half a file").unwrap();
            Err(Error::InvalidArgument {
                what: "the writer gave up".into(),
            })
        });
        assert!(
            matches!(failed, Err(Error::InvalidArgument { .. })),
            "{failed:?}"
        );
        assert_eq!(dfs.list().unwrap(), vec![FileId(9)]);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp file is left behind: {names:?}");
    }

    #[test]
    fn the_default_streamed_put_collects_the_bytes_and_puts_them() {
        /// A store with no local files: `put_with` is the trait's default.
        struct Recording(std::sync::Mutex<Vec<(FileId, Bytes)>>);
        impl Dfs for Recording {
            fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
                self.0.lock().unwrap().push((file_id, data));
                Ok(())
            }
            fn get(&self, file_id: FileId) -> Result<Bytes> {
                Err(Error::FileNotFound { file_id })
            }
            fn get_range(&self, file_id: FileId, _: u64, _: u64) -> Result<Bytes> {
                Err(Error::FileNotFound { file_id })
            }
            fn delete(&self, _: FileId) -> Result<()> {
                Ok(())
            }
            fn list(&self) -> Result<Vec<FileId>> {
                Ok(Vec::new())
            }
        }
        let store = Recording(std::sync::Mutex::new(Vec::new()));
        let len = store
            .put_with(FileId(3), &mut |w| {
                w.write_all(b"abc").unwrap();
                w.write_all(b"def").unwrap();
                Ok(())
            })
            .unwrap();
        assert_eq!(len, 6);
        assert_eq!(
            *store.0.lock().unwrap(),
            vec![(FileId(3), Bytes::from_static(b"abcdef"))]
        );
        let failed = store.put_with(FileId(4), &mut |_| {
            Err(Error::InvalidArgument { what: "no".into() })
        });
        assert!(failed.is_err());
        assert_eq!(
            store.0.lock().unwrap().len(),
            1,
            "a failed write puts nothing"
        );
    }
}
