//! TopN paging for offloaded requests: keeping a large TopN from building its whole heap on a
//! worker.
//!
//! A TopN with a large limit makes the worker hold `limit` rows for the whole range before it
//! answers. When the DAG's root is a TopN whose limit is above a threshold and the request's own
//! paging would not stop it earlier (no paging, or a page of at least the limit), the request
//! goes to the worker with `paging_size = limit - 1`: below the limit, the cop TopN forwards
//! source batches unchanged, so the worker answers bounded, resumable pages and the client
//! applies the final TopN over them (the resume range reaches the client unchanged). A smaller
//! TopN keeps the request's paging.
//!
//! Two places apply the same policy ([`worker_paging_size`]), which is why it lives here, in
//! the crate both ends of an offload share, and not in the coprocessor that executes it:
//! * the server, before it ships a request, with `remote-coprocessor-topn-max-pushdown-rows`
//!   (`server::coprocessor`);
//! * the worker, with `cop-topn-max-pushdown-rows`, on requests that arrive without finite
//!   paging (`0 < paging_size < u32::MAX`), as a server older than the policy sends them: set
//!   it on the workers before upgrading the servers, then back to 0 (`worker::topn_paging`).
//!
//! This is a row-count heuristic, not a memory limit: wide rows want a lower threshold.

use prost::Message;
use wire::coprocessor::{DagRequest, ExecType, Request};

/// Whether `paging_size` asks for pages of a bounded number of rows: `0 < paging_size <
/// u32::MAX`. 0 means no paging, and a page of `u32::MAX` rows or more is as good as none.
pub fn is_finite_paging(paging_size: u64) -> bool {
    paging_size > 0 && paging_size < u64::from(u32::MAX)
}

/// The paging size to send the worker instead of the request's own, or `None` to forward it.
/// `max_pushdown_rows = 0` disables the policy.
pub fn worker_paging_size(req: &Request, max_pushdown_rows: u64) -> Option<u64> {
    if max_pushdown_rows == 0 {
        return None;
    }
    // An undecodable DAG is forwarded as is: the worker reports the error like the origin would.
    let dag = DagRequest::decode(req.data.as_slice()).ok()?;
    let root = dag.executors.last()?;
    if ExecType::from_i32(root.tp) != Some(ExecType::TopN) {
        return None;
    }
    let limit = root.top_n.as_ref()?.limit;
    if limit <= max_pushdown_rows {
        return None;
    }
    (req.paging_size == 0 || req.paging_size >= limit).then(|| limit - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::coprocessor::{ByItem, Executor, Expr, Limit, TopN};

    fn request(executors: Vec<Executor>, paging_size: u64) -> Request {
        Request {
            data: DagRequest {
                executors,
                ..DagRequest::default()
            }
            .encode_to_vec(),
            paging_size,
            ..Request::default()
        }
    }

    fn scan() -> Executor {
        Executor {
            tp: ExecType::TableScan as i32,
            ..Executor::default()
        }
    }

    fn top_n(limit: u64) -> Executor {
        Executor {
            tp: ExecType::TopN as i32,
            top_n: Some(TopN {
                order_by: vec![ByItem {
                    expr: Some(Expr::column(0)),
                    desc: true,
                }],
                limit,
            }),
            ..Executor::default()
        }
    }

    #[test]
    fn a_topn_above_the_threshold_pages_below_its_limit() {
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(1000)], 0), 100),
            Some(999)
        );
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(1000)], 1000), 100),
            Some(999)
        );
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(1000)], 5000), 100),
            Some(999)
        );
    }

    #[test]
    fn finite_paging_is_strictly_between_zero_and_u32_max() {
        assert!(!is_finite_paging(0));
        assert!(is_finite_paging(1));
        assert!(is_finite_paging(u64::from(u32::MAX) - 1));
        assert!(!is_finite_paging(u64::from(u32::MAX)));
        assert!(!is_finite_paging(u64::MAX));
    }

    #[test]
    fn smaller_pages_small_topns_and_other_roots_are_forwarded() {
        // The request already pages below the limit: its own paging stands.
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(1000)], 128), 100),
            None
        );
        // A TopN at or below the threshold builds its heap on the worker.
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(100)], 0), 100),
            None
        );
        // Not the root.
        let limit = Executor {
            tp: ExecType::Limit as i32,
            limit: Some(Limit { limit: 5 }),
            ..Executor::default()
        };
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(1000), limit], 0), 100),
            None
        );
        assert_eq!(worker_paging_size(&request(vec![scan()], 0), 100), None);
        // Disabled.
        assert_eq!(
            worker_paging_size(&request(vec![scan(), top_n(1000)], 0), 0),
            None
        );
        // Undecodable DAG bytes.
        let mut bad = request(vec![], 0);
        bad.data = vec![0xff; 3];
        assert_eq!(worker_paging_size(&bad, 100), None);
    }
}
