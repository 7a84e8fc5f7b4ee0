//! Striped latches: commands that touch the same keys run one at a time between their checks
//! (lock present? newer write?) and their engine write, so a check is still true when the
//! write lands.
//!
//! A key maps to one of a fixed number of slots by hash; a command takes the slots of all its
//! keys in ascending slot order (each once), so two commands never wait on each other in a
//! cycle. Different keys may share a slot: that only serializes more than needed.

use parking_lot::{Mutex, MutexGuard};
use xxhash_rust::xxh3::xxh3_64;

/// Slots of a storage server's latch table by default.
pub const DEFAULT_SLOTS: usize = 2048;

pub struct Latches {
    slots: Box<[Mutex<()>]>,
}

impl std::fmt::Debug for Latches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latches")
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl Default for Latches {
    fn default() -> Self {
        Latches::new(DEFAULT_SLOTS)
    }
}

impl Latches {
    /// A table of `slots` latches (at least one).
    pub fn new(slots: usize) -> Latches {
        Latches {
            slots: (0..slots.max(1)).map(|_| Mutex::new(())).collect(),
        }
    }

    fn slot_of(&self, key: &[u8]) -> usize {
        (xxh3_64(key) % self.slots.len() as u64) as usize
    }

    /// Blocks until this caller holds the latches of every key; they are released when the
    /// guard drops.
    pub fn acquire<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: impl IntoIterator<Item = K>,
    ) -> LatchGuard<'a> {
        let mut slots: Vec<usize> = keys.into_iter().map(|k| self.slot_of(k.as_ref())).collect();
        slots.sort_unstable();
        slots.dedup();
        LatchGuard {
            _held: slots.into_iter().map(|s| self.slots[s].lock()).collect(),
        }
    }
}

/// Latches held by one command.
pub struct LatchGuard<'a> {
    _held: Vec<MutexGuard<'a, ()>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn same_key_commands_are_serialized() {
        let latches = Arc::new(Latches::new(16));
        let counter = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (latches, counter) = (latches.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        let _g = latches.acquire([b"k".as_slice(), b"other".as_slice()]);
                        // A non-atomic read-modify-write: lost updates if not serialized.
                        let v = counter.load(Ordering::Relaxed);
                        std::thread::yield_now();
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 2000);
    }

    #[test]
    fn keys_sharing_a_slot_do_not_deadlock_and_still_exclude_others() {
        use std::sync::mpsc;
        use std::time::Duration;
        // One slot: every key collides, and a command naming a key twice takes it once.
        let latches = Arc::new(Latches::new(1));
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let latches = latches.clone();
            std::thread::spawn(move || {
                let _g = latches.acquire([b"a".as_slice(), b"b".as_slice(), b"a".as_slice()]);
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
        };
        held_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a command naming colliding keys deadlocked on itself");
        // Another command on a colliding key waits until the holder is done.
        let (got_tx, got_rx) = mpsc::channel();
        let other = {
            let latches = latches.clone();
            std::thread::spawn(move || {
                let _g = latches.acquire([b"c".as_slice()]);
                got_tx.send(()).unwrap();
            })
        };
        assert!(
            got_rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "a colliding command ran while the slot was held"
        );
        release_tx.send(()).unwrap();
        got_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the waiting command never got the slot");
        holder.join().unwrap();
        other.join().unwrap();
    }
}
