//! The metadata store the placement driver keeps its state in: etcd for a cluster of machines,
//! an embedded store for one machine. Both sit behind [`MetaStore`], which is the subset of
//! etcd's v3 API the placement driver uses: reads, transactions that compare a key's value or
//! revision before writing (every update that could race is one), and leases (keys that vanish
//! when their owner stops renewing them: the placement leader's key, registrations).
//!
//! Revisions are etcd's: one store-wide counter raised by every write; a key's
//! `create_revision` is 0 when it does not exist, which is how "create only if absent" is
//! spelled ([`Compare::absent`]).

pub mod embedded;
pub mod etcd;

use std::future::Future;
use std::time::Duration;

/// A lease id (etcd's: never 0; 0 means "no lease").
pub type LeaseId = i64;

/// A key and what the store knows about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The revision of the write that created the key (0: the key does not exist).
    pub create_revision: u64,
    /// The revision of the last write of the key.
    pub mod_revision: u64,
    /// The lease the key is bound to (0: none).
    pub lease: LeaseId,
}

/// What a [`Compare`] checks about its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// The value equals (a missing key equals nothing).
    Value(Vec<u8>),
    /// The key's `mod_revision` equals (0: the key is absent).
    ModRevision(u64),
    /// The key's `create_revision` equals (0: the key is absent).
    CreateRevision(u64),
}

/// One condition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    pub key: Vec<u8>,
    pub target: CompareTarget,
}

impl Compare {
    /// The key does not exist.
    pub fn absent(key: impl Into<Vec<u8>>) -> Compare {
        Compare {
            key: key.into(),
            target: CompareTarget::CreateRevision(0),
        }
    }

    /// The key holds exactly `value`.
    pub fn value_is(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Compare {
        Compare {
            key: key.into(),
            target: CompareTarget::Value(value.into()),
        }
    }

    /// The key was last written at `revision` (0: it does not exist).
    pub fn mod_revision_is(key: impl Into<Vec<u8>>, revision: u64) -> Compare {
        Compare {
            key: key.into(),
            target: CompareTarget::ModRevision(revision),
        }
    }

    /// Whether the condition holds for `current` (None: the key is absent).
    pub fn holds(&self, current: Option<&KeyValue>) -> bool {
        match (&self.target, current) {
            (CompareTarget::Value(v), Some(kv)) => &kv.value == v,
            (CompareTarget::Value(_), None) => false,
            (CompareTarget::ModRevision(r), kv) => kv.map_or(0, |kv| kv.mod_revision) == *r,
            (CompareTarget::CreateRevision(r), kv) => kv.map_or(0, |kv| kv.create_revision) == *r,
        }
    }
}

/// One write of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Sets the key, bound to `lease` (0: unbound, kept until deleted).
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: LeaseId,
    },
    Delete {
        key: Vec<u8>,
    },
}

impl Op {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Op {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease: 0,
        }
    }

    pub fn put_leased(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: LeaseId) -> Op {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease,
        }
    }

    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// All `writes` happen, atomically, if every compare holds; none otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    pub compares: Vec<Compare>,
    pub writes: Vec<Op>,
}

impl Txn {
    pub fn when(compares: Vec<Compare>) -> Txn {
        Txn {
            compares,
            writes: Vec::new(),
        }
    }

    pub fn then(mut self, writes: Vec<Op>) -> Txn {
        self.writes = writes;
        self
    }
}

/// A granted lease: its id and the time to live the store granted (etcd may raise a short one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: LeaseId,
    pub ttl: Duration,
}

/// Failures of a metadata store. Every message names the store (an endpoint or a file).
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// No endpoint answered: the store may be down or unreachable; worth a retry.
    #[error("metadata store unavailable: {detail} (endpoints: {endpoints})")]
    Unavailable { endpoints: String, detail: String },
    /// The store answered something this client does not understand.
    #[error(
        "metadata store answered unexpectedly: expected {expected}, found {found} (endpoint {endpoint})"
    )]
    Protocol {
        endpoint: String,
        expected: String,
        found: String,
    },
    /// The store refused the request (e.g. a lease that expired, a request too large).
    #[error("metadata store refused the request: {detail} (endpoint {endpoint})")]
    Refused { endpoint: String, detail: String },
    /// The embedded store's file is not what it writes.
    #[error("corrupt metadata file {path}: {detail}")]
    Corrupt { path: String, detail: String },
    /// Reading or persisting the embedded store's file failed.
    #[error("metadata file i/o failed: {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl MetaError {
    /// Failures a retry (on another endpoint, or later) may cure.
    pub fn is_retryable(&self) -> bool {
        matches!(self, MetaError::Unavailable { .. })
    }
}

/// The metadata store: etcd ([`etcd::EtcdStore`]) or the embedded one
/// ([`embedded::EmbeddedStore`]). Every call is linearizable: a read sees every write that
/// finished before it began.
pub trait MetaStore: Send + Sync + 'static {
    /// The key's current value, None when absent.
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<KeyValue>, MetaError>> + Send;

    /// Every key starting with `prefix`, in key order, and the store revision they were read at.
    fn scan_prefix(
        &self,
        prefix: &[u8],
    ) -> impl Future<Output = Result<(Vec<KeyValue>, u64), MetaError>> + Send;

    /// Runs `txn`: true when its compares held and its writes happened.
    fn txn(&self, txn: Txn) -> impl Future<Output = Result<bool, MetaError>> + Send;

    /// A new lease living `ttl` unless renewed.
    fn grant_lease(&self, ttl: Duration) -> impl Future<Output = Result<Lease, MetaError>> + Send;

    /// Renews `lease` for its full time to live; None when it has already expired (its keys are
    /// gone).
    fn keep_alive(
        &self,
        lease: LeaseId,
    ) -> impl Future<Output = Result<Option<Duration>, MetaError>> + Send;

    /// Ends `lease` now, deleting its keys (a clean step-down).
    fn revoke(&self, lease: LeaseId) -> impl Future<Output = Result<(), MetaError>> + Send;

    /// Where the store is, for messages (`etcd http://...`, `embedded /path`).
    fn describe(&self) -> String;
}

/// The end of the key range holding every key with `prefix` (etcd's `range_end`): the prefix
/// with its last byte below 0xff raised by one; an all-0xff prefix has no end (`[0]`: etcd's
/// "to the end of the keyspace").
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_raises_the_last_byte_below_ff() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        assert_eq!(prefix_end(&[0xff, 0xff]), vec![0]);
    }

    #[test]
    fn compares_on_an_absent_key() {
        assert!(Compare::absent("k").holds(None));
        assert!(Compare::mod_revision_is("k", 0).holds(None));
        assert!(!Compare::value_is("k", "").holds(None));
        let kv = KeyValue {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            create_revision: 3,
            mod_revision: 5,
            lease: 0,
        };
        assert!(!Compare::absent("k").holds(Some(&kv)));
        assert!(Compare::mod_revision_is("k", 5).holds(Some(&kv)));
        assert!(Compare::value_is("k", "v").holds(Some(&kv)));
    }
}
