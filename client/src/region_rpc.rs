//! Sending a request to a region's leader and recovering when it is not there: the shared
//! reactions to region errors and refused connections ([`Router::after_region_error`],
//! [`Router::after_connection_error`], used by the paging driver too) and the driver of every
//! keyed transaction command ([`Router::send_by_region`]).
//!
//! A transaction command (prewrite, commit, rollback, check_txn_status,
//! check_secondary_locks, resolve_lock, get, raw load) names keys, not a region: the server
//! routes each key itself and answers a `KeyError` whose `region_error` says why the keys are
//! not served here (not the leader, a stale epoch, a leader change mid-command). The driver
//! groups the keys by region, sends each group to its leader, and on such an answer (or a
//! refused connection) updates the region cache, waits as the request's [`Backoff`] says,
//! regroups that group's keys and sends them again. Every command it drives is idempotent
//! (the server's contract), so a re-send after an unknown outcome is safe. Any other
//! `KeyError` goes back to the caller inside the response.

use std::collections::VecDeque;
use std::future::Future;

use wire::coprocessor::{RegionError, RegionErrorKind};
use wire::region::{KvPair, RawLoadResponse};
use wire::txn::{
    CheckSecondaryLocksResponse, CheckTxnStatusResponse, CommandResponse, GetResponse, KeyError,
    Mutation, PrewriteResponse, ResolveLockResponse, ScanLockResponse, ScanResponse,
};

use crate::backoff::{Backoff, RetryReason};
use crate::error::{Error, Result};
use crate::region_cache::{CachedRegion, RegionCache, Retry};
use crate::transport::Transport;

/// A response carrying an optional [`KeyError`] (every txn response, and raw load's).
pub(crate) trait HasKeyError {
    fn key_error(&self) -> Option<&KeyError>;
}

macro_rules! has_key_error {
    ($($t:ty),*) => {$(
        impl HasKeyError for $t {
            fn key_error(&self) -> Option<&KeyError> {
                self.error.as_ref()
            }
        }
    )*};
}

has_key_error!(
    PrewriteResponse,
    CommandResponse,
    CheckTxnStatusResponse,
    CheckSecondaryLocksResponse,
    ResolveLockResponse,
    ScanLockResponse,
    GetResponse,
    ScanResponse,
    RawLoadResponse
);

/// An item of a keyed command: routed by its key.
pub(crate) trait Keyed: Clone {
    fn key(&self) -> &[u8];
}

impl Keyed for Vec<u8> {
    fn key(&self) -> &[u8] {
        self
    }
}

impl Keyed for Mutation {
    fn key(&self) -> &[u8] {
        &self.key
    }
}

impl Keyed for KvPair {
    fn key(&self) -> &[u8] {
        &self.key
    }
}

/// What the caller does once a region error was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterError {
    /// Send the same request again (to the region's leader as cached now).
    Retry,
    /// The region's range changed: split what is left by the cached regions again.
    Resplit,
}

/// The region cache and the transport to refresh it.
#[derive(Clone, Copy)]
pub(crate) struct Router<'a> {
    pub transport: &'a Transport,
    pub regions: &'a RegionCache,
}

