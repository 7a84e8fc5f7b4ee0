//! The embedded metadata store: etcd's semantics (revisions, compare-and-write transactions,
//! leases) in this process, for a cluster on one machine (`stratus up`, the demo), so the
//! README's main job needs nothing installed. It is not replicated: it survives a restart of
//! its process (every write is persisted before it is answered), not the loss of its machine.
//! A cluster of machines uses etcd.
//!
//! Leases live in memory: after a restart every lease is gone and its keys with it, as if its
//! owners had stopped renewing (they re-register, as they would after an etcd lease expired).
//!
//! One process at a time: `open` takes an exclusive lock on `<file>.lock` (held until the
//! store is dropped), so a second instance on the same directory (an overlapping restart, a
//! second `stratus up`) is refused instead of handing out the same timestamps. A write is
//! applied to a copy of the state, persisted, and only then made visible: a failed write
//! changes nothing.
//!
//! File layout, format version 1 (integers little-endian), replaced whole on every write with
//! temp + fsync + rename + fsync of the directory, so it holds the state before or after a
//! write, never a mix:
//!
//! ```text
//! magic:"SPDM" version:u8 (=1) revision:u64 next_lease:i64 count:u32
//! count × { key_len:u32 key value_len:u32 value create_revision:u64 mod_revision:u64 }
//! crc32:u32 (of every byte before it)
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{KeyValue, Lease, LeaseId, MetaError, MetaStore, Txn};

const MAGIC: &[u8; 4] = b"SPDM";
const FORMAT_VERSION: u8 = 1;
/// magic + version + revision + next_lease + count.
const HEADER_LEN: usize = 4 + 1 + 8 + 8 + 4;

#[derive(Clone, Debug, Default)]
struct State {
    revision: u64,
    next_lease: LeaseId,
    keys: BTreeMap<Vec<u8>, KeyValue>,
    /// Live leases: their deadline and time to live.
    leases: HashMap<LeaseId, (Instant, Duration)>,
}

impl State {
    /// Deletes the keys of every lease past its deadline (one revision for all of them).
    fn expire(&mut self, now: Instant) -> bool {
        let expired: Vec<LeaseId> = self
            .leases
            .iter()
            .filter(|(_, (deadline, _))| *deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        if expired.is_empty() {
            return false;
        }
        for id in &expired {
            self.leases.remove(id);
        }
        let before = self.keys.len();
        self.keys.retain(|_, kv| !expired.contains(&kv.lease));
        if self.keys.len() != before {
            self.revision += 1;
            return true;
        }
        false
    }
}

/// The embedded store; cheap to clone (clones share the state).
#[derive(Clone, Debug)]
pub struct EmbeddedStore {
    state: Arc<Mutex<State>>,
    /// None: in memory only (tests).
    path: Option<PathBuf>,
    /// The exclusive lock on `<file>.lock`, released when the last clone is dropped.
    _lock: Option<Arc<std::fs::File>>,
}

impl EmbeddedStore {
    /// A store in memory only.
    pub fn in_memory() -> EmbeddedStore {
        EmbeddedStore {
            state: Arc::new(Mutex::new(State {
                next_lease: 1,
                ..State::default()
            })),
            path: None,
            _lock: None,
        }
    }

