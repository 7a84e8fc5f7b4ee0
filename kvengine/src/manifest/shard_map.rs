//! The manifest's state: every live shard's file list, and the pure rules that change it.
//!
//! A change is first *prepared* (computed on copies, nothing changes) and then *committed*, so
//! that the manifest can make a ChangeSet durable between the two and leave the state untouched
//! when that fails.

use std::collections::BTreeMap;

use changeset::{Applied, ApplyError, Change, ChangeSet, ShardFiles};

/// Why a ChangeSet does not fit the shard map.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShardMapError {
    /// A non-snapshot ChangeSet names a shard that does not exist.
    #[error("changeset names an unknown shard and is not a snapshot shard_id={shard_id}")]
    UnknownShard { shard_id: u64 },
    /// A shard with this id exists already.
    #[error("shard already exists shard_id={shard_id}")]
    ShardExists { shard_id: u64 },
    /// A split child takes the id of another live shard.
    #[error(
        "split child id is already a live shard shard_id={parent} sequence={sequence} child_id={child}"
    )]
    SplitChildExists {
        parent: u64,
        sequence: u64,
        child: u64,
    },
    /// The shard's file list rejected the ChangeSet.
    #[error("changeset rejected")]
    Apply(#[from] ApplyError),
}

/// How the map changes when a prepared ChangeSet is committed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Update {
    /// Nothing (the ChangeSet was already applied).
    Nothing,
    /// Insert or replace the shard.
    Put(Box<ShardFiles>),
    /// Remove the shard (it left this server).
    Remove(u64),
    /// Remove the parent, insert the children.
    Split {
        parent: u64,
        children: Vec<ShardFiles>,
    },
}

/// A ChangeSet checked against the map, ready to commit.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Prepared {
    /// What [`ShardFiles::apply`] said.
    pub(crate) applied: Applied,
    /// What the log must hold for replay to reach the same state: the ChangeSet itself, its
    /// conflicted form, or nothing when it was skipped.
    pub(crate) to_record: Option<ChangeSet>,
    pub(crate) update: Update,
}

/// Every live shard's file list, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShardMap {
    shards: BTreeMap<u64, ShardFiles>,
}

impl ShardMap {
    pub(crate) fn get(&self, id: u64) -> Option<&ShardFiles> {
        self.shards.get(&id)
    }

    /// The shards in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &ShardFiles> {
        self.shards.values()
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.len()
    }

    /// Prepares a ChangeSet for an existing shard.
    pub(crate) fn prepare(&self, cs: &ChangeSet) -> Result<Prepared, ShardMapError> {
        let shard = self
            .shards
            .get(&cs.shard_id)
            .ok_or(ShardMapError::UnknownShard {
                shard_id: cs.shard_id,
            })?;
        let mut next = shard.clone();
        let applied = next.apply(cs)?;
        let (to_record, update) = match &applied {
            Applied::Skipped { .. } => (None, Update::Nothing),
            Applied::Applied => (Some(cs.clone()), Update::Put(Box::new(next))),
            Applied::Conflicted(marked) => (Some((**marked).clone()), Update::Put(Box::new(next))),
            Applied::Split(children) => {
                for child in children {
                    if child.id() != cs.shard_id && self.shards.contains_key(&child.id()) {
                        return Err(ShardMapError::SplitChildExists {
                            parent: cs.shard_id,
                            sequence: cs.sequence,
                            child: child.id(),
                        });
                    }
                }
                let update = Update::Split {
                    parent: cs.shard_id,
                    children: children.clone(),
                };
                (Some(cs.clone()), update)
            }
        };
        Ok(Prepared {
            applied,
            to_record,
            update,
        })
    }

    /// Prepares the creation of a shard that does not exist yet.
    pub(crate) fn prepare_create(&self, files: &ShardFiles) -> Result<Prepared, ShardMapError> {
        if self.shards.contains_key(&files.id()) {
            return Err(ShardMapError::ShardExists {
                shard_id: files.id(),
            });
        }
        Ok(Prepared {
            applied: Applied::Applied,
            to_record: Some(files.to_changeset()),
            update: Update::Put(Box::new(files.clone())),
        })
    }

    /// Prepares the removal of shard `cs.shard_id` (`cs` holds a `Change::Destroy`).
    pub(crate) fn prepare_destroy(&self, cs: &ChangeSet) -> Result<Prepared, ShardMapError> {
        if !self.shards.contains_key(&cs.shard_id) {
            return Err(ShardMapError::UnknownShard {
                shard_id: cs.shard_id,
            });
        }
        Ok(Prepared {
            applied: Applied::Applied,
            to_record: Some(cs.clone()),
            update: Update::Remove(cs.shard_id),
        })
    }

    pub(crate) fn commit(&mut self, update: Update) {
        match update {
            Update::Nothing => {}
            Update::Remove(id) => {
                self.shards.remove(&id);
            }
            Update::Put(shard) => {
                self.shards.insert(shard.id(), *shard);
            }
            Update::Split { parent, children } => {
                self.shards.remove(&parent);
                for child in children {
                    self.shards.insert(child.id(), child);
                }
            }
        }
    }

    /// Applies one logged ChangeSet during replay: a snapshot of an unknown shard creates it,
    /// anything else goes through [`ShardMap::prepare`].
    pub(crate) fn replay(&mut self, cs: &ChangeSet) -> Result<(), ShardMapError> {
        let prepared = if !self.shards.contains_key(&cs.shard_id)
            && matches!(cs.change, Some(Change::Snapshot(_)))
        {
            self.prepare_create(&ShardFiles::from_changeset(cs)?)?
        } else if matches!(cs.change, Some(Change::Destroy(_))) {
            self.prepare_destroy(cs)?
        } else {
            self.prepare(cs)?
        };
        self.commit(prepared.update);
        Ok(())
    }
}
