//! `cop-topn-max-pushdown-rows`: the server's TopN paging policy ([`node::topn_paging`]) applied
//! on the worker to requests from servers that predate it.
//!
//! A server that applies the policy itself sends a large TopN with finite paging
//! (`paging_size = limit - 1`); one that does not sends the request's own paging, usually 0.
//! So only a request **without** finite paging is a candidate: its DAG is decoded (a second
//! time: the handler decodes it again) and, when the policy says so, its `paging_size` is set
//! before it runs. A request with finite paging is passed through without that decode.
//!
//! Every request is counted once in `stratus_worker_topn_paging_total{action}` while the
//! setting is non-zero (nothing is counted when it is 0):
//! * `applied`: no finite paging, and the policy set `paging_size = limit - 1`;
//! * `passed_through`: the request already had finite paging;
//! * `not_applicable`: no finite paging, and the policy does not apply (the root is no TopN,
//!   its limit is within the setting, or the DAG does not decode: the handler reports that).

use node::topn_paging::{is_finite_paging, worker_paging_size};
use wire::coprocessor::Request;

/// What the worker did with one request's paging: the closed label set of
/// `stratus_worker_topn_paging_total{action}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopnPagingAction {
    Applied,
    PassedThrough,
    NotApplicable,
}

impl TopnPagingAction {
    pub const ALL: [TopnPagingAction; 3] = [
        TopnPagingAction::Applied,
        TopnPagingAction::PassedThrough,
        TopnPagingAction::NotApplicable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TopnPagingAction::Applied => "applied",
            TopnPagingAction::PassedThrough => "passed_through",
            TopnPagingAction::NotApplicable => "not_applicable",
        }
    }
}

/// Applies the policy with threshold `max_pushdown_rows` to `request` (see the module docs);
/// `None` when the setting is 0 (the request is untouched and not counted).
pub fn apply(request: &mut Request, max_pushdown_rows: u64) -> Option<TopnPagingAction> {
    if max_pushdown_rows == 0 {
        return None;
    }
    if is_finite_paging(request.paging_size) {
        return Some(TopnPagingAction::PassedThrough);
    }
    Some(match worker_paging_size(request, max_pushdown_rows) {
        Some(paging_size) => {
            request.paging_size = paging_size;
            TopnPagingAction::Applied
        }
        None => TopnPagingAction::NotApplicable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use wire::coprocessor::{ByItem, DagRequest, ExecType, Executor, Expr, TopN};

    fn top_n_request(limit: u64, paging_size: u64) -> Request {
        let scan = Executor {
            tp: ExecType::TableScan as i32,
            ..Executor::default()
        };
        let top = Executor {
            tp: ExecType::TopN as i32,
            top_n: Some(TopN {
                order_by: vec![ByItem {
                    expr: Some(Expr::column(0)),
                    desc: true,
                }],
                limit,
            }),
            ..Executor::default()
        };
        Request {
            data: DagRequest {
                executors: vec![scan, top],
                ..DagRequest::default()
            }
            .encode_to_vec(),
            paging_size,
            ..Request::default()
        }
    }

    #[test]
    fn a_large_topn_without_paging_gets_pages_below_its_limit() {
        let mut req = top_n_request(1000, 0);
        assert_eq!(apply(&mut req, 100), Some(TopnPagingAction::Applied));
        assert_eq!(req.paging_size, 999);
        // A page of u32::MAX rows is no finite paging either.
        let mut req = top_n_request(1000, u64::from(u32::MAX));
        assert_eq!(apply(&mut req, 100), Some(TopnPagingAction::Applied));
        assert_eq!(req.paging_size, 999);
    }

    #[test]
    fn a_request_with_finite_paging_is_passed_through_unchanged() {
        for paging in [1, 64, 999, 1000, 5000, u64::from(u32::MAX) - 1] {
            let mut req = top_n_request(1000, paging);
            // Undecodable DAG bytes show that the DAG is not looked at.
            req.data = vec![0xff; 3];
            let before = req.clone();
            assert_eq!(apply(&mut req, 100), Some(TopnPagingAction::PassedThrough));
            assert_eq!(req, before, "paging_size {paging}");
        }
    }

    #[test]
    fn a_small_topn_or_an_undecodable_dag_is_not_applicable() {
        let mut req = top_n_request(100, 0);
        assert_eq!(apply(&mut req, 100), Some(TopnPagingAction::NotApplicable));
        assert_eq!(req.paging_size, 0);
        let mut req = top_n_request(1000, 0);
        req.data = vec![0xff; 3];
        assert_eq!(apply(&mut req, 100), Some(TopnPagingAction::NotApplicable));
        assert_eq!(req.paging_size, 0);
    }

    #[test]
    fn a_zero_setting_leaves_every_request_alone_and_uncounted() {
        let mut req = top_n_request(1000, 0);
        assert_eq!(apply(&mut req, 0), None);
        assert_eq!(req.paging_size, 0);
    }
}
