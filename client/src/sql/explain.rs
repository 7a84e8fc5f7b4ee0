//! What a coprocessor request did, described for `EXPLAIN ANALYZE` (the SQL front renders
//! it, `sqlfront::session`): a line per DAG executor ([`describe_dag`], e.g.
//! `TableScan table=t columns=id,g,v`, `Selection v > 3`, `HashAgg group_by=g
//! aggs=count(*),sum(v)`, `TopN order_by=v desc limit=10`, `Limit 10`) and a
//! [`RegionExplain`] per region ([`describe_regions`]) with where its pages ran as a
//! [`Location`] and why. A program reads those fields (`stratus demo` checks its claims
//! against them) and never the text; the text of a region row is its `id` (`region <id>`),
//! `task` (where its pages went, `server <url>` or `worker <addr>` on the delegate path, then
//! where that node ran them from the exec details it answered: `local`, `remote <worker
//! addr>`, `fallback`, `cache_hit`, `delegate`) and `detail` (`reason=<the reason> pages=<n>
//! rows=<n> cache_hit=<whether a page was a cache hit> cross_zone_bytes=<n>`). A region whose
//! pages ran in different places lists each place once, comma-separated.
//!
//! `cross_zone_bytes` is what the request moved between zones (HTTP body bytes): the client's
//! requests and answers to nodes in another zone, plus what those nodes report for the hops
//! below them (a server's offload to a worker in another zone, a worker's delegate fetch from
//! a server in another zone; `ExecDetails.cross_zone_bytes`). A region's sum counts its
//! pages. Bytes with a node without a zone label are never cross-zone.

use types::RegionId;
use wire::coprocessor::{DagRequest, ExecType, Expr, ExprType, ScalarFuncSig};
use wire::placement::{Location, OffloadReason};

use super::catalog::TableSchema;
use crate::paging::{PageRows, ServedBy};

/// The column names of `EXPLAIN ANALYZE`'s answer.
pub const COLUMNS: [&str; 3] = ["id", "task", "detail"];

/// The node a region's pages were sent to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SentTo {
    /// The server owning the region (its base URL).
    Server(String),
    /// A worker on the delegate path (its base URL).
    Worker(String),
}

impl SentTo {
    /// The node's URL.
    pub fn url(&self) -> &str {
        match self {
            SentTo::Server(url) | SentTo::Worker(url) => url,
        }
    }
}

/// One place a region's pages ran: the node they were sent to, and where that node says it
/// ran them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Place {
    pub sent_to: SentTo,
    /// From the exec details; `None` when the answer named no place this client knows.
    pub location: Option<Location>,
    /// The worker that ran them when `location` is `remote`; else empty.
    pub remote_worker: String,
}

impl Place {
    fn of(page: &PageRows) -> Place {
        Place {
            sent_to: match &page.served_by {
                ServedBy::Server => SentTo::Server(page.server.clone()),
                ServedBy::Worker { addr, .. } => SentTo::Worker(addr.clone()),
            },
            location: page.location,
            remote_worker: if page.location == Some(Location::Remote) {
                page.remote_addr.clone()
            } else {
                String::new()
            },
        }
    }

    /// `server <url> local`, `server <url> remote <worker>`, `worker <addr> delegate`, ...,
    /// with each node URL passed through `name`.
    pub fn render(&self, name: &dyn Fn(&str) -> String) -> String {
        let node = match &self.sent_to {
            SentTo::Server(url) => format!("server {}", name(url)),
            SentTo::Worker(addr) => format!("worker {}", name(addr)),
        };
        match self.location {
            None => node,
            Some(Location::Remote) => format!("{node} remote {}", name(&self.remote_worker)),
            Some(other) => format!("{node} {other}"),
        }
    }
}

/// One region of an `EXPLAIN`: where its pages ran and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionExplain {
    pub region_id: RegionId,
    /// Each place its pages ran, once, in page order.
    pub places: Vec<Place>,
    /// Each non-empty reason its pages gave, once, in page order: an [`OffloadReason`]'s label
    /// for a local or remote run, else the node's sentence.
    pub reasons: Vec<String>,
    pub pages: usize,
    pub rows: usize,
    /// Whether a page was a cache hit.
    pub cache_hit: bool,
    /// Body bytes its pages moved between zones ([`PageRows::cross_zone_bytes`]).
    pub cross_zone_bytes: u64,
    /// The time of its pages' requests, summed ([`PageRows::elapsed`]).
    pub elapsed: std::time::Duration,
}

