//! The concurrency manager: `max_ts` and in-memory locks, the two things that let a commit
//! timestamp be chosen on the server (1PC and async commit) without breaking snapshot reads.
//!
//! **The guarantee**: a read at `start_ts` either sees a transaction's lock (in memory or in
//! the engine) or that transaction's commit_ts is above `start_ts`. Without it, a reader could
//! take its snapshot just before a 1PC or async-commit prewrite applies, miss the lock, and
//! later see the transaction committed at a ts at or below its own start_ts: a non-repeatable
//! read.
//!
//! How it holds (see [`ConcurrencyManager::lock_keys`] and
//! [`ConcurrencyManager::check_memory_locks`]):
//! * a reader first raises `max_ts` to its start_ts (SeqCst), then looks for memory locks under
//!   the table mutex, then takes its engine snapshot;
//! * a prewrite inserts its memory locks and reads `max_ts` inside one critical section of the
//!   same mutex, computes `min_commit_ts = max(max_ts + 1, start_ts + 1)` there, writes its
//!   locks (or, for 1PC, its commit records) to the engine, and only then removes the memory
//!   locks.
//!
//! The mutex orders the reader's check and the prewrite's insert. If the check comes second it
//! finds the memory lock (or, once the guard is gone, the engine lock or record, since the
//! engine write finished before the removal). If the check comes first, the reader's
//! `fetch_max` happened before the prewrite's critical section, so the prewrite reads a
//! `max_ts >= start_ts` and every commit_ts it allows is `> start_ts`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kvengine::mvcc::{Lock, LockInfo, LockType, lock_blocks_read};
use parking_lot::Mutex;

/// One in-memory lock: the lock a prewrite is about to write, owned by one guard.
#[derive(Debug, Clone)]
struct MemLock {
    owner: u64,
    lock: Lock,
}

#[derive(Debug, Default)]
struct Table {
    locks: BTreeMap<Vec<u8>, MemLock>,
    next_owner: u64,
}

/// `max_ts` and the memory-lock table of one storage server. Shared behind an `Arc`.
#[derive(Debug, Default)]
pub struct ConcurrencyManager {
    max_ts: AtomicU64,
    table: Mutex<Table>,
}

impl ConcurrencyManager {
    pub fn new() -> Arc<ConcurrencyManager> {
        Arc::new(ConcurrencyManager::default())
    }

    /// The highest start_ts (or other timestamp) any read or command has announced.
    pub fn max_ts(&self) -> u64 {
        self.max_ts.load(Ordering::SeqCst)
    }

    /// Raises `max_ts` to at least `ts`.
    pub fn update_max_ts(&self, ts: u64) {
        self.max_ts.fetch_max(ts, Ordering::SeqCst);
    }

    /// Puts in-memory locks on `keys` (each with its own lock type) and returns a guard that
    /// removes them when dropped. `make_lock` gets `max_ts` as read inside the same critical
    /// section as the insert, and returns the lock every key gets (its `lock_type` replaced by
    /// the key's). That ordering is the whole point: see the module docs.
    ///
    /// Callers hold latches on `keys`, so no other guard holds one of them; if one did, its
    /// entry would be replaced, and restored to nobody: each guard removes only its own.
    pub fn lock_keys(
        self: &Arc<Self>,
        keys: &[(Vec<u8>, LockType)],
        make_lock: impl FnOnce(u64) -> Lock,
    ) -> MemLockGuard {
        let mut table = self.table.lock();
        let max_ts = self.max_ts.load(Ordering::SeqCst);
        let lock = make_lock(max_ts);
        table.next_owner += 1;
        let owner = table.next_owner;
        for (key, lock_type) in keys {
            let mut l = lock.clone();
            l.lock_type = *lock_type;
            let previous = table.locks.insert(key.clone(), MemLock { owner, lock: l });
            debug_assert!(
                previous.is_none(),
                "memory lock on a key another command holds: latches not taken?"
            );
        }
        MemLockGuard {
            cm: self.clone(),
            owner,
            keys: keys.iter().map(|(k, _)| k.clone()).collect(),
            lock,
        }
    }

    /// Raises `max_ts` to `start_ts`, then fails with the first memory lock in `ranges` that
    /// blocks a read at `start_ts` (see [`lock_blocks_read`]). A range is `[start, end)`, an
    /// empty `end` meaning unbounded. Call it before taking the engine snapshot.
    pub fn check_memory_locks(
        &self,
        ranges: &[(&[u8], &[u8])],
        start_ts: u64,
        bypass: &[u64],
    ) -> Result<(), Box<LockInfo>> {
        // Before the mutex: a prewrite whose critical section follows ours must see it.
        self.max_ts.fetch_max(start_ts, Ordering::SeqCst);
        let table = self.table.lock();
        if table.locks.is_empty() {
            return Ok(());
        }
        for &(start, end) in ranges {
            if !end.is_empty() && start >= end {
                continue;
            }
            let range = table.locks.range::<[u8], _>((
                std::ops::Bound::Included(start),
                if end.is_empty() {
                    std::ops::Bound::Unbounded
                } else {
                    std::ops::Bound::Excluded(end)
                },
            ));
            for (key, m) in range {
                if lock_blocks_read(&m.lock, start_ts, bypass) {
                    return Err(Box::new(m.lock.info(key)));
                }
            }
        }
        Ok(())
    }

    /// [`ConcurrencyManager::check_memory_locks`] for one key.
    pub fn check_key(
        &self,
        key: &[u8],
        start_ts: u64,
        bypass: &[u64],
    ) -> Result<(), Box<LockInfo>> {
        self.max_ts.fetch_max(start_ts, Ordering::SeqCst);
        let table = self.table.lock();
        match table.locks.get(key) {
            Some(m) if lock_blocks_read(&m.lock, start_ts, bypass) => {
                Err(Box::new(m.lock.info(key)))
            }
            _ => Ok(()),
        }
    }

