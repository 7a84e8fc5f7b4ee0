//! The timestamp oracle (TSO): the one source of start and commit timestamps of a cluster.
//!
//! A timestamp is `physical_ms << 18 | logical` ([`types::Ts`] defines the layout): the wall clock in milliseconds and a counter
//! that orders up to 2^18 timestamps within one millisecond. Timestamps handed out are strictly
//! increasing, across threads and across restarts, even when the wall clock goes backwards:
//!
//! * in memory, the physical part never decreases: if the clock is behind the last physical
//!   value, the TSO keeps that value and counts logically; a logical overflow advances the
//!   physical part by one millisecond (running ahead of the clock until it catches up);
//! * on disk, a **high-water mark** (a physical millisecond value) is persisted *before* any
//!   timestamp at or above it is handed out: every timestamp issued so far has a physical part
//!   below the persisted mark. The mark is pushed a window (3 s by default) ahead of use, so
//!   the fsync happens about once per window, not once per timestamp. On open the TSO starts
//!   at the persisted mark, above everything a previous incarnation could have issued, however
//!   it died.
//!
//! The high-water file is replaced with the crash-safe pattern (temp + fsync + rename + fsync
//! of the directory), so it holds either the old mark or the new one. A file that does not
//! decode is an error, never a silent reset to the clock: resetting could reissue timestamps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use types::Ts;

/// Timestamps per physical millisecond (the layout is [`Ts`]'s, shared with the client).
pub const LOGICAL_PER_MS: u64 = Ts::LOGICAL_PER_MS;
/// The largest physical value a timestamp can hold (46 bits of milliseconds: ~2200 years).
pub const MAX_PHYSICAL_MS: u64 = Ts::MAX_PHYSICAL_MS;
/// How far ahead of use the high-water mark is persisted by default.
pub const DEFAULT_WINDOW_MS: u64 = 3000;

/// A source of wall-clock milliseconds, injected so tests can move time (backwards too).
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
}

/// The system clock (milliseconds since the Unix epoch).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before 1970 reads as 0: the TSO then counts logically from its mark.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that only moves when told to: for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(now_ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(now_ms))
    }

    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Failures of the timestamp oracle.
#[derive(Debug, thiserror::Error)]
pub enum TsoError {
    /// The high-water file exists but is not what this TSO writes.
    #[error("corrupt tso high-water file: {detail} path={path}", path = .path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// Reading the high-water file or creating its directory failed.
    #[error("tso i/o failed: {op} path={path}", path = .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Persisting a new high-water mark failed: no timestamp above the old mark is handed out.
    #[error("tso high-water mark not persisted: mark_ms={mark_ms} path={path}", path = .path.display())]
    Persist {
        path: PathBuf,
        mark_ms: u64,
        #[source]
        source: kvengine::Error,
    },
    /// The clock (or the persisted mark) does not fit the 46 physical bits.
    #[error("physical time out of range: expected at most {max} ms, found {found}")]
    PhysicalOutOfRange { found: u64, max: u64 },
    /// The cluster's TSO lives on another server and could not be asked (see `remote_tso`).
    #[error("remote tso failed: {detail} addr={addr}")]
    Remote { addr: String, detail: String },
    /// `get_ts_batch` was asked for no timestamps or more than one millisecond holds.
    #[error("invalid timestamp batch size: expected 1..={max}, found {found}")]
    InvalidBatch { found: u64, max: u64 },
}

/// Where timestamps come from: the cluster's one [`Tso`] in this process, or a client of the
/// one on another server (`remote_tso::RemoteTso`).
pub trait TimestampSource: Send + Sync + 'static {
    /// One timestamp, greater than every timestamp handed out before in the cluster.
    fn get_ts(&self) -> Result<u64, TsoError>;
}

impl TimestampSource for Tso {
    fn get_ts(&self) -> Result<u64, TsoError> {
        Tso::get_ts(self)
    }
}

/// Settings of the TSO.
#[derive(Debug, Clone, Copy)]
pub struct TsoOptions {
    /// How far ahead of the physical time in use the high-water mark is persisted. A bigger
    /// window means fewer fsyncs (one per window of issued time) but a bigger jump ahead of the
    /// wall clock after a restart within the window.
    pub window_ms: u64,
}

impl Default for TsoOptions {
    fn default() -> Self {
        TsoOptions {
            window_ms: DEFAULT_WINDOW_MS,
        }
    }
}

struct State {
    /// Physical part of the last timestamp issued (or the start mark after open).
    physical: u64,
    /// The logical value the next timestamp at `physical` gets.
    next_logical: u64,
    /// The persisted high-water mark: every issued timestamp has a physical part below it.
    persisted_until: u64,
}

