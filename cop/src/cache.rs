//! The coprocessor cache, server side: the fast path that answers "nothing changed" without
//! scanning, and what makes a fresh result cacheable.
//!
//! The client keeps results keyed by request and remembers the data version each was computed
//! at (`cache_last_version`). It sends that version back as `cache_if_match_version`; if the
//! region's data version is still the same, nothing in the region was written since (the data
//! version advances with every applied write batch, see `SnapAccess::data_version`), so the
//! cached result still holds and the server answers with a hit and no data.
//!
//! Only the origin of the data may vouch for its version: a snapshot a worker rebuilt has none
//! (`data_version() == None`), and the handler takes an explicit switch
//! ([`crate::handler::HandlerOptions::allow_cache_hit`]) that a worker turns off.
//!
//! A result is cacheable (`can_be_cached`) only when the request enabled the cache, execution
//! finished without error, and the scanned span held no version newer than the read's
//! start_ts and no lock: a later reader at the same data version but a higher start_ts would
//! otherwise see other rows.
//!
//! A result computed on a worker's rebuilt snapshot is stamped with the origin's version and
//! cacheability by whichever end returns it (`node::remote_answer`), not here: that is a rule
//! of the offload protocol between server and worker, not of execution.

use kvengine::SnapAccess;
use wire::coprocessor::{Request, Response};

/// The data version a response reports: the snapshot's, or 0 when it has none (a worker's).
pub fn response_data_version(snap: &SnapAccess) -> u64 {
    snap.data_version().unwrap_or(0)
}

/// The cache-hit response, if the request may be answered from the client's cache: the cache
/// is enabled, the client has an entry (`cache_if_match_version > 0`), hits are allowed here,
/// and the snapshot's data version equals the entry's.
pub fn cache_hit(req: &Request, snap: &SnapAccess, allow_cache_hit: bool) -> Option<Response> {
    if !allow_cache_hit || !req.is_cache_enabled || req.cache_if_match_version == 0 {
        return None;
    }
    let version = snap.data_version()?;
    (version == req.cache_if_match_version).then(|| Response {
        is_cache_hit: true,
        cache_last_version: version,
        ..Response::default()
    })
}
