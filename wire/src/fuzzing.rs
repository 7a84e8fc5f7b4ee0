//! Fuzz helpers shared by the targets that read the messages of this crate. The targets
//! themselves live with the code that consumes the messages, so that they reach that code's
//! checks and not only the decoders: `worker::fuzzing::offload_body` (a worker's whole decode,
//! snapshot rebuild and execution) and `server::fuzzing::request` (a server's HTTP handlers).
//! What is engine-free stays here: the framing check of an offload body, the protobuf
//! round-trip check, and sample DAGs for the seeds of both targets.

use bytes::Bytes;
use prost::Message;

use crate::codec::datum::encode_datum;
use crate::coprocessor::{
    Aggregation, ByItem, ColumnInfo, DagRequest, ExecType, Executor, Expr, ExprType, Limit,
    Projection, ScalarFuncSig as S, Selection, TableScan, TopN,
};
use crate::datum::{Datum, FieldType};

/// The framing part of the `offload_body` target: must never panic. A body that decodes
/// re-encodes to the same bytes; the caller goes on with the sections.
pub fn offload_body(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    if let Ok(body) = crate::offload::decode(&bytes) {
        let again = crate::offload::encode(&body.request, &body.memtable_data, &body.changeset);
        assert_eq!(again, data, "offload body re-encodes to the same bytes");
    }
}

/// Decodes `body` as an `M`: must never panic, and what decodes re-encodes to a message that
/// decodes to the same value. The decoded message, if any.
pub fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(body: &[u8]) -> Option<M> {
    let m = M::decode(body).ok()?;
    let again = M::decode(m.encode_to_vec().as_slice()).expect("re-encoded message decodes");
    assert_eq!(again, m, "re-encoded message decodes to the same value");
    Some(m)
}

/// Column ids of the sample table the seeds' DAGs read: the integer handle (`pk_handle`), an
/// Int64 and a Bytes column. Rows written for these DAGs store the last two.
pub const SAMPLE_INT_COLUMN: i64 = 2;
/// See [`SAMPLE_INT_COLUMN`].
pub const SAMPLE_BYTES_COLUMN: i64 = 3;

fn column(column_id: i64, tp: FieldType, default: Option<Datum>) -> ColumnInfo {
    let mut default_val = Vec::new();
    if let Some(d) = default {
        encode_datum(&mut default_val, &d, false);
    }
    ColumnInfo {
        column_id,
        tp: tp as i32,
        pk_handle: column_id == 1,
        default_val,
    }
}

fn executor(tp: ExecType) -> Executor {
    Executor {
        tp: tp as i32,
        ..Executor::default()
    }
}

fn scan(table_id: i64, desc: bool) -> Executor {
    Executor {
        tbl_scan: Some(TableScan {
            table_id,
            columns: vec![
                column(1, FieldType::Int64, None),
                column(SAMPLE_INT_COLUMN, FieldType::Int64, Some(Datum::Int(-1))),
                column(SAMPLE_BYTES_COLUMN, FieldType::Bytes, None),
            ],
            desc,
        }),
        ..executor(ExecType::TableScan)
    }
}

fn selection(conditions: Vec<Expr>) -> Executor {
    Executor {
        selection: Some(Selection { conditions }),
        ..executor(ExecType::Selection)
    }
}

fn aggregation(tp: ExecType, group_by: Vec<Expr>, agg_func: Vec<Expr>) -> Executor {
    Executor {
        aggregation: Some(Aggregation { group_by, agg_func }),
        ..executor(tp)
    }
}

fn top_n(order_by: Vec<(Expr, bool)>, limit: u64) -> Executor {
    Executor {
        top_n: Some(TopN {
            order_by: order_by
                .into_iter()
                .map(|(expr, desc)| ByItem {
                    expr: Some(expr),
                    desc,
                })
                .collect(),
            limit,
        }),
        ..executor(ExecType::TopN)
    }
}

fn dag(executors: Vec<Executor>) -> DagRequest {
    DagRequest {
        executors,
        ..DagRequest::default()
    }
}

/// One DAG of each shape the handler serves, over table `table_id` with the sample columns
/// (handle, [`SAMPLE_INT_COLUMN`], [`SAMPLE_BYTES_COLUMN`]): seeds that start the fuzzers past
/// the DAG checks, into execution.
pub fn sample_dags(table_id: i64) -> Vec<(&'static str, DagRequest)> {
    let f = Expr::func;
    let (handle, int, bytes) = (Expr::column(0), Expr::column(1), Expr::column(2));
    vec![
        ("scan", dag(vec![scan(table_id, false)])),
        (
            "desc_limit",
            dag(vec![
                scan(table_id, true),
                Executor {
                    limit: Some(Limit { limit: 7 }),
                    ..executor(ExecType::Limit)
                },
            ]),
        ),
        (
            "selection_projection",
            dag(vec![
                scan(table_id, false),
                selection(vec![
                    f(S::Gt, vec![int.clone(), Expr::int(50)]),
                    f(S::Like, vec![bytes.clone(), Expr::bytes("row 1%")]),
                ]),
                Executor {
                    projection: Some(Projection {
                        exprs: vec![
                            f(S::Multiply, vec![handle.clone(), Expr::int(2)]),
                            f(S::Minus, vec![int.clone(), Expr::uint(1)]),
                            f(S::Divide, vec![int.clone(), Expr::real(3.0)]),
                            f(S::IsNull, vec![bytes.clone()]),
                        ],
                    }),
                    ..executor(ExecType::Projection)
                },
            ]),
        ),
        (
            "simple_agg",
            dag(vec![
                scan(table_id, false),
                aggregation(
                    ExecType::SimpleAgg,
                    Vec::new(),
                    vec![
                        Expr::agg(ExprType::Count, handle.clone()),
                        Expr::agg(ExprType::Sum, int.clone()),
                        Expr::agg(ExprType::Avg, int.clone()),
                        Expr::agg(ExprType::Min, bytes.clone()),
                        Expr::agg(ExprType::Max, int.clone()),
                    ],
                ),
            ]),
        ),
        (
            "hash_agg",
            dag(vec![
                scan(table_id, false),
                selection(vec![f(
                    S::Or,
                    vec![
                        f(S::Not, vec![f(S::IsNull, vec![int.clone()])]),
                        f(S::In, vec![handle.clone(), Expr::int(3), Expr::null()]),
                    ],
                )]),
                aggregation(
                    ExecType::HashAgg,
                    vec![f(S::Mod, vec![int.clone(), Expr::int(4)])],
                    vec![
                        Expr::agg(ExprType::Count, int.clone()),
                        Expr::agg(ExprType::Sum, handle.clone()),
                    ],
                ),
            ]),
        ),
        (
            "topn",
            dag(vec![
                scan(table_id, false),
                top_n(vec![(int.clone(), true), (handle.clone(), false)], 5),
            ]),
        ),
        (
            "topn_large",
            dag(vec![
                scan(table_id, false),
                top_n(vec![(f(S::UnaryMinus, vec![handle]), false)], 1000),
            ]),
        ),
    ]
}