/// The timestamp oracle. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Tso {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    window_ms: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for Tso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tso")
            .field("path", &self.path)
            .field("window_ms", &self.window_ms)
            .finish_non_exhaustive()
    }
}

/// High-water file layout, format version 1 (17 bytes, integers little-endian):
///
/// ```text
/// magic:"STSO" version:u8 (=1) mark_ms:u64 crc32:u32 (of the 13 bytes before it)
/// ```
const MAGIC: &[u8; 4] = b"STSO";
const FORMAT_VERSION: u8 = 1;
const FILE_LEN: usize = 17;

fn encode_mark(mark_ms: u64) -> [u8; FILE_LEN] {
    let mut out = [0u8; FILE_LEN];
    out[..4].copy_from_slice(MAGIC);
    out[4] = FORMAT_VERSION;
    out[5..13].copy_from_slice(&mark_ms.to_le_bytes());
    let crc = crc32fast::hash(&out[..13]);
    out[13..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode_mark(data: &[u8]) -> Result<u64, String> {
    if data.len() != FILE_LEN {
        return Err(format!("expected {FILE_LEN} bytes, found {}", data.len()));
    }
    if &data[..4] != MAGIC {
        return Err(format!("expected magic {MAGIC:?}, found {:?}", &data[..4]));
    }
    if data[4] != FORMAT_VERSION {
        return Err(format!(
            "expected format version {FORMAT_VERSION}, found {}",
            data[4]
        ));
    }
    let mut crc_bytes = [0u8; 4];
    crc_bytes.copy_from_slice(&data[13..17]);
    let stored = u32::from_le_bytes(crc_bytes);
    let computed = crc32fast::hash(&data[..13]);
    if stored != computed {
        return Err(format!(
            "expected crc32 {computed:#010x}, found {stored:#010x}"
        ));
    }
    let mut mark = [0u8; 8];
    mark.copy_from_slice(&data[5..13]);
    Ok(u64::from_le_bytes(mark))
}

impl Tso {
    /// Opens the TSO whose high-water mark lives in the file `path` (created on first use),
    /// on the system clock.
    pub fn open(path: impl Into<PathBuf>) -> Result<Tso, TsoError> {
        Tso::open_with(path, Arc::new(SystemClock), TsoOptions::default())
    }

    /// Opens the TSO with an injected clock and settings.
    pub fn open_with(
        path: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
        opts: TsoOptions,
    ) -> Result<Tso, TsoError> {
        let path = path.into();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| TsoError::Io {
                op: "create dir",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let mark = match std::fs::read(&path) {
            Ok(data) => decode_mark(&data).map_err(|detail| TsoError::Corrupt {
                path: path.clone(),
                detail,
            })?,
            // Never persisted: nothing was ever handed out from this file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => {
                return Err(TsoError::Io {
                    op: "read",
                    path,
                    source,
                });
            }
        };
        if mark > MAX_PHYSICAL_MS {
            return Err(TsoError::Corrupt {
                path,
                detail: format!("expected a mark of at most {MAX_PHYSICAL_MS} ms, found {mark}"),
            });
        }
        let tso = Tso {
            path,
            clock,
            window_ms: opts.window_ms.max(1),
            state: Mutex::new(State {
                physical: mark,
                next_logical: 0,
                persisted_until: mark,
            }),
        };
        // Persist a fresh mark now, so an unwritable directory fails the open, not a later
        // request.
        {
            let mut st = tso.state.lock();
            let now = tso.clock.now_ms().max(st.physical);
            tso.persist_locked(&mut st, now)?;
        }
        Ok(tso)
    }

    /// One timestamp, greater than every timestamp handed out before.
    pub fn get_ts(&self) -> Result<u64, TsoError> {
        self.get_ts_batch(1)
    }

    /// Reserves `n` consecutive timestamps (all with the same physical part) and returns the
    /// first; the caller owns `first..first + n`.
    pub fn get_ts_batch(&self, n: u32) -> Result<u64, TsoError> {
        let n = u64::from(n);
        if n == 0 || n > LOGICAL_PER_MS {
            return Err(TsoError::InvalidBatch {
                found: n,
                max: LOGICAL_PER_MS,
            });
        }
        let mut st = self.state.lock();
        let (physical, next_logical) =
            Ts::next_batch(st.physical, st.next_logical, self.clock.now_ms(), n);
        if physical > MAX_PHYSICAL_MS {
            return Err(TsoError::PhysicalOutOfRange {
                found: physical,
                max: MAX_PHYSICAL_MS,
            });
        }
        if physical >= st.persisted_until {
            // Nothing at `physical` may be handed out before the mark covering it is durable.
            self.persist_locked(&mut st, physical)?;
        }
        st.physical = physical;
        st.next_logical = next_logical + n;
        Ok(Ts::compose(physical, next_logical).get())
    }

    /// Persists `physical + window` as the new mark. Caller holds the state lock.
    fn persist_locked(&self, st: &mut State, physical: u64) -> Result<(), TsoError> {
        let mark = physical
            .saturating_add(self.window_ms)
            .min(MAX_PHYSICAL_MS + 1);
        kvengine::write_atomically(&self.path, &encode_mark(mark)).map_err(|source| {
            TsoError::Persist {
                path: self.path.clone(),
                mark_ms: mark,
                source,
            }
        })?;
        st.persisted_until = mark;
        Ok(())
    }

    /// The persisted high-water mark (physical milliseconds): no timestamp handed out so far
    /// has a physical part at or above it.
    pub fn persisted_mark_ms(&self) -> u64 {
        self.state.lock().persisted_until
    }

    /// Where the high-water mark is persisted.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_manual(dir: &Path, now: u64) -> (Arc<ManualClock>, Tso) {
        let clock = Arc::new(ManualClock::new(now));
        let tso = Tso::open_with(dir.join("tso"), clock.clone(), TsoOptions::default()).unwrap();
        (clock, tso)
    }

    #[test]
    fn ts_layout_puts_milliseconds_above_18_logical_bits() {
        let ts = Ts::compose(1_700_000_000_000, 5);
        assert_eq!(ts.physical_millis(), 1_700_000_000_000);
        assert_eq!(ts.logical(), 5);
        assert_eq!(ts.get(), (1_700_000_000_000 << 18) | 5);
    }

    #[test]
    fn timestamps_within_one_millisecond_count_logically() {
        let dir = tempfile::tempdir().unwrap();
        let (_clock, tso) = open_manual(dir.path(), 10_000);
        let a = tso.get_ts().unwrap();
        let b = tso.get_ts().unwrap();
        assert_eq!(Ts(a).physical_millis(), 10_000);
        assert_eq!(b, a + 1);
    }

    #[test]
    fn logical_overflow_advances_the_physical_part() {
        let dir = tempfile::tempdir().unwrap();
        let (_clock, tso) = open_manual(dir.path(), 10_000);
        let first = tso.get_ts_batch(LOGICAL_PER_MS as u32 - 1).unwrap();
        assert_eq!(first, Ts::compose(10_000, 0).get());
        let second = tso.get_ts_batch(2).unwrap();
        assert_eq!(second, Ts::compose(10_001, 0).get());
        assert!(second > first + LOGICAL_PER_MS - 2);
    }

    #[test]
    fn clock_going_backwards_in_process_keeps_increasing() {
        let dir = tempfile::tempdir().unwrap();
        let (clock, tso) = open_manual(dir.path(), 50_000);
        let a = tso.get_ts().unwrap();
        clock.set(20_000);
        let b = tso.get_ts().unwrap();
        assert!(b > a, "{b} after {a}");
        assert_eq!(Ts(b).physical_millis(), 50_000);
    }

    #[test]
    fn mark_is_persisted_ahead_of_every_issued_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let (clock, tso) = open_manual(dir.path(), 10_000);
        for step in 0..10 {
            let ts = tso.get_ts().unwrap();
            let on_disk = decode_mark(&std::fs::read(dir.path().join("tso")).unwrap()).unwrap();
            assert!(
                Ts(ts).physical_millis() < on_disk,
                "step {step}: ts physical {} not below persisted {on_disk}",
                Ts(ts).physical_millis()
            );
            clock.advance(1700);
        }
    }

    #[test]
    fn batch_size_zero_or_above_one_millisecond_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let (_clock, tso) = open_manual(dir.path(), 10_000);
        assert!(matches!(
            tso.get_ts_batch(0),
            Err(TsoError::InvalidBatch { found: 0, .. })
        ));
        assert!(matches!(
            tso.get_ts_batch(LOGICAL_PER_MS as u32 + 1),
            Err(TsoError::InvalidBatch { .. })
        ));
    }

    #[test]
    fn mark_encoding_round_trips_and_rejects_every_flipped_byte() {
        let enc = encode_mark(123_456_789);
        assert_eq!(decode_mark(&enc).unwrap(), 123_456_789);
        for i in 0..enc.len() {
            let mut bad = enc;
            bad[i] ^= 0x40;
            assert!(decode_mark(&bad).is_err(), "flipped byte {i} accepted");
        }
    }
}
