//! A fixed table for tests that need known answers: table `id`, rows keyed by handle with an
//! Int64 column `v` (id 2) and a Bytes column `pad` (id 3), and a `count(1), sum(v)` DAG
//! whose answer is computed here.

use wire::codec::row::encode_row;
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{
    self as proto, ColumnInfo, DagRequest, ExecType, Executor, Expr, ExprType, KeyRange,
};
use wire::datum::{Datum, FieldType};

use crate::server_proc::ServerProc;

pub const V_COLUMN: i64 = 2;
pub const PAD_COLUMN: i64 = 3;

#[derive(Clone, Copy, Debug)]
pub struct SampleTable {
    pub id: i64,
}

impl SampleTable {
    pub fn key(&self, handle: i64) -> Vec<u8> {
        record_key(self.id, handle)
    }

    /// A row's encoded value: `v` and `pad_len` bytes of padding.
    pub fn value(v: i64, pad_len: usize) -> Vec<u8> {
        encode_row(&[
            (V_COLUMN, Datum::Int(v)),
            (PAD_COLUMN, Datum::Bytes(vec![b'p'; pad_len])),
        ])
        .expect("encode row")
    }

    /// The whole table.
    pub fn range(&self) -> KeyRange {
        let (s, e) = record_range(self.id);
        KeyRange::new(s, e)
    }

    /// Raw-loads rows `handles` with `v = v_of(handle)`, in batches; the last commit ts.
    pub fn load(
        &self,
        server: &ServerProc,
        handles: std::ops::Range<i64>,
        pad_len: usize,
        v_of: impl Fn(i64) -> i64,
    ) -> u64 {
        let mut ts = 0;
        let all: Vec<i64> = handles.collect();
        for chunk in all.chunks(2000) {
            let pairs = chunk
                .iter()
                .map(|&h| (self.key(h), Self::value(v_of(h), pad_len)))
                .collect();
            ts = server.raw_load(pairs);
        }
        ts
    }

    /// `SELECT count(1), sum(v)` over a table scan.
    pub fn count_sum_dag(&self) -> DagRequest {
        let scan = Executor {
            tp: ExecType::TableScan as i32,
            tbl_scan: Some(proto::TableScan {
                table_id: self.id,
                columns: vec![ColumnInfo {
                    column_id: V_COLUMN,
                    tp: FieldType::Int64 as i32,
                    pk_handle: false,
                    default_val: Vec::new(),
                }],
                desc: false,
            }),
            ..Executor::default()
        };
        let agg = Executor {
            tp: ExecType::SimpleAgg as i32,
            aggregation: Some(proto::Aggregation {
                group_by: Vec::new(),
                agg_func: vec![
                    Expr::agg(ExprType::Count, Expr::int(1)),
                    Expr::agg(ExprType::Sum, Expr::column(0)),
                ],
            }),
            ..Executor::default()
        };
        DagRequest {
            executors: vec![scan, agg],
            ..DagRequest::default()
        }
    }

    /// The rows [`count_sum_dag`](Self::count_sum_dag) returns over `values`.
    pub fn count_sum_rows(values: impl IntoIterator<Item = i64>) -> Vec<Vec<Datum>> {
        let values: Vec<i64> = values.into_iter().collect();
        if values.is_empty() {
            return Vec::new();
        }
        vec![vec![
            Datum::Int(values.len() as i64),
            Datum::Int(values.iter().sum()),
        ]]
    }
}
