//! The server's store id: the configured `node-id`, or, with `node-id = 0` and a placement
//! driver, an id from its allocator taken on the first start and kept in
//! `<data-dir>/STORE_ID` (decimal, written atomically) for every later one, as TiKV's stores
//! get theirs from PD.
//!
//! The founders of a cluster keep configured ids: they name each other in `[raft] peers`
//! before any placement driver could hand one out, and those small ids never collide with an
//! allocated one (the allocator starts above `wire::pd::RESERVED_IDS`). A server joining later
//! needs no id of its own choosing. The id is also the prefix of every file the server writes
//! to the object store (a `u16`): an allocated id above `u16::MAX` is refused.
//!
//! A data directory keeps the id it was first given: a restart with another configured
//! `node-id` is refused, since the region's Raft groups know the replica by its old id.

use std::path::{Path, PathBuf};
use std::time::Duration;

use node::PdClient;

/// The file under the data directory that holds the id.
pub const STORE_ID_FILE: &str = "STORE_ID";

#[derive(Debug, thiserror::Error)]
pub enum StoreIdError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("expected a store id (1..=65535) in {path}, found {found:?}")]
    Corrupt { path: PathBuf, found: String },
    #[error(
        "the data directory belongs to store {stored} ({path}), the config says node-id = {configured}: a replica's id cannot change"
    )]
    Mismatch {
        path: PathBuf,
        stored: u16,
        configured: u16,
    },
    #[error("node-id = 0 needs the placement driver to allocate one, and it failed")]
    Allocate(#[source] node::PdClientError),
    #[error(
        "the placement driver allocated store id {found}, above the largest a file prefix holds ({max})"
    )]
    TooLarge { found: u64, max: u16 },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: kvengine::Error,
    },
}

/// The id kept in `data_dir`, if one was.
fn stored(data_dir: &Path) -> Result<Option<u16>, StoreIdError> {
    let path = data_dir.join(STORE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u16>() {
            Ok(id) if id != 0 => Ok(Some(id)),
            _ => Err(StoreIdError::Corrupt {
                path,
                found: text.chars().take(40).collect(),
            }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreIdError::Read { path, source }),
    }
}

/// The store id of the server with `configured` (`node-id`) and `data_dir`: the configured
/// one (checked against the kept one), the kept one, or a new one from the placement driver
/// at `pd_endpoints` (module docs). Blocking.
pub fn resolve(
    configured: u16,
    data_dir: &Path,
    pd_endpoints: &[String],
    tls: Option<&node::tls::Tls>,
    runtime: &tokio::runtime::Handle,
    deadline: Duration,
) -> Result<u16, StoreIdError> {
    let kept = stored(data_dir)?;
    match (configured, kept) {
        (0, Some(id)) => return Ok(id),
        (c, Some(id)) if c != id => {
            return Err(StoreIdError::Mismatch {
                path: data_dir.join(STORE_ID_FILE),
                stored: id,
                configured: c,
            });
        }
        (c, _) if c != 0 => return Ok(c),
        // A server without a placement driver keeps 0 (a file prefix like any other).
        _ if pd_endpoints.is_empty() => return Ok(0),
        _ => {}
    }
    let client = PdClient::metered(
        pd_endpoints,
        deadline,
        node::Meter::unlabelled(wire::traffic::Role::Server),
        tls,
    );
    let id = runtime
        .block_on(client.alloc_ids(1))
        .map_err(StoreIdError::Allocate)?;
    let id = u16::try_from(id).map_err(|_| StoreIdError::TooLarge {
        found: id,
        max: u16::MAX,
    })?;
    let path = data_dir.join(STORE_ID_FILE);
    kvengine::write_atomically(&path, format!("{id}\n").as_bytes())
        .map_err(|source| StoreIdError::Write { path, source })?;
    tracing::info!(store_id = id, "store id allocated by the placement driver");
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Multi-threaded, as the server's: `Handle::block_on` on a current-thread runtime would
    /// not drive its timers.
    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime")
    }

    #[test]
    fn a_configured_id_is_used_and_a_kept_one_must_match_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = rt();
        let at = |c| {
            resolve(
                c,
                dir.path(),
                &[],
                None,
                rt.handle(),
                Duration::from_millis(10),
            )
        };
        assert_eq!(at(7).expect("configured"), 7);
        std::fs::write(dir.path().join(STORE_ID_FILE), "101\n").expect("write");
        assert_eq!(at(0).expect("kept"), 101);
        assert_eq!(at(101).expect("the same"), 101);
        let e = at(7).expect_err("another id");
        assert!(
            matches!(
                e,
                StoreIdError::Mismatch {
                    stored: 101,
                    configured: 7,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_corrupt_id_file_is_refused_with_its_path_and_contents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = rt();
        for bad in ["", "0", "70000", "abc"] {
            std::fs::write(dir.path().join(STORE_ID_FILE), bad).expect("write");
            let e = resolve(
                0,
                dir.path(),
                &[],
                None,
                rt.handle(),
                Duration::from_millis(10),
            )
            .expect_err("corrupt");
            let text = e.to_string();
            assert!(
                text.contains(STORE_ID_FILE) && text.contains(&format!("{bad:?}")),
                "{text}"
            );
        }
    }

    #[test]
    fn no_id_and_no_placement_driver_is_an_allocation_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = rt();
        let e = resolve(
            0,
            dir.path(),
            &["http://127.0.0.1:9".to_string()],
            None,
            rt.handle(),
            Duration::from_millis(200),
        )
        .expect_err("nothing listens");
        assert!(matches!(e, StoreIdError::Allocate(_)), "{e}");
        assert!(!dir.path().join(STORE_ID_FILE).exists());
        // Without a placement driver, 0 stays 0 (a standalone server's file prefix).
        let alone = resolve(
            0,
            dir.path(),
            &[],
            None,
            rt.handle(),
            Duration::from_millis(10),
        );
        assert_eq!(alone.expect("no placement driver"), 0);
    }
}