    /// The memory lock on `key`, if any (for tests and diagnostics).
    pub fn memory_lock(&self, key: &[u8]) -> Option<Lock> {
        self.table.lock().locks.get(key).map(|m| m.lock.clone())
    }

    /// Number of keys under a memory lock.
    pub fn memory_lock_count(&self) -> usize {
        self.table.lock().locks.len()
    }
}

/// The leader's side of a follower read (`raftstore::replica_read`): the follower's reader is
/// checked here as a reader on the leader would be, `max_ts` raised first.
impl raftstore::ReplicaReadCheck for ConcurrencyManager {
    fn check(
        &self,
        _region_id: u64,
        start_ts: u64,
        ranges: &[wire::coprocessor::KeyRange],
    ) -> Option<wire::coprocessor::LockInfo> {
        let ranges: Vec<(&[u8], &[u8])> = ranges
            .iter()
            .map(|r| (r.start.as_slice(), r.end.as_slice()))
            .collect();
        self.check_memory_locks(&ranges, start_ts, &[])
            .err()
            .map(|lock| cop::handler::lock_info(&lock))
    }
}

/// Memory locks of one command; removed when dropped (after the engine write).
#[derive(Debug)]
pub struct MemLockGuard {
    cm: Arc<ConcurrencyManager>,
    owner: u64,
    keys: Vec<Vec<u8>>,
    lock: Lock,
}

impl MemLockGuard {
    /// The lock `make_lock` built (with the type of no particular key).
    pub fn lock(&self) -> &Lock {
        &self.lock
    }
}

impl Drop for MemLockGuard {
    fn drop(&mut self) {
        let mut table = self.cm.table.lock();
        for key in &self.keys {
            if table.locks.get(key).is_some_and(|m| m.owner == self.owner) {
                table.locks.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(start_ts: u64, min_commit_ts: u64) -> Lock {
        Lock {
            lock_type: LockType::Put,
            primary: b"p".to_vec(),
            start_ts,
            ttl_ms: 1000,
            min_commit_ts,
            txn_size: 1,
            value: None,
            secondaries: Some(Vec::new()),
        }
    }

    #[test]
    fn lock_keys_sees_max_ts_raised_by_an_earlier_read() {
        let cm = ConcurrencyManager::new();
        cm.check_memory_locks(&[(b"a", b"b")], 100, &[]).unwrap();
        let g = cm.lock_keys(&[(b"k".to_vec(), LockType::Put)], |max_ts| {
            lock(10, max_ts.max(10) + 1)
        });
        assert_eq!(g.lock().min_commit_ts, 101);
    }

    #[test]
    fn read_in_range_meets_a_blocking_memory_lock_until_the_guard_drops() {
        let cm = ConcurrencyManager::new();
        let g = cm.lock_keys(&[(b"k".to_vec(), LockType::Put)], |_| lock(10, 11));
        let err = cm
            .check_memory_locks(&[(b"a".as_slice(), b"z".as_slice())], 20, &[])
            .unwrap_err();
        assert_eq!(err.key, b"k");
        assert_eq!(err.start_ts, 10);
        assert!(cm.check_key(b"k", 20, &[]).is_err());
        // Outside the range, below min_commit_ts, or bypassed: not blocking.
        cm.check_memory_locks(&[(b"l".as_slice(), b"".as_slice())], 20, &[])
            .unwrap();
        cm.check_key(b"k", 10, &[]).unwrap();
        cm.check_key(b"k", 20, &[10]).unwrap();
        drop(g);
        cm.check_key(b"k", 20, &[]).unwrap();
        assert_eq!(cm.memory_lock_count(), 0);
    }

    #[test]
    fn a_followers_read_checked_here_raises_max_ts_and_reports_a_memory_lock_in_its_ranges() {
        use raftstore::ReplicaReadCheck;
        use wire::coprocessor::KeyRange;
        let range = |start: &[u8], end: &[u8]| KeyRange {
            start: start.to_vec(),
            end: end.to_vec(),
        };
        let cm = ConcurrencyManager::new();
        assert_eq!(cm.check(1, 100, &[range(b"a", b"z")]), None);
        // A prewrite after the check commits above the follower's start_ts.
        let g = cm.lock_keys(&[(b"k".to_vec(), LockType::Put)], |max_ts| {
            lock(10, max_ts.max(10) + 1)
        });
        assert_eq!(g.lock().min_commit_ts, 101);
        let found = cm
            .check(1, 200, &[range(b"a", b"z")])
            .expect("the lock on k");
        assert_eq!(found.key, b"k".to_vec());
        assert_eq!(found.lock_version, 10);
        assert_eq!(found.min_commit_ts, 101);
        assert_eq!(cm.max_ts(), 200);
        assert_eq!(cm.check(1, 200, &[range(b"l", b"")]), None);
        drop(g);
        assert_eq!(cm.check(1, 200, &[range(b"a", b"z")]), None);
    }

    #[test]
    fn lock_type_lock_never_blocks_reads() {
        let cm = ConcurrencyManager::new();
        let _g = cm.lock_keys(&[(b"k".to_vec(), LockType::Lock)], |_| lock(10, 11));
        cm.check_key(b"k", 20, &[]).unwrap();
        assert_eq!(cm.memory_lock(b"k").unwrap().lock_type, LockType::Lock);
    }

    #[test]
    fn update_max_ts_never_lowers_it() {
        let cm = ConcurrencyManager::new();
        cm.update_max_ts(50);
        cm.update_max_ts(40);
        assert_eq!(cm.max_ts(), 50);
    }
}
