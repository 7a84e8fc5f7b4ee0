//! [`Manifest`]: the durable log of every shard's ChangeSets, in `dir/MANIFEST`.
//!
//! Opening replays the file into the shard map (truncating a torn last record). Each change is
//! checked against the in-memory state first — a rejected ChangeSet writes nothing — then
//! appended and fdatasync'd, and only then becomes visible. Once `rewrite_after` records have
//! accumulated, the next change first rewrites the file as one snapshot per shard (temp file,
//! fsync, rename, fsync dir), so the log stays short and replay fast.
//!
//! A failed append or rewrite makes the manifest refuse every later change: the file may end
//! in a partial record, or the append handle may point at a replaced file. Reopening recovers.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use changeset::{Applied, ApplyError, ChangeSet, MalformedReason, ShardFiles};
use parking_lot::Mutex;

use crate::durable_file::write_atomically;
use crate::error::{Error, Result};
use crate::manifest::file_format::{self, encode_snapshot_file};
use crate::manifest::shard_map::{Prepared, ShardMap, ShardMapError, Update};

/// The manifest file's name in its directory.
pub const MANIFEST_FILE_NAME: &str = "MANIFEST";

/// Default of [`ManifestOptions::rewrite_after`].
pub const DEFAULT_REWRITE_AFTER: usize = 1000;

/// Settings of a [`Manifest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestOptions {
    /// Directory of the `MANIFEST` file; created if missing.
    pub dir: PathBuf,
    /// Records appended since the last rewrite after which the next change rewrites the file
    /// first. Lower values keep the file and its replay short at the cost of rewriting every
    /// shard's file list more often (one temp file, two fsyncs and a rename each time). A
    /// rewrite at open happens too when the file holds this many. Default 1000.
    pub rewrite_after: usize,
}

impl ManifestOptions {
    /// Options with the defaults for everything but the directory.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            rewrite_after: DEFAULT_REWRITE_AFTER,
        }
    }
}

struct Inner {
    shards: ShardMap,
    /// Append handle of the current MANIFEST.
    file: File,
    records_since_rewrite: usize,
    /// Set by a failed append or rewrite.
    failed: bool,
}

/// What [`Manifest::record`] did: what [`changeset::ShardFiles::apply`] said, and the file
/// lists that now stand where the ChangeSet's shard stood. This is what the engine derives the
/// live state from.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// What the apply said.
    pub applied: Applied,
    /// The shard's file list after the ChangeSet (unchanged when it was skipped), or the
    /// children of a split, in key order.
    pub shards: Vec<ShardFiles>,
}

/// A ChangeSet checked against the manifest and not yet durable ([`Manifest::stage`]).
#[derive(Clone, Debug)]
pub struct Staged {
    cs: ChangeSet,
    prepared: Prepared,
    shards: Vec<ShardFiles>,
}

impl Staged {
    /// What the apply says the ChangeSet does.
    pub fn applied(&self) -> &Applied {
        &self.prepared.applied
    }

    /// The file lists that will stand where the ChangeSet's shard stands: the shard's own
    /// (unchanged when the ChangeSet is skipped), or a split's children in key order.
    pub fn shards(&self) -> &[ShardFiles] {
        &self.shards
    }
}

/// The shards' file lists and their durable ChangeSet log. `Send + Sync`.
pub struct Manifest {
    dir: PathBuf,
    path: PathBuf,
    rewrite_after: usize,
    inner: Mutex<Inner>,
}