impl RegionExplain {
    /// The `id` column: `region <id>`.
    pub fn id_text(&self) -> String {
        format!("region {}", self.region_id)
    }

    /// The `task` column: every place, comma-separated.
    pub fn task(&self) -> String {
        self.task_named(&|url| url.to_string())
    }

    /// [`RegionExplain::task`] with each node URL replaced by `name(url)`.
    pub fn task_named(&self, name: &dyn Fn(&str) -> String) -> String {
        let places: Vec<String> = self.places.iter().map(|p| p.render(name)).collect();
        places.join(",")
    }

    /// The `detail` column: `reason=<r> pages=<n> rows=<n> cache_hit=<bool>
    /// cross_zone_bytes=<n>`.
    pub fn detail(&self) -> String {
        format!(
            "reason={} pages={} rows={} cache_hit={} cross_zone_bytes={}",
            self.reasons.join(","),
            self.pages,
            self.rows,
            self.cache_hit,
            self.cross_zone_bytes
        )
    }

    /// The offload reasons among [`RegionExplain::reasons`].
    pub fn offload_reasons(&self) -> impl Iterator<Item = OffloadReason> + '_ {
        self.reasons.iter().filter_map(|r| r.parse().ok())
    }

    /// Whether some page ran where it did for `reason`.
    pub fn has_reason(&self, reason: OffloadReason) -> bool {
        self.offload_reasons().any(|r| r == reason)
    }
}

/// A readable line per executor of `dag` over `table`.
pub fn describe_dag(dag: &DagRequest, table: &TableSchema) -> Vec<String> {
    // The names of the current executor's input columns.
    let mut names: Vec<String> = table.columns.iter().map(|c| c.name.clone()).collect();
    let mut out = Vec::with_capacity(dag.executors.len());
    for e in &dag.executors {
        let line = match ExecType::from_i32(e.tp) {
            Some(ExecType::TableScan) => {
                let scan = e.tbl_scan.clone().unwrap_or_default();
                let cols: Vec<String> = scan
                    .columns
                    .iter()
                    .map(|c| {
                        table
                            .columns
                            .iter()
                            .find(|t| t.id == c.column_id)
                            .map_or_else(|| format!("#{}", c.column_id), |t| t.name.clone())
                    })
                    .collect();
                let line = format!(
                    "TableScan table={} columns={}{}",
                    table.name,
                    cols.join(","),
                    if scan.desc { " desc" } else { "" }
                );
                names = cols;
                line
            }
            Some(ExecType::Selection) => {
                let conds = e.selection.clone().unwrap_or_default().conditions;
                let parts: Vec<String> = conds
                    .iter()
                    .map(|c| {
                        let t = expr_text(c, &names);
                        if conds.len() > 1 && is_logic(c) {
                            format!("({t})")
                        } else {
                            t
                        }
                    })
                    .collect();
                format!("Selection {}", parts.join(" AND "))
            }
            Some(tp @ (ExecType::HashAgg | ExecType::SimpleAgg)) => {
                let agg = e.aggregation.clone().unwrap_or_default();
                let aggs: Vec<String> = agg.agg_func.iter().map(|a| expr_text(a, &names)).collect();
                let groups: Vec<String> =
                    agg.group_by.iter().map(|g| expr_text(g, &names)).collect();
                let line = if tp == ExecType::HashAgg {
                    format!(
                        "HashAgg group_by={} aggs={}",
                        groups.join(","),
                        aggs.join(",")
                    )
                } else {
                    format!("SimpleAgg aggs={}", aggs.join(","))
                };
                names = aggs.into_iter().chain(groups).collect();
                line
            }
            Some(ExecType::TopN) => {
                let top = e.top_n.clone().unwrap_or_default();
                let by: Vec<String> = top
                    .order_by
                    .iter()
                    .map(|b| {
                        let x = b
                            .expr
                            .as_ref()
                            .map_or_else(|| "?".into(), |x| expr_text(x, &names));
                        if b.desc { format!("{x} desc") } else { x }
                    })
                    .collect();
                format!("TopN order_by={} limit={}", by.join(","), top.limit)
            }
            Some(ExecType::Limit) => {
                format!("Limit {}", e.limit.clone().unwrap_or_default().limit)
            }
            Some(ExecType::Projection) => {
                let exprs = e.projection.clone().unwrap_or_default().exprs;
                let cols: Vec<String> = exprs.iter().map(|x| expr_text(x, &names)).collect();
                let line = format!("Projection columns={}", cols.join(","));
                names = cols;
                line
            }
            Some(other) => format!("{other:?}"),
            None => format!("executor type {}", e.tp),
        };
        out.push(line);
    }
    out
}

