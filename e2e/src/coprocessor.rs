//! Coprocessor requests through a server: building them with the region's context, driving
//! paging until the region is done, decoding rows.

use prost::Message;
use wire::codec::datum::decode_datums;
use wire::coprocessor::{
    self as proto, Context, DagRequest, EvalError, KeyRange, Request, Response,
};
use wire::datum::Datum;
use wire::region::Region;

use crate::server_proc::ServerProc;

/// A DAG request for `region` at `start_ts`.
pub fn request(dag: &DagRequest, ranges: Vec<KeyRange>, start_ts: u64, region: &Region) -> Request {
    for_region(&unrouted_request(dag, ranges, start_ts), region)
}

/// `req` routed to `region` (its context's region id and epoch).
pub fn for_region(req: &Request, region: &Region) -> Request {
    let mut req = req.clone();
    let ctx = req.context.get_or_insert_with(Context::default);
    ctx.region_id = region.id;
    ctx.region_ver = region.ver;
    req
}

/// A DAG request without region context (see [`for_region`]).
pub fn unrouted_request(dag: &DagRequest, ranges: Vec<KeyRange>, start_ts: u64) -> Request {
    Request {
        tp: proto::REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts,
        ranges,
        ..Request::default()
    }
}

/// Where the server says the request ran: "local", "remote", "fallback" or "cache_hit".
pub fn location(resp: &Response) -> &str {
    resp.exec_details
        .as_ref()
        .map_or("(no exec details)", |d| d.location.as_str())
}

/// Panics unless the response is a plain answer (no region error, lock or other error).
pub fn assert_answered(resp: &Response, what: &str) {
    assert!(
        resp.region_error.is_none() && resp.locked.is_none() && resp.other_error.is_empty(),
        "{what}: the request failed: region_error={:?} locked={:?} other_error={:?} exec={:?}",
        resp.region_error,
        resp.locked,
        resp.other_error,
        resp.exec_details
    );
}

/// Sends `req` to `server` page after page, following each response's scanned range until
/// the region is done; every response, in order.
pub fn run_pages(server: &ServerProc, req: &Request, desc: bool) -> Vec<Response> {
    let mut out = Vec::new();
    let mut req = req.clone();
    loop {
        let resp = server.coprocessor(&req);
        assert_answered(&resp, "page");
        let next = resp.range.clone();
        out.push(resp);
        let Some(scanned) = next else { break };
        req.ranges = wire::paging::remaining_ranges(&req.ranges, &scanned, desc);
        assert!(
            out.len() < 10_000,
            "paging does not terminate: last scanned range {scanned:?}"
        );
        if req.ranges.is_empty() {
            break;
        }
    }
    out
}

/// The rows of an answered response, or its evaluation error.
pub fn rows(resp: &Response) -> Result<Vec<Vec<Datum>>, EvalError> {
    assert_answered(resp, "rows");
    let sel = proto::SelectResponse::decode(resp.data.as_slice())
        .unwrap_or_else(|e| panic!("the response data is not a SelectResponse: {e}"));
    if let Some(e) = sel.error {
        return Err(e);
    }
    let width = sel.column_count as usize;
    let n = sel.row_count as usize * width;
    let datums = decode_datums(&sel.rows_data, n).expect("rows decode");
    if width == 0 {
        return Ok(vec![Vec::new(); sel.row_count as usize]);
    }
    Ok(datums.chunks(width).map(|c| c.to_vec()).collect())
}

/// The rows of every page, concatenated; the first evaluation error if any.
pub fn page_rows(pages: &[Response]) -> Result<Vec<Vec<Datum>>, EvalError> {
    let mut out = Vec::new();
    for p in pages {
        out.extend(rows(p)?);
    }
    Ok(out)
}

/// Rows in SQL order, for comparing results whose order is not defined.
pub fn sorted(mut rows: Vec<Vec<Datum>>) -> Vec<Vec<Datum>> {
    rows.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.sql_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.len().cmp(&b.len()))
    });
    rows
}