impl Router<'_> {
    /// Updates the cache after `err`, answered by `server` for `region`, and waits when the
    /// retry should (see the module docs of [`crate::region_cache`] and [`crate::backoff`]).
    /// A `Resplit` does not wait: the caller decides.
    pub(crate) async fn after_region_error(
        &self,
        region: &CachedRegion,
        server: &str,
        err: &RegionError,
        backoff: &mut Backoff,
    ) -> Result<AfterError> {
        let reason = RetryReason::from_region_error(err);
        let last = || format!("{} region_id={} {}", reason, err.region_id, err.message);
        match err.kind() {
            Some(RegionErrorKind::NotLeader) => {
                let retry =
                    self.regions
                        .on_not_leader(region, err.leader_store_id, &err.leader_addr);
                tracing::debug!(region_id = err.region_id, server, hint = %err.leader_addr, ?retry, "not leader");
                let fresh_hint = match retry {
                    Retry::Now => true,
                    Retry::After => false,
                    Retry::ReloadFrom(addr) => {
                        // A failure marks it down; the next guess skips it.
                        self.regions
                            .reload_from(self.transport, &addr)
                            .await
                            .is_ok()
                    }
                };
                if !(fresh_hint && backoff.now_ok(reason)) {
                    backoff.wait(reason, last()).await?;
                }
                Ok(AfterError::Retry)
            }
            Some(
                RegionErrorKind::EpochNotMatch
                | RegionErrorKind::RegionNotFound
                | RegionErrorKind::KeyNotInRegion,
            ) => {
                tracing::debug!(
                    region_id = err.region_id,
                    server,
                    kind = reason.as_str(),
                    "region changed; re-splitting"
                );
                let reload =
                    self.regions
                        .on_epoch_not_match(region, err.current_regions.clone(), server);
                if reload && let Err(e) = self.regions.reload_from(self.transport, server).await {
                    tracing::debug!(server, error = %e, "region reload failed; asking every server");
                    self.regions.load(self.transport).await?;
                }
                Ok(AfterError::Resplit)
            }
            Some(RegionErrorKind::ServerBusy | RegionErrorKind::StaleCommand) | None => {
                backoff.wait(reason, last()).await?;
                Ok(AfterError::Retry)
            }
        }
    }

    /// `server` could not be reached (`err`): marks it down, moves the regions it led, and
    /// waits.
    pub(crate) async fn after_connection_error(
        &self,
        server: &str,
        err: &Error,
        backoff: &mut Backoff,
    ) -> Result<()> {
        tracing::debug!(server, error = %err, "server unreachable; trying another replica");
        self.regions.on_server_error(server);
        if self.regions.has_region_without_live_replica() {
            // No replica left to try: they moved (a cluster restarted on new ports) or are
            // all down. The routing table says where they are now; a failed read leaves the
            // cache as it is and the backoff retries.
            if let Err(e) = self.regions.load(self.transport).await {
                tracing::debug!(error = %e, "cannot reload the regions after a refused connection");
            }
        }
        backoff.wait(RetryReason::Connection, err.to_string()).await
    }

    /// The regions of `items`' keys (see [`RegionCache::group_keys`]), loading the regions
    /// once when a key has none.
    pub(crate) async fn group<I: Keyed>(
        &self,
        items: &[I],
    ) -> Result<Vec<(CachedRegion, Vec<usize>)>> {
        let keys: Vec<&[u8]> = items.iter().map(Keyed::key).collect();
        match self.regions.group_keys(&keys) {
            Err(Error::NoRegion { .. }) => {
                self.regions.load(self.transport).await?;
                self.regions.group_keys(&keys)
            }
            r => r,
        }
    }

    /// Sends `items` grouped by region, each group to its leader through `send(leader's base
    /// URL, items)`, until every group is answered without a region error (see the module
    /// docs). The answers come back in no particular order; any other `KeyError` is inside
    /// them.
    pub(crate) async fn send_by_region<I, R, F, Fut>(
        &self,
        items: Vec<I>,
        backoff: &mut Backoff,
        mut send: F,
    ) -> Result<Vec<R>>
    where
        I: Keyed,
        R: HasKeyError,
        F: FnMut(String, Vec<I>) -> Fut,
        Fut: Future<Output = Result<R>>,
    {
        let mut pending: VecDeque<Vec<I>> = VecDeque::from([items]);
        let mut out = Vec::new();
        while let Some(batch) = pending.pop_front() {
            if batch.is_empty() {
                continue;
            }
            for (region, indices) in self.group(&batch).await? {
                let part: Vec<I> = indices.iter().map(|&i| batch[i].clone()).collect();
                let server = region.server().to_string();
                match backoff
                    .attempt(&server, send(server.clone(), part.clone()))
                    .await
                {
                    Err(e) if e.is_connection() => {
                        self.after_connection_error(&server, &e, backoff).await?;
                        pending.push_back(part);
                    }
                    Err(e) => return Err(e),
                    Ok(resp) => match resp.key_error().and_then(|e| e.region_error.as_ref()) {
                        None => out.push(resp),
                        Some(re) => {
                            let after = self
                                .after_region_error(&region, &server, re, backoff)
                                .await?;
                            if after == AfterError::Resplit {
                                let reason = RetryReason::from_region_error(re);
                                if !backoff.now_ok(reason) {
                                    backoff.wait(reason, re.message.clone()).await?;
                                }
                            }
                            pending.push_back(part);
                        }
                    },
                }
            }
        }
        Ok(out)
    }
}