    /// Opens (or creates) the store persisted at `path`. A file that does not decode is an
    /// error, never a fresh start: starting over would forget the TSO's mark and reissue
    /// timestamps.
    pub fn open(path: &Path) -> Result<EmbeddedStore, MetaError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| MetaError::Io {
                op: "create directory",
                path: dir.display().to_string(),
                source,
            })?;
        }
        let lock_path = path.with_extension("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| MetaError::Io {
                op: "open lock",
                path: lock_path.display().to_string(),
                source,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(MetaError::Refused {
                    endpoint: format!("embedded {shown}"),
                    detail: format!(
                        "another process holds {}: one placement-driver instance per embedded store",
                        lock_path.display()
                    ),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(MetaError::Io {
                    op: "lock",
                    path: lock_path.display().to_string(),
                    source,
                });
            }
        }
        let state = match std::fs::read(path) {
            Ok(bytes) => decode(&bytes).map_err(|detail| MetaError::Corrupt {
                path: shown.clone(),
                detail,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State {
                next_lease: 1,
                ..State::default()
            },
            Err(source) => {
                return Err(MetaError::Io {
                    op: "read",
                    path: shown,
                    source,
                });
            }
        };
        Ok(EmbeddedStore {
            state: Arc::new(Mutex::new(state)),
            path: Some(path.to_path_buf()),
            _lock: Some(Arc::new(lock)),
        })
    }

    /// Runs `f` on a copy of the state with expired leases removed; when `f` (or the expiry)
    /// changed it, the copy is persisted and only then replaces the state, so a failed write
    /// leaves nothing visible. The file is written under the lock, so writes reach it in
    /// revision order.
    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> (T, bool)) -> Result<T, MetaError> {
        let mut state = self.state.lock();
        let mut next = state.clone();
        let expired = next.expire(Instant::now());
        let (out, changed) = f(&mut next);
        if changed || expired {
            self.persist(&next)?;
        }
        // Also what needs no file write (a renewed lease's deadline).
        *state = next;
        Ok(out)
    }

    /// Runs a read `f` on the state itself, without a copy, unless a lease expired (then the
    /// expiry goes through [`EmbeddedStore::with_state`] first).
    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> Result<T, MetaError> {
        {
            let state = self.state.lock();
            let now = Instant::now();
            if !state.leases.values().any(|(deadline, _)| *deadline <= now) {
                return Ok(f(&state));
            }
        }
        self.with_state(|s| (f(s), false))
    }

    fn persist(&self, state: &State) -> Result<(), MetaError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let bytes = encode(state);
        write_replace(path, &bytes).map_err(|(op, source)| MetaError::Io {
            op,
            path: path.display().to_string(),
            source,
        })
    }

    /// The store-wide revision (for tests and `stratus ctl`).
    pub fn revision(&self) -> u64 {
        self.state.lock().revision
    }
}

impl MetaStore for EmbeddedStore {
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>, MetaError> {
        self.read(|s| s.keys.get(key).cloned())
    }

    async fn scan_prefix(&self, prefix: &[u8]) -> Result<(Vec<KeyValue>, u64), MetaError> {
        self.read(|s| {
            let kvs = s
                .keys
                .range(prefix.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(_, kv)| kv.clone())
                .collect();
            (kvs, s.revision)
        })
    }

