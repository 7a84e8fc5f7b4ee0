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
}
