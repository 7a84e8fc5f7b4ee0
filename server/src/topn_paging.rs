//! TopN paging for offloaded requests: a TopN whose limit is above
//! `remote-coprocessor-topn-max-pushdown-rows` goes to the worker with `paging_size = limit - 1`,
//! so the worker answers resumable pages instead of the whole heap. The policy lives in
//! [`cop::topn_paging`], shared with the worker (which applies it, with its own
//! `cop-topn-max-pushdown-rows`, to requests from servers older than the policy).

pub use cop::topn_paging::worker_paging_size;
