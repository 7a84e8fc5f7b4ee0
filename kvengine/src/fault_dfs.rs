//! A fault-injecting object store for tests: wraps any [`Dfs`] and, per operation, fails the
//! next N calls, loses the reply of the next N calls (the inner operation happens, the caller
//! sees an error, as when a connection drops after the server committed a PUT), or delays every
//! call. Faults are set and cleared while the store is in use, from any thread.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use types::FileId;

use crate::dfs::Dfs;
use crate::error::{Error, Result};

/// An object-store operation, to aim a fault at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DfsOp {
    Put,
    Get,
    GetRange,
    Delete,
    List,
}

impl DfsOp {
    pub const ALL: [DfsOp; 5] = [
        DfsOp::Put,
        DfsOp::Get,
        DfsOp::GetRange,
        DfsOp::Delete,
        DfsOp::List,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DfsOp::Put => "put",
            DfsOp::Get => "get",
            DfsOp::GetRange => "get_range",
            DfsOp::Delete => "delete",
            DfsOp::List => "list",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Faults armed for one operation, and what happened so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpFaults {
    /// The next this-many calls fail without reaching the inner store.
    pub fail: u32,
    /// After those, the next this-many calls reach the inner store and then fail.
    pub lose_reply: u32,
    /// Every call waits this long before doing anything.
    pub delay: Duration,
    /// Calls seen (faulty or not).
    pub calls: u64,
    /// Calls that returned an injected error.
    pub injected: u64,
}

/// Wraps `D`, injecting the faults armed per [`DfsOp`].
pub struct FaultDfs<D: Dfs> {
    inner: D,
    faults: Mutex<[OpFaults; 5]>,
}

/// What one call does, decided under the lock and carried out after it.
enum Fate {
    Fail,
    LoseReply,
    Pass,
}

impl<D: Dfs> FaultDfs<D> {
    pub fn new(inner: D) -> FaultDfs<D> {
        FaultDfs {
            inner,
            faults: Mutex::new([OpFaults::default(); 5]),
        }
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The next `n` calls of `op` fail before reaching the inner store.
    pub fn fail_next(&self, op: DfsOp, n: u32) {
        self.faults.lock()[op.index()].fail = n;
    }

    /// The next `n` calls of `op` (after any armed failures) reach the inner store, then fail.
    pub fn lose_reply_next(&self, op: DfsOp, n: u32) {
        self.faults.lock()[op.index()].lose_reply = n;
    }

    /// Every later call of `op` waits `delay` first (zero turns it off).
    pub fn set_delay(&self, op: DfsOp, delay: Duration) {
        self.faults.lock()[op.index()].delay = delay;
    }

    /// Disarms every fault of every operation (counters stay).
    pub fn clear(&self) {
        for f in self.faults.lock().iter_mut() {
            f.fail = 0;
            f.lose_reply = 0;
            f.delay = Duration::ZERO;
        }
    }

    /// Armed faults and counters of `op`.
    pub fn stats(&self, op: DfsOp) -> OpFaults {
        self.faults.lock()[op.index()]
    }

    fn call<T>(&self, op: DfsOp, file_id: FileId, f: impl FnOnce(&D) -> Result<T>) -> Result<T> {
        let (fate, delay) = {
            let mut all = self.faults.lock();
            let s = &mut all[op.index()];
            s.calls += 1;
            let fate = if s.fail > 0 {
                s.fail -= 1;
                s.injected += 1;
                Fate::Fail
            } else if s.lose_reply > 0 {
                s.lose_reply -= 1;
                s.injected += 1;
                Fate::LoseReply
            } else {
                Fate::Pass
            };
            (fate, s.delay)
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let injected = |what: &str| Error::Dfs {
            op: op.name(),
            file_id,
            source: io::Error::new(
                io::ErrorKind::ConnectionReset,
                format!("injected fault: {what}"),
            ),
        };
        match fate {
            Fate::Fail => Err(injected("request failed")),
            Fate::LoseReply => {
                let outcome = f(&self.inner).map(drop);
                Err(injected(if outcome.is_ok() {
                    "reply lost after success"
                } else {
                    "reply lost after failure"
                }))
            }
            Fate::Pass => f(&self.inner),
        }
    }
}

impl<D: Dfs> Dfs for FaultDfs<D> {
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
        self.call(DfsOp::Put, file_id, |d| d.put(file_id, data))
    }

    fn get(&self, file_id: FileId) -> Result<Bytes> {
        self.call(DfsOp::Get, file_id, |d| d.get(file_id))
    }

    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes> {
        self.call(DfsOp::GetRange, file_id, |d| {
            d.get_range(file_id, offset, len)
        })
    }

    fn note_use(&self, file_id: FileId) {
        self.inner.note_use(file_id);
    }

    fn delete(&self, file_id: FileId) -> Result<()> {
        self.call(DfsOp::Delete, file_id, |d| d.delete(file_id))
    }

    fn list(&self) -> Result<Vec<FileId>> {
        self.call(DfsOp::List, FileId::default(), |d| d.list())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfs::LocalDfs;

    #[test]
    fn armed_faults_fire_in_order_then_calls_pass() {
        let dir = tempfile::tempdir().unwrap();
        let dfs = FaultDfs::new(LocalDfs::open(dir.path()).unwrap());
        dfs.fail_next(DfsOp::Put, 1);
        dfs.lose_reply_next(DfsOp::Put, 1);
        assert!(dfs.put(FileId(1), Bytes::from_static(b"a")).is_err());
        assert!(
            dfs.inner().list().unwrap().is_empty(),
            "a failed put stores nothing"
        );
        assert!(dfs.put(FileId(1), Bytes::from_static(b"a")).is_err());
        assert_eq!(
            dfs.inner().list().unwrap(),
            vec![FileId(1)],
            "a lost reply stores the file"
        );
        dfs.put(FileId(1), Bytes::from_static(b"a")).unwrap();
        let s = dfs.stats(DfsOp::Put);
        assert_eq!((s.calls, s.injected, s.fail, s.lose_reply), (3, 2, 0, 0));
        assert_eq!(dfs.stats(DfsOp::Get).calls, 0);
    }
}