impl Manifest {
    /// Opens `dir/MANIFEST`, creating it (and the directory) when missing, and replays it.
    /// A torn last record is truncated; any other damage is [`Error::Corruption`] naming the
    /// file and the record's offset.
    pub fn open(opts: ManifestOptions) -> Result<Manifest> {
        let dir = opts.dir;
        fs::create_dir_all(&dir).map_err(Error::io("create dir", &dir))?;
        let path = dir.join(MANIFEST_FILE_NAME);
        remove_stale_temp(&path)?;
        match fs::metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let empty = encode_snapshot_file([]).expect("a header fits");
                write_atomically(&path, &empty)?;
            }
            Err(source) => {
                return Err(Error::Io {
                    op: "stat",
                    path,
                    source,
                });
            }
        }
        let data = fs::read(&path).map_err(Error::io("read", &path))?;
        let replayed = file_format::replay(&data).map_err(|e| Error::Corruption {
            what: "manifest",
            detail: e.detail,
            path: path.clone(),
            offset: e.offset,
        })?;
        if let Some(fault) = &replayed.torn {
            tracing::warn!(
                path = %path.display(),
                offset = replayed.valid_len,
                dropped_bytes = data.len() as u64 - replayed.valid_len,
                reason = %fault,
                "truncating torn manifest tail"
            );
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(Error::io("open", &path))?;
            file.set_len(replayed.valid_len)
                .map_err(Error::io("truncate", &path))?;
            file.sync_all().map_err(Error::io("fsync", &path))?;
        }
        let file = open_append(&path)?;
        let manifest = Manifest {
            dir,
            path,
            rewrite_after: opts.rewrite_after,
            inner: Mutex::new(Inner {
                shards: replayed.shards,
                file,
                records_since_rewrite: replayed.records_since_rewrite,
                failed: false,
            }),
        };
        {
            let mut inner = manifest.inner.lock();
            manifest.rewrite_if_due(&mut inner)?;
        }
        Ok(manifest)
    }

    /// The file lists the MANIFEST in `dir` describes, read without changing anything (a torn
    /// tail is ignored, not truncated): what opening the engine would rebuild from the
    /// manifest alone. For tests and tools that check the live state against it.
    pub fn read_file_lists(dir: &Path) -> Result<Vec<ShardFiles>> {
        let path = dir.join(MANIFEST_FILE_NAME);
        let data = fs::read(&path).map_err(Error::io("read", &path))?;
        let replayed = file_format::replay(&data).map_err(|e| Error::Corruption {
            what: "manifest",
            detail: e.detail,
            path: path.clone(),
            offset: e.offset,
        })?;
        Ok(replayed.shards.iter().cloned().collect())
    }

    /// The current file lists, by shard id.
    pub fn shards(&self) -> Vec<ShardFiles> {
        self.inner.lock().shards.iter().cloned().collect()
    }

    /// The current file list of one shard.
    pub fn shard(&self, id: u64) -> Option<ShardFiles> {
        self.inner.lock().shards.get(id).cloned()
    }

    /// Number of live shards.
    pub fn shard_count(&self) -> usize {
        self.inner.lock().shards.len()
    }

    /// Applies `cs` to its shard and makes it durable, returning what apply said.
    ///
    /// The ChangeSet is checked against the in-memory state first; a rejected one returns an
    /// error and writes nothing ([`Error::ShardNotFound`] for an unknown shard,
    /// [`Error::ChangeSet`] otherwise). A skipped one (already applied) writes nothing either.
    /// A conflicted compaction is recorded in its conflicted form. The new state is visible
    /// only once the record is fdatasync'd. A split replaces the parent with its children.
    pub fn record(&self, cs: &ChangeSet) -> Result<Recorded> {
        let mut inner = self.inner.lock();
        self.check_usable(&inner)?;
        let prepared = inner.shards.prepare(cs).map_err(map_error)?;
        self.rewrite_if_due(&mut inner)?;
        let applied = self.commit_prepared(&mut inner, prepared)?;
        let shards = match &applied {
            Applied::Split(children) => children.clone(),
            _ => inner.shards.get(cs.shard_id).cloned().into_iter().collect(),
        };
        Ok(Recorded { applied, shards })
    }

    /// Checks `cs` against the current state without recording it: what [`Manifest::commit`]
    /// would make of it. Rejected ChangeSets fail here as they would in [`Manifest::record`].
    ///
    /// The engine stages a ChangeSet, opens the tables the staged file lists name, and only
    /// then commits, so a table that cannot be read leaves the manifest and the live state as
    /// they were.
    pub fn stage(&self, cs: &ChangeSet) -> Result<Staged> {
        let inner = self.inner.lock();
        self.check_usable(&inner)?;
        let prepared = inner.shards.prepare(cs).map_err(map_error)?;
        let shards = match &prepared.update {
            Update::Nothing => inner.shards.get(cs.shard_id).cloned().into_iter().collect(),
            Update::Put(files) => vec![(**files).clone()],
            Update::Split { children, .. } => children.clone(),
            Update::Remove(_) => Vec::new(),
        };
        Ok(Staged {
            cs: cs.clone(),
            prepared,
            shards,
        })
    }

    /// Records a staged ChangeSet durably (see [`Manifest::record`]). Fails with
    /// [`Error::ShardBusy`], recording nothing, if the state changed since it was staged in a
    /// way that changes what the ChangeSet does.
    pub fn commit(&self, staged: Staged) -> Result<Recorded> {
        let mut inner = self.inner.lock();
        self.check_usable(&inner)?;
        let fresh = inner.shards.prepare(&staged.cs).map_err(map_error)?;
        if fresh != staged.prepared {
            return Err(Error::ShardBusy {
                shard_id: staged.cs.shard_id,
                reason: "file list changed since the changeset was staged",
            });
        }
        self.rewrite_if_due(&mut inner)?;
        let applied = self.commit_prepared(&mut inner, fresh)?;
        Ok(Recorded {
            applied,
            shards: staged.shards,
        })
    }

    /// Creates a shard with the given file list (recorded as a Snapshot ChangeSet). Fails when
    /// a shard with its id exists.
    pub fn create_shard(&self, files: &ShardFiles) -> Result<()> {
        let mut inner = self.inner.lock();
        self.check_usable(&inner)?;
        let prepared = inner.shards.prepare_create(files).map_err(map_error)?;
        self.rewrite_if_due(&mut inner)?;
        self.commit_prepared(&mut inner, prepared).map(|_| ())
    }

    /// Removes shard `id` (its replica left this server), recorded as a `Change::Destroy`
    /// ChangeSet: replay drops the shard too. Its files are not touched.
    pub fn destroy_shard(&self, id: u64) -> Result<()> {
        let mut inner = self.inner.lock();
        self.check_usable(&inner)?;
        let sequence = inner.shards.get(id).map_or(0, |s| s.meta_seq() + 1);
        let cs = ChangeSet {
            shard_id: id,
            shard_ver: inner.shards.get(id).map_or(0, |s| s.ver()),
            sequence,
            properties: Default::default(),
            change: Some(changeset::Change::Destroy(changeset::Destroy {})),
        };
        let prepared = inner.shards.prepare_destroy(&cs).map_err(map_error)?;
        self.rewrite_if_due(&mut inner)?;
        self.commit_prepared(&mut inner, prepared).map(|_| ())
    }

    /// Rewrites the file as one snapshot per shard now.
    pub fn rewrite(&self) -> Result<()> {
        let mut inner = self.inner.lock();
        self.check_usable(&inner)?;
        self.rewrite_locked(&mut inner)
    }

    /// Every file id referenced by any shard.
    pub fn live_file_ids(&self) -> BTreeSet<u64> {
        let inner = self.inner.lock();
        inner.shards.iter().flat_map(|s| s.file_ids()).collect()
    }

    /// The path of the MANIFEST file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_usable(&self, inner: &Inner) -> Result<()> {
        if inner.failed {
            return Err(Error::Closed {
                reason: "an earlier manifest write failed; reopen to recover".to_string(),
            });
        }
        Ok(())
    }

    fn commit_prepared(&self, inner: &mut Inner, prepared: Prepared) -> Result<Applied> {
        if let Some(cs) = &prepared.to_record {
            self.append(inner, cs)?;
        }
        inner.shards.commit(prepared.update);
        Ok(prepared.applied)
    }

    fn append(&self, inner: &mut Inner, cs: &ChangeSet) -> Result<()> {
        let mut record = Vec::new();
        file_format::encode_record(cs, &mut record).map_err(|e| Error::Config {
            what: e.to_string(),
        })?;
        let written = inner
            .file
            .write_all(&record)
            .map_err(Error::io("write", &self.path))
            .and_then(|()| {
                inner
                    .file
                    .sync_data()
                    .map_err(Error::io("fdatasync", &self.path))
            });
        if written.is_err() {
            inner.failed = true;
        }
        written?;
        inner.records_since_rewrite += 1;
        Ok(())
    }

    fn rewrite_if_due(&self, inner: &mut Inner) -> Result<()> {
        if inner.records_since_rewrite >= self.rewrite_after {
            self.rewrite_locked(inner)?;
        }
        Ok(())
    }

    fn rewrite_locked(&self, inner: &mut Inner) -> Result<()> {
        let data = encode_snapshot_file(inner.shards.iter()).map_err(|e| Error::Config {
            what: e.to_string(),
        })?;
        let rewritten = write_atomically(&self.path, &data).and_then(|()| open_append(&self.path));
        match rewritten {
            Ok(file) => {
                inner.file = file;
                inner.records_since_rewrite = 0;
                tracing::debug!(
                    path = %self.path.display(),
                    shards = inner.shards.len(),
                    bytes = data.len(),
                    "rewrote manifest"
                );
                Ok(())
            }
            Err(e) => {
                inner.failed = true;
                Err(e)
            }
        }
    }
}

impl std::fmt::Debug for Manifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manifest")
            .field("dir", &self.dir)
            .field("rewrite_after", &self.rewrite_after)
            .finish_non_exhaustive()
    }
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(Error::io("open", path))
}

/// Removes the temp file of a rewrite that a crash interrupted before its rename.
fn remove_stale_temp(path: &Path) -> Result<()> {
    let tmp = path.with_extension("tmp");
    match fs::remove_file(&tmp) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            op: "remove",
            path: tmp,
            source,
        }),
    }
}

fn map_error(e: ShardMapError) -> Error {
    match e {
        ShardMapError::UnknownShard { shard_id } => Error::ShardNotFound { shard_id },
        ShardMapError::Apply(e) => Error::ChangeSet(e),
        // error.rs has no variant for an id collision; report it as the ChangeSet (or shard
        // file list) being malformed for this map.
        ShardMapError::SplitChildExists {
            parent,
            sequence,
            child,
        } => Error::ChangeSet(ApplyError::Malformed {
            shard_id: parent,
            sequence,
            reason: MalformedReason::SplitDuplicateShardId { id: child },
        }),
        ShardMapError::ShardExists { shard_id } => Error::ShardExists { shard_id },
    }
}
