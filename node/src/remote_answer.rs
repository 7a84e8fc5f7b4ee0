//! How a result computed on a shipped snapshot answers as its origin would.
//!
//! A worker executes on a snapshot it rebuilt from what the owning server shipped (the offload
//! body, or the server's `DelegateResponse` on the delegate path). That snapshot has no data
//! version of its own, so the result must not speak for one: whichever end returns it to a
//! client stamps it with the origin's version and cacheability first. Two ends do, one rule:
//!
//! * the server, on an offloaded result coming back from a worker (`server::dispatcher`);
//! * the worker, on a delegate result it computed for a client (`worker::delegate`).
//!
//! The protocol this serves is the coprocessor cache's (server side: `cop::cache`; client
//! side: `client::cop_cache`): a result is valid for `cache_last_version` and may be kept only
//! when `can_be_cached`; only the origin answers cache hits.

use wire::coprocessor::{ExecDetails, Response};
use wire::placement::Location;

/// Makes `resp`, computed on a snapshot rebuilt from the origin's shipment (offload or
/// delegate path), answer as the origin would: never a cache hit, valid for the origin's data
/// version `origin_version`, not cacheable when the origin saw newer versions or locks
/// (`uncacheable`), and its exec details saying where and why it ran. Returns whether it
/// turned a cacheable result uncacheable.
pub fn stamp_remote_answer(
    resp: &mut Response,
    origin_version: u64,
    uncacheable: bool,
    location: Location,
    remote_addr: &str,
    reason: &str,
) -> bool {
    let vetoed = uncacheable && resp.can_be_cached;
    if uncacheable {
        resp.can_be_cached = false;
    }
    resp.cache_last_version = origin_version;
    resp.is_cache_hit = false;
    let d = resp.exec_details.get_or_insert_with(ExecDetails::default);
    d.set_location(location, reason);
    d.remote_addr = remote_addr.to_string();
    vetoed
}