    async fn txn(&self, txn: Txn) -> Result<bool, MetaError> {
        let endpoint = self.describe();
        self.with_state(|s| {
            if !txn.compares.iter().all(|c| c.holds(s.keys.get(&c.key))) {
                return (Ok(false), false);
            }
            for op in &txn.writes {
                if let super::Op::Put { lease, .. } = op
                    && *lease != 0
                    && !s.leases.contains_key(lease)
                {
                    return (
                        Err(MetaError::Refused {
                            endpoint: endpoint.clone(),
                            detail: format!("lease {lease} not found (expired or revoked)"),
                        }),
                        false,
                    );
                }
            }
            // Like etcd, a transaction that changes nothing (no writes, or deletes of absent
            // keys only) takes no revision.
            if !txn.writes.iter().any(|op| match op {
                super::Op::Put { .. } => true,
                super::Op::Delete { key } => s.keys.contains_key(key),
            }) {
                return (Ok(true), false);
            }
            s.revision += 1;
            let revision = s.revision;
            for op in txn.writes {
                match op {
                    super::Op::Put { key, value, lease } => {
                        let create_revision =
                            s.keys.get(&key).map_or(revision, |kv| kv.create_revision);
                        s.keys.insert(
                            key.clone(),
                            KeyValue {
                                key,
                                value,
                                create_revision,
                                mod_revision: revision,
                                lease,
                            },
                        );
                    }
                    super::Op::Delete { key } => {
                        s.keys.remove(&key);
                    }
                }
            }
            (Ok(true), true)
        })?
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, MetaError> {
        self.with_state(|s| {
            let id = s.next_lease;
            s.next_lease += 1;
            s.leases.insert(id, (Instant::now() + ttl, ttl));
            // The lease counter is persisted so a restarted store never reuses an id that a
            // forgotten owner could still renew.
            (Lease { id, ttl }, true)
        })
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Option<Duration>, MetaError> {
        // A renewal writes no file: it moves the deadline in place, unless some lease expired
        // (that deletes keys, which goes through a persisted copy first).
        self.read(|_| ())?;
        let mut state = self.state.lock();
        Ok(state.leases.get_mut(&lease).map(|(deadline, ttl)| {
            *deadline = Instant::now() + *ttl;
            *ttl
        }))
    }

    async fn revoke(&self, lease: LeaseId) -> Result<(), MetaError> {
        self.with_state(|s| {
            if s.leases.remove(&lease).is_none() {
                return ((), false);
            }
            let before = s.keys.len();
            s.keys.retain(|_, kv| kv.lease != lease);
            let changed = s.keys.len() != before;
            if changed {
                s.revision += 1;
            }
            ((), changed)
        })
    }

    fn describe(&self) -> String {
        match &self.path {
            Some(p) => format!("embedded {}", p.display()),
            None => "embedded (memory)".into(),
        }
    }
}

fn encode(state: &State) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + 64 * state.keys.len());
    out.extend_from_slice(MAGIC);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&state.revision.to_le_bytes());
    out.extend_from_slice(&state.next_lease.to_le_bytes());
    let kept: Vec<&KeyValue> = state.keys.values().filter(|kv| kv.lease == 0).collect();
    out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
    for kv in kept {
        out.extend_from_slice(&(kv.key.len() as u32).to_le_bytes());
        out.extend_from_slice(&kv.key);
        out.extend_from_slice(&(kv.value.len() as u32).to_le_bytes());
        out.extend_from_slice(&kv.value);
        out.extend_from_slice(&kv.create_revision.to_le_bytes());
        out.extend_from_slice(&kv.mod_revision.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A cursor over the file's bytes whose every read names what it expected.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.data.len());
        let Some(end) = end else {
            return Err(format!(
                "expected {n} bytes of {what} at offset {}, found {}",
                self.pos,
                self.data.len() - self.pos
            ));
        };
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Decodes a file written by [`encode`]; the error says what was expected and found.
fn decode(data: &[u8]) -> Result<State, String> {
    if data.len() < HEADER_LEN + 4 {
        return Err(format!(
            "expected at least {} bytes, found {}",
            HEADER_LEN + 4,
            data.len()
        ));
    }
    let (body, crc_bytes) = data.split_at(data.len() - 4);
    let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(format!(
            "expected crc32 {stored:#010x}, found {actual:#010x}"
        ));
    }
    let mut r = Reader { data: body, pos: 0 };
    let magic = r.take(4, "magic")?;
    if magic != MAGIC {
        return Err(format!("expected magic {MAGIC:?}, found {magic:?}"));
    }
    let version = r.take(1, "version")?[0];
    if version != FORMAT_VERSION {
        return Err(format!(
            "expected format version {FORMAT_VERSION}, found {version}"
        ));
    }
    let revision = r.u64("revision")?;
    let next_lease = r.u64("next lease")? as i64;
    let count = r.u32("key count")?;
    let mut keys = BTreeMap::new();
    for i in 0..count {
        let klen = r.u32("key length")? as usize;
        let key = r.take(klen, "key")?.to_vec();
        let vlen = r.u32("value length")? as usize;
        let value = r.take(vlen, "value")?.to_vec();
        let create_revision = r.u64("create revision")?;
        let mod_revision = r.u64("mod revision")?;
        if create_revision == 0 || create_revision > mod_revision || mod_revision > revision {
            return Err(format!(
                "expected 0 < create_revision <= mod_revision <= revision {revision} for key #{i}, found {create_revision} and {mod_revision}"
            ));
        }
        let kv = KeyValue {
            key: key.clone(),
            value,
            create_revision,
            mod_revision,
            lease: 0,
        };
        if keys.insert(key, kv).is_some() {
            return Err(format!("expected distinct keys, found key #{i} twice"));
        }
    }
    if r.pos != body.len() {
        return Err(format!(
            "expected the file to end after {count} keys at offset {}, found {} more bytes",
            r.pos,
            body.len() - r.pos
        ));
    }
    if next_lease < 1 {
        return Err(format!("expected a next lease id >= 1, found {next_lease}"));
    }
    Ok(State {
        revision,
        next_lease,
        keys,
        leases: HashMap::new(),
    })
}

/// Replaces `path` with `bytes` crash-safely; the error names the step that failed.
fn write_replace(path: &Path, bytes: &[u8]) -> Result<(), (&'static str, std::io::Error)> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| ("create", e))?;
    f.write_all(bytes).map_err(|e| ("write", e))?;
    f.sync_all().map_err(|e| ("fsync", e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| ("rename", e))?;
    if let Some(dir) = path.parent() {
        let d = std::fs::File::open(dir).map_err(|e| ("open directory", e))?;
        d.sync_all().map_err(|e| ("fsync directory", e))?;
    }
    Ok(())
}

/// A metadata file as the placement driver writes one (a cluster id, a TSO mark, an id
/// counter; a leased key, which is not persisted): the fuzz target's seed.
pub fn fuzz_seed() -> Vec<u8> {
    let mut state = State {
        revision: 7,
        next_lease: 3,
        ..State::default()
    };
    for (key, value, create, modified, lease) in [
        (&b"/stratus/s/cluster-id"[..], &b"123456789"[..], 1, 1, 0),
        (b"/stratus/s/id/alloc", b"200", 2, 5, 0),
        (b"/stratus/s/pd/leader", b"http://127.0.0.1:2479", 3, 3, 2),
        (b"/stratus/s/tso/mark", b"1764700000000", 4, 7, 0),
    ] {
        state.keys.insert(
            key.to_vec(),
            KeyValue {
                key: key.to_vec(),
                value: value.to_vec(),
                create_revision: create,
                mod_revision: modified,
                lease,
            },
        );
    }
    encode(&state)
}

/// Decodes bytes as a metadata file (the fuzz target's entry point): never panics.
pub fn fuzz_decode(data: &[u8]) {
    if let Ok(state) = decode(data) {
        // What decodes encodes back to the same bytes (the format has one spelling).
        assert_eq!(
            encode(&state),
            data,
            "a decoded file re-encodes differently"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Compare, Op, Txn};
    use super::*;
    use crate::test_support::block;
    use proptest::prelude::*;

    #[test]
    fn a_create_only_if_absent_txn_succeeds_once() {
        let s = EmbeddedStore::in_memory();
        block(async {
            let create = Txn::when(vec![Compare::absent("k")]).then(vec![Op::put("k", "1")]);
            assert!(s.txn(create.clone()).await.unwrap());
            assert!(!s.txn(create).await.unwrap());
            assert_eq!(s.get(b"k").await.unwrap().unwrap().value, b"1");
        });
    }

    #[test]
    fn an_expired_lease_takes_its_keys() {
        let s = EmbeddedStore::in_memory();
        block(async {
            let lease = s.grant_lease(Duration::from_millis(30)).await.unwrap();
            assert!(
                s.txn(Txn::default().then(vec![Op::put_leased("l", "x", lease.id)]))
                    .await
                    .unwrap()
            );
            assert!(s.keep_alive(lease.id).await.unwrap().is_some());
            tokio::time::sleep(Duration::from_millis(60)).await;
            assert_eq!(s.get(b"l").await.unwrap(), None);
            assert_eq!(s.keep_alive(lease.id).await.unwrap(), None);
            let e = s
                .txn(Txn::default().then(vec![Op::put_leased("l", "x", lease.id)]))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("not found"), "{e}");
        });
    }

    #[test]
    fn a_reopened_store_keeps_unleased_keys_and_its_revision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta");
        block(async {
            let s = EmbeddedStore::open(&path).unwrap();
            let lease = s.grant_lease(Duration::from_secs(60)).await.unwrap();
            s.txn(Txn::default().then(vec![Op::put("a", "1"), Op::put_leased("b", "2", lease.id)]))
                .await
                .unwrap();
            let rev = s.revision();
            drop(s);
            let s = EmbeddedStore::open(&path).unwrap();
            assert_eq!(s.revision(), rev);
            assert_eq!(s.get(b"a").await.unwrap().unwrap().value, b"1");
            assert_eq!(
                s.get(b"b").await.unwrap(),
                None,
                "leases end with the process"
            );
            let fresh = s.grant_lease(Duration::from_secs(1)).await.unwrap();
            assert!(fresh.id > lease.id, "lease ids are never reused");
        });
    }

    #[test]
    fn a_second_process_on_the_same_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta");
        let first = EmbeddedStore::open(&path).unwrap();
        let e = EmbeddedStore::open(&path).unwrap_err().to_string();
        assert!(e.contains("another process holds"), "{e}");
        drop(first);
        EmbeddedStore::open(&path).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta");
        block(async {
            let s = EmbeddedStore::open(&path).unwrap();
            s.txn(Txn::default().then(vec![Op::put("a", "1")]))
                .await
                .unwrap();
        });
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = EmbeddedStore::open(&path).unwrap_err().to_string();
        assert!(e.contains("crc32") && e.contains("meta"), "{e}");
    }

    /// The model: a map from key to (value, create, mod) with one revision counter.
    #[derive(Debug, Clone)]
    enum Step {
        Put(u8, u8),
        Delete(u8),
        PutIfAbsent(u8, u8),
        PutIfValue(u8, u8, u8),
        PutIfModRevision(u8, u8, u64),
        Reopen,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u8..4, any::<u8>()).prop_map(|(k, v)| Step::Put(k, v)),
            (0u8..4).prop_map(Step::Delete),
            (0u8..4, any::<u8>()).prop_map(|(k, v)| Step::PutIfAbsent(k, v)),
            (0u8..4, 0u8..3, any::<u8>()).prop_map(|(k, e, v)| Step::PutIfValue(k, e, v)),
            (0u8..4, any::<u8>(), 0u64..8).prop_map(|(k, v, r)| Step::PutIfModRevision(k, v, r)),
            Just(Step::Reopen),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_store_matches_a_map_with_one_revision_counter(steps in proptest::collection::vec(step(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("meta");
            let mut store = EmbeddedStore::open(&path).unwrap();
            let mut model: BTreeMap<Vec<u8>, (Vec<u8>, u64, u64)> = BTreeMap::new();
            let mut rev = 0u64;
            block(async {
                for s in steps {
                    let (txn, holds) = match &s {
                        Step::Put(k, v) => (Txn::default().then(vec![Op::put(vec![*k], vec![*v])]), true),
                        Step::Delete(k) => (Txn::default().then(vec![Op::Delete { key: vec![*k] }]), true),
                        Step::PutIfAbsent(k, v) => (
                            Txn::when(vec![Compare::absent(vec![*k])]).then(vec![Op::put(vec![*k], vec![*v])]),
                            !model.contains_key(&vec![*k]),
                        ),
                        Step::PutIfValue(k, e, v) => (
                            Txn::when(vec![Compare::value_is(vec![*k], vec![*e])]).then(vec![Op::put(vec![*k], vec![*v])]),
                            model.get(&vec![*k]).is_some_and(|m| m.0 == vec![*e]),
                        ),
                        Step::PutIfModRevision(k, v, r) => (
                            Txn::when(vec![Compare::mod_revision_is(vec![*k], *r)]).then(vec![Op::put(vec![*k], vec![*v])]),
                            model.get(&vec![*k]).map_or(0, |m| m.2) == *r,
                        ),
                        Step::Reopen => {
                            drop(std::mem::replace(&mut store, EmbeddedStore::in_memory()));
                            store = EmbeddedStore::open(&path).unwrap();
                            continue;
                        }
                    };
                    let done = store.txn(txn.clone()).await.unwrap();
                    assert_eq!(done, holds, "{s:?}");
                    let changes = txn.writes.iter().any(|op| match op {
                        Op::Put { .. } => true,
                        Op::Delete { key } => model.contains_key(key),
                    });
                    if holds && changes {
                        rev += 1;
                        for op in txn.writes {
                            match op {
                                Op::Put { key, value, .. } => {
                                    let create = model.get(&key).map_or(rev, |m| m.1);
                                    model.insert(key, (value, create, rev));
                                }
                                Op::Delete { key } => {
                                    model.remove(&key);
                                }
                            }
                        }
                    }
                    let (all, at) = store.scan_prefix(b"").await.unwrap();
                    assert_eq!(at, rev);
                    let seen: BTreeMap<Vec<u8>, (Vec<u8>, u64, u64)> = all
                        .into_iter()
                        .map(|kv| (kv.key, (kv.value, kv.create_revision, kv.mod_revision)))
                        .collect();
                    assert_eq!(seen, model);
                }
            });
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_decode(&data);
        }
    }

    #[test]
    fn the_fuzz_seed_decodes_without_its_leased_key() {
        let state = decode(&fuzz_seed()).unwrap();
        assert_eq!(state.keys.len(), 3);
        assert_eq!(state.revision, 7);
        fuzz_decode(&fuzz_seed());
    }
}
