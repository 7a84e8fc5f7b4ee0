//! The servers a worker's delegate path may call: those the placement driver lists.
//!
//! A delegate request names its region's server in a header the client sets
//! (`x-stratus-region-server`); the worker calls that URL with its own node identity (its
//! certificate under TLS). Unchecked, any client could point a worker at any address and have
//! it call there as a node. With `[worker] pd-endpoints` set, the worker calls only a URL the
//! placement driver lists as a registered server: the list is read from the placement driver
//! and read again when a request names a URL not in it, at most once per [`REFRESH_AFTER`] (a
//! server that just registered is found on its first request; a flood of made-up URLs costs one
//! read a second). A worker with no placement driver has no list and trusts the header, as a
//! standalone worker of the tests does.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::node::PdClient;

/// The least time between two reads of the list.
pub const REFRESH_AFTER: Duration = Duration::from_secs(1);
/// How long one read of the list may take.
const READ_DEADLINE: Duration = Duration::from_secs(5);

/// The registered servers' base URLs, as last read (module docs).
pub struct KnownServers {
    pd: Option<PdClient>,
    /// The URLs (no trailing `/`) and when they were read (`None`: never).
    listed: tokio::sync::Mutex<(Option<Instant>, HashSet<String>)>,
}

impl std::fmt::Debug for KnownServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownServers")
            .field("pinned", &self.pd.is_some())
            .finish_non_exhaustive()
    }
}

impl KnownServers {
    /// The list of the placement driver at `endpoints` (empty: no list, every URL passes),
    /// read over `tls` when set.
    pub fn new(
        endpoints: &[String],
        meter: ::node::Meter,
        tls: Option<&Arc<::node::tls::Tls>>,
    ) -> KnownServers {
        let pd = (!endpoints.is_empty())
            .then(|| PdClient::metered(endpoints, READ_DEADLINE, meter, tls.map(|t| t.as_ref())));
        KnownServers {
            pd,
            listed: tokio::sync::Mutex::new((None, HashSet::new())),
        }
    }

    /// Whether the delegate path may call `url` (a base URL without a trailing `/`); the
    /// refusal says why.
    pub async fn check(&self, url: &str) -> Result<(), String> {
        let Some(pd) = &self.pd else {
            return Ok(());
        };
        let mut listed = self.listed.lock().await;
        if listed.1.contains(url) {
            return Ok(());
        }
        let stale = listed.0.is_none_or(|at| at.elapsed() >= REFRESH_AFTER);
        if stale {
            match pd.cluster().await {
                Ok(view) => {
                    listed.1 = view
                        .stores
                        .iter()
                        .filter_map(|s| s.heartbeat.as_ref())
                        .map(|h| h.url.trim_end_matches('/').to_string())
                        .collect();
                    listed.0 = Some(Instant::now());
                }
                Err(e) => {
                    return Err(format!(
                        "cannot read the registered servers from the placement driver to check \
                         {url}: {e}"
                    ));
                }
            }
            if listed.1.contains(url) {
                return Ok(());
            }
        }
        Err(format!(
            "expected the URL of a server the placement driver lists in {}, found {url:?}",
            wire::delegate::REGION_SERVER_HEADER
        ))
    }
}
