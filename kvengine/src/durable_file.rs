//! The one pattern every crash-safe writer uses: write to a temp name, fsync the file, rename
//! it over the final name, fsync the directory. After a crash the final name holds either the
//! old contents or the new ones, never a mix.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Atomically replaces `path` with `data`, durably.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(Error::io("create", &tmp))?;
    f.write_all(data).map_err(Error::io("write", &tmp))?;
    f.sync_all().map_err(Error::io("fsync", &tmp))?;
    drop(f);
    fs::rename(&tmp, path).map_err(Error::io("rename", path))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// [`write_atomically`] of what `write` produces, streamed to the temp file through a 1 MiB
/// buffer; returns the file's length. A failed `write` removes the temp file.
pub fn write_atomically_with(
    path: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> Result<()>,
) -> Result<u64> {
    let tmp = path.with_extension("tmp");
    let written = (|| {
        let f = File::create(&tmp).map_err(Error::io("create", &tmp))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        write(&mut w)?;
        let f = w
            .into_inner()
            .map_err(|e| Error::io("write", &tmp)(e.into_error()))?;
        f.sync_all().map_err(Error::io("fsync", &tmp))?;
        f.metadata()
            .map(|m| m.len())
            .map_err(Error::io("stat", &tmp))
    })();
    let len = match written {
        Ok(len) => len,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    fs::rename(&tmp, path).map_err(Error::io("rename", path))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))?;
    Ok(len)
}

/// Makes a directory's entries (creates, renames, deletes) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io("fsync dir", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_contents_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(!p.with_extension("tmp").exists());
    }
}
