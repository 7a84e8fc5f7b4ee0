//! Timestamps and region ids from the placement driver (`[server] pd-endpoints`).
//!
//! Timestamps go through [`node::PdClient`]'s batching: the server's concurrent transactions
//! share one request to the placement leader. Region ids come from its allocator, so they stay
//! small (`region 14`) and unique across the cluster. Without a placement driver, region ids
//! are timestamps ([`TsoRegionIds`]), as before.

use std::sync::Arc;
use std::time::Duration;

use node::PdClient;

use crate::tso::{TimestampSource, TsoError};

/// Where new region ids come from (a split's right child, a one-voter server's first regions).
pub trait RegionIdSource: Send + Sync + 'static {
    /// A region id never used before in the cluster.
    fn new_region_id(&self) -> Result<u64, TsoError>;
}

/// Region ids from the timestamp source: unique, but large.
pub struct TsoRegionIds(pub Arc<dyn TimestampSource>);

impl RegionIdSource for TsoRegionIds {
    fn new_region_id(&self) -> Result<u64, TsoError> {
        self.0.get_ts()
    }
}

/// The placement driver as this server's timestamp and region-id source.
pub struct PdSource {
    client: PdClient,
    runtime: tokio::runtime::Handle,
}

impl PdSource {
    /// A client of the instances at `endpoints`; each call retries (following the leader)
    /// for up to `deadline`. Blocking calls run on `runtime`.
    pub fn new(
        endpoints: &[String],
        deadline: Duration,
        meter: node::Meter,
        tls: Option<&node::tls::Tls>,
        runtime: tokio::runtime::Handle,
    ) -> PdSource {
        PdSource {
            client: PdClient::metered(endpoints, deadline, meter, tls),
            runtime,
        }
    }

    fn remote(&self, e: node::PdClientError) -> TsoError {
        TsoError::Remote {
            addr: self.client.endpoints().join(","),
            detail: e.to_string(),
        }
    }
}

impl TimestampSource for PdSource {
    /// Blocks on the runtime: call it from a blocking thread, never from async code.
    fn get_ts(&self) -> Result<u64, TsoError> {
        self.runtime
            .block_on(self.client.get_ts())
            .map_err(|e| self.remote(e))
    }
}

impl RegionIdSource for PdSource {
    fn new_region_id(&self) -> Result<u64, TsoError> {
        self.runtime
            .block_on(self.client.alloc_ids(1))
            .map_err(|e| self.remote(e))
    }
}