fn le_bytes<const N: usize>(v: &[u8]) -> Option<[u8; N]> {
    v.get(..N).and_then(|b| b.try_into().ok())
}

fn is_sig(e: &Expr, sigs: &[ScalarFuncSig]) -> bool {
    e.tp == ExprType::ScalarFunc as i32 && sigs.iter().any(|s| *s as i32 == e.sig)
}

fn is_logic(e: &Expr) -> bool {
    is_sig(e, &[ScalarFuncSig::And, ScalarFuncSig::Or])
}

/// Whether `e` prints as `left op right`.
fn is_infix(e: &Expr) -> bool {
    e.tp == ExprType::ScalarFunc as i32
        && !is_sig(
            e,
            &[
                ScalarFuncSig::UnaryMinus,
                ScalarFuncSig::Not,
                ScalarFuncSig::IsNull,
                ScalarFuncSig::In,
            ],
        )
}

/// `e` as SQL-like text over input columns `names`, without outer parentheses; an operand
/// that is itself an infix operation is parenthesized unless it is a comparison under
/// AND / OR.
fn expr_text(e: &Expr, names: &[String]) -> String {
    let child = |i: usize| {
        e.children.get(i).map_or_else(
            || "?".to_string(),
            |c| {
                let t = expr_text(c, names);
                if is_infix(c) && (is_logic(c) || !is_logic(e)) {
                    format!("({t})")
                } else {
                    t
                }
            },
        )
    };
    let agg = |f: &str| match e.children.first() {
        Some(c) if c.tp != ExprType::ColumnRef as i32 => format!("{f}(*)"),
        _ => format!("{f}({})", child(0)),
    };
    match ExprType::from_i32(e.tp) {
        Some(ExprType::ColumnRef) => names
            .get(e.column_offset as usize)
            .cloned()
            .unwrap_or_else(|| format!("#{}", e.column_offset)),
        Some(ExprType::Null) => "NULL".into(),
        Some(ExprType::Int64) => {
            le_bytes::<8>(&e.val).map_or("?".into(), |b| i64::from_le_bytes(b).to_string())
        }
        Some(ExprType::UInt64) => {
            le_bytes::<8>(&e.val).map_or("?".into(), |b| u64::from_le_bytes(b).to_string())
        }
        Some(ExprType::Float64) => le_bytes::<8>(&e.val).map_or("?".into(), |b| {
            format!("{:?}", f64::from_bits(u64::from_le_bytes(b)))
        }),
        Some(ExprType::Bytes) => format!("'{}'", String::from_utf8_lossy(&e.val)),
        Some(ExprType::Count) => agg("count"),
        Some(ExprType::Sum) => agg("sum"),
        Some(ExprType::Min) => agg("min"),
        Some(ExprType::Max) => agg("max"),
        Some(ExprType::Avg) => agg("avg"),
        Some(ExprType::ScalarFunc) => {
            let Some(sig) = ScalarFuncSig::from_i32(e.sig) else {
                return format!("func{}", e.sig);
            };
            let infix = match sig {
                ScalarFuncSig::Lt => "<",
                ScalarFuncSig::Le => "<=",
                ScalarFuncSig::Gt => ">",
                ScalarFuncSig::Ge => ">=",
                ScalarFuncSig::Eq => "=",
                ScalarFuncSig::Ne => "<>",
                ScalarFuncSig::Plus => "+",
                ScalarFuncSig::Minus => "-",
                ScalarFuncSig::Multiply => "*",
                ScalarFuncSig::Divide => "/",
                ScalarFuncSig::IntDiv => "DIV",
                ScalarFuncSig::Mod => "%",
                ScalarFuncSig::And => "AND",
                ScalarFuncSig::Or => "OR",
                ScalarFuncSig::Like => "LIKE",
                ScalarFuncSig::UnaryMinus => return format!("-{}", child(0)),
                ScalarFuncSig::Not => return format!("NOT {}", child(0)),
                ScalarFuncSig::IsNull => return format!("{} IS NULL", child(0)),
                ScalarFuncSig::In => {
                    let list: Vec<String> = (1..e.children.len()).map(child).collect();
                    return format!("{} IN ({})", child(0), list.join(", "));
                }
            };
            format!("{} {infix} {}", child(0), child(1))
        }
        None => format!("expr{}", e.tp),
    }
}

