//! Group commit: concurrent appenders share one fdatasync.
//!
//! Every append gets a ticket (the count of records appended so far, its own included). An
//! appender whose ticket is not yet durable either becomes the leader — if no sync is running
//! — or waits. The leader notes the newest ticket appended so far, syncs the file outside every
//! lock, then publishes that ticket as durable and wakes the waiters. A waiter whose ticket is
//! still not covered (it was appended after the leader started) leads the next round, which
//! covers every appender that arrived in the meantime: under load, one sync per round instead
//! of one per append.
//!
//! A failed sync may have lost data that no later sync brings back (the kernel can drop the
//! dirty pages), so it is final: every appender not already covered gets an error, and so does
//! every later one.

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct State {
    /// Every ticket up to this one is durable.
    durable: u64,
    /// A leader is syncing.
    syncing: bool,
    /// A sync failed; nothing becomes durable any more.
    failed: bool,
}

/// The rendezvous of appenders waiting for a shared sync.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    synced: Condvar,
}

impl GroupCommit {
    /// Returns once `ticket` is durable. `sync` is called by the leader without any lock of
    /// this type held: it must make durable every record appended so far and return the
    /// newest ticket it covered (read before syncing).
    pub(crate) fn wait_durable(
        &self,
        ticket: u64,
        mut sync: impl FnMut() -> Result<u64>,
    ) -> Result<()> {
        let mut state = self.state.lock();
        loop {
            if state.durable >= ticket {
                return Ok(());
            }
            if state.failed {
                return Err(failed_earlier());
            }
            if state.syncing {
                self.synced.wait(&mut state);
                continue;
            }
            state.syncing = true;
            let outcome = MutexGuard::unlocked(&mut state, &mut sync);
            state.syncing = false;
            self.synced.notify_all();
            match outcome {
                Ok(covered) => state.durable = state.durable.max(covered),
                Err(e) => {
                    state.failed = true;
                    return Err(e);
                }
            }
        }
    }
}

/// The error of an appender whose record a failed sync should have covered.
pub(crate) fn failed_earlier() -> Error {
    Error::Closed {
        reason: "an earlier wal write or fsync failed; reopen to recover".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn a_sync_covers_tickets_appended_before_it_started() {
        let group = GroupCommit::default();
        let mut calls = 0;
        group
            .wait_durable(3, || {
                calls += 1;
                Ok(5)
            })
            .unwrap();
        // Tickets 4 and 5 were covered by the same sync.
        group.wait_durable(5, || unreachable!()).unwrap();
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_failed_sync_fails_every_later_waiter() {
        let group = GroupCommit::default();
        let err = group.wait_durable(1, || Err(failed_earlier())).unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Closed);
        assert!(group.wait_durable(2, || Ok(2)).is_err());
    }

    #[test]
    fn concurrent_waiters_return_only_once_covered_and_share_syncs() {
        const THREADS: u64 = 8;
        const APPENDS: u64 = 100;
        let group = Arc::new(GroupCommit::default());
        let appended = Arc::new(AtomicU64::new(0));
        let synced = Arc::new(AtomicU64::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (group, appended, synced, syncs) = (
                    group.clone(),
                    appended.clone(),
                    synced.clone(),
                    syncs.clone(),
                );
                std::thread::spawn(move || {
                    for _ in 0..APPENDS {
                        let ticket = appended.fetch_add(1, Ordering::SeqCst) + 1;
                        group
                            .wait_durable(ticket, || {
                                syncs.fetch_add(1, Ordering::SeqCst);
                                let covered = appended.load(Ordering::SeqCst);
                                // A slow device: appenders arrive while the sync runs.
                                std::thread::sleep(std::time::Duration::from_millis(2));
                                synced.fetch_max(covered, Ordering::SeqCst);
                                Ok(covered)
                            })
                            .unwrap();
                        let durable = synced.load(Ordering::SeqCst);
                        assert!(durable >= ticket, "ticket {ticket} returned at {durable}");
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let syncs = syncs.load(Ordering::SeqCst);
        // One sync per append would be 800; with 8 appenders and a 2 ms sync a round covers
        // several of them. Half as many syncs as appends leaves room for a loaded machine.
        assert!(
            syncs <= THREADS * APPENDS / 2,
            "group commit did not group: syncs={syncs} appends={}",
            THREADS * APPENDS
        );
    }
}