/// A [`RegionExplain`] per region of `pages` (in their order, each region once).
pub fn describe_regions(pages: &[PageRows]) -> Vec<RegionExplain> {
    let mut order: Vec<RegionId> = Vec::new();
    for p in pages {
        if !order.contains(&p.region_id) {
            order.push(p.region_id);
        }
    }
    order
        .into_iter()
        .map(|region_id| {
            let mine: Vec<&PageRows> = pages.iter().filter(|p| p.region_id == region_id).collect();
            let mut places: Vec<Place> = Vec::new();
            let mut reasons: Vec<String> = Vec::new();
            for p in &mine {
                let place = Place::of(p);
                if !places.contains(&place) {
                    places.push(place);
                }
                if !p.reason.is_empty() && !reasons.contains(&p.reason) {
                    reasons.push(p.reason.clone());
                }
            }
            RegionExplain {
                region_id,
                places,
                reasons,
                pages: mine.len(),
                rows: mine.iter().map(|p| p.rows.len()).sum(),
                cache_hit: mine.iter().any(|p| p.from_cache),
                cross_zone_bytes: mine.iter().map(|p| p.cross_zone_bytes).sum(),
                elapsed: mine.iter().map(|p| p.elapsed).sum(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::conditions::tests::schema;
    use crate::sql::conditions::{scan_executors, where_conditions};
    use wire::coprocessor::{self as proto, ByItem, Executor};

    /// The scan and selection of `DELETE FROM t WHERE <w>`, then `more`.
    fn dag(w: Option<&str>, more: Vec<Executor>) -> DagRequest {
        let selection = w.map(|w| {
            let sqlparser::ast::Statement::Delete(d) =
                crate::sql::parse(&format!("delete from t where {w}")).unwrap()
            else {
                unreachable!()
            };
            d.selection.unwrap()
        });
        let mut executors = scan_executors(
            &schema(),
            where_conditions(&schema(), selection.as_ref()).unwrap(),
        );
        executors.extend(more);
        DagRequest {
            executors,
            ..DagRequest::default()
        }
    }

    fn agg(tp: ExprType, arg: Expr) -> Expr {
        Expr::agg(tp, arg)
    }

    #[test]
    fn each_executor_is_described_with_column_names() {
        let hash_agg = Executor {
            tp: ExecType::HashAgg as i32,
            aggregation: Some(proto::Aggregation {
                group_by: vec![Expr::column(1)],
                agg_func: vec![
                    agg(ExprType::Count, Expr::int(1)),
                    agg(ExprType::Sum, Expr::column(2)),
                ],
            }),
            ..Executor::default()
        };
        assert_eq!(
            describe_dag(
                &dag(Some("v > 3 and (s = 'x' or id in (1, 2))"), vec![hash_agg]),
                &schema()
            ),
            vec![
                "TableScan table=t columns=id,g,v,s",
                "Selection v > 3 AND (s = 'x' OR id IN (1, 2))",
                "HashAgg group_by=g aggs=count(*),sum(v)",
            ]
        );
        let top_n = Executor {
            tp: ExecType::TopN as i32,
            top_n: Some(proto::TopN {
                order_by: vec![
                    ByItem {
                        expr: Some(Expr::column(2)),
                        desc: true,
                    },
                    ByItem {
                        expr: Some(Expr::column(0)),
                        desc: false,
                    },
                ],
                limit: 10,
            }),
            ..Executor::default()
        };
        assert_eq!(
            describe_dag(&dag(Some("s is null"), vec![top_n]), &schema())[1..],
            ["Selection s IS NULL", "TopN order_by=v desc,id limit=10"]
        );
        let limit = Executor {
            tp: ExecType::Limit as i32,
            limit: Some(proto::Limit { limit: 7 }),
            ..Executor::default()
        };
        assert_eq!(
            describe_dag(&dag(Some("not g <= -2.5"), vec![limit]), &schema())[1..],
            ["Selection NOT (g <= -2.5)", "Limit 7"]
        );
    }

    fn page(
        region_id: u64,
        served_by: ServedBy,
        location: Option<Location>,
        reason: &str,
        rows: usize,
    ) -> PageRows {
        PageRows {
            region_id: RegionId(region_id),
            served_by,
            page_index: 0,
            from_cache: false,
            resumed: false,
            rows: vec![Vec::new(); rows],
            server: "http://s1".into(),
            location,
            remote_addr: match location {
                Some(Location::Remote) => "http://w1".into(),
                Some(Location::Delegate) => "http://s1".into(),
                _ => String::new(),
            },
            reason: reason.into(),
            cross_zone_bytes: 0,
            elapsed: std::time::Duration::ZERO,
        }
    }

    fn rendered(regions: &[RegionExplain]) -> Vec<(String, String, String)> {
        regions
            .iter()
            .map(|r| (r.id_text(), r.task(), r.detail()))
            .collect()
    }

    #[test]
    fn regions_show_where_they_ran_and_why() {
        let pages = vec![
            page(
                3,
                ServedBy::Server,
                Some(Location::Remote),
                "blocks_size",
                2,
            ),
            page(
                3,
                ServedBy::Server,
                Some(Location::Remote),
                "blocks_size",
                5,
            ),
            page(8, ServedBy::Server, Some(Location::Local), "small", 1),
            page(
                9,
                ServedBy::Worker {
                    id: 0,
                    addr: "http://w0".into(),
                    zone: None,
                },
                None,
                "",
                4,
            ),
        ];
        let regions = describe_regions(&pages);
        assert_eq!(regions[0].region_id, RegionId(3));
        assert_eq!(
            regions[0].places,
            [Place {
                sent_to: SentTo::Server("http://s1".into()),
                location: Some(Location::Remote),
                remote_worker: "http://w1".into(),
            }]
        );
        assert!(regions[0].has_reason(OffloadReason::BlocksSize));
        assert_eq!((regions[0].pages, regions[0].rows), (2, 7));
        assert_eq!(
            regions[2].places[0].sent_to,
            SentTo::Worker("http://w0".into())
        );
        assert_eq!(
            rendered(&regions),
            vec![
                (
                    "region 3".to_string(),
                    "server http://s1 remote http://w1".to_string(),
                    "reason=blocks_size pages=2 rows=7 cache_hit=false cross_zone_bytes=0"
                        .to_string()
                ),
                (
                    "region 8".to_string(),
                    "server http://s1 local".to_string(),
                    "reason=small pages=1 rows=1 cache_hit=false cross_zone_bytes=0".to_string()
                ),
                (
                    "region 9".to_string(),
                    "worker http://w0".to_string(),
                    "reason= pages=1 rows=4 cache_hit=false cross_zone_bytes=0".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_region_lists_each_place_once_and_names_replace_urls() {
        let worker = ServedBy::Worker {
            id: 0,
            addr: "http://w0".into(),
            zone: None,
        };
        let mut hit = page(4, ServedBy::Server, Some(Location::CacheHit), "", 3);
        hit.from_cache = true;
        let pages = vec![
            page(4, ServedBy::Server, Some(Location::Local), "cpu_idle", 1),
            hit,
            page(4, ServedBy::Server, Some(Location::Local), "cpu_idle", 1),
            page(5, ServedBy::Server, Some(Location::Remote), "cpu_busy", 1),
            page(
                6,
                worker,
                Some(Location::Delegate),
                "delegated by the client",
                2,
            ),
        ];
        let regions = describe_regions(&pages);
        assert_eq!(
            rendered(&regions[..1]),
            [(
                "region 4".to_string(),
                "server http://s1 local,server http://s1 cache_hit".to_string(),
                "reason=cpu_idle pages=3 rows=5 cache_hit=true cross_zone_bytes=0".to_string()
            )]
        );
        assert!(regions[0].has_reason(OffloadReason::CpuIdle));
        assert!(!regions[0].has_reason(OffloadReason::CpuBusy));
        let name = |url: &str| url.trim_start_matches("http://").to_uppercase();
        assert_eq!(regions[1].task_named(&name), "server S1 remote W1");
        assert_eq!(regions[2].task(), "worker http://w0 delegate");
        assert_eq!(regions[2].offload_reasons().count(), 0);
    }

    #[test]
    fn a_region_sums_its_pages_cross_zone_bytes() {
        let mut near = page(4, ServedBy::Server, Some(Location::Local), "cpu_idle", 1);
        near.cross_zone_bytes = 0;
        let mut far = page(4, ServedBy::Server, Some(Location::Remote), "cpu_busy", 1);
        far.cross_zone_bytes = 700;
        let mut delegated = page(
            5,
            ServedBy::Worker {
                id: 0,
                addr: "http://w0".into(),
                zone: None,
            },
            Some(Location::Delegate),
            "delegated by the client",
            1,
        );
        delegated.cross_zone_bytes = 50;
        let regions = describe_regions(&[near, far, delegated]);
        assert_eq!(regions[0].cross_zone_bytes, 700);
        assert!(regions[0].detail().ends_with(" cross_zone_bytes=700"));
        assert_eq!(regions[1].cross_zone_bytes, 50);
    }
}
