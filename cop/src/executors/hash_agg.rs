//! Hash aggregation (GROUP BY): one partial row per group, aggregates first, then the group-by
//! values.
//!
//! Groups are found by an injective byte encoding of their group-by values (a NULL flag, then
//! fixed-width numbers or length-prefixed bytes; `-0.0` is folded into `0.0` because SQL
//! compares them equal) in a hash map. Groups are emitted in the order they first appeared.
//!
//! **Paging by group count**: with `paging_size` set, once a source batch leaves at least
//! `paging_size` groups, they are emitted as partial rows and forgotten, and the page may end
//! there (the partials of the next page merge with them on the client). A page may therefore
//! carry up to `paging_size + batch size - 1` groups; bounding it exactly would mean feeding
//! the aggregation a row at a time near the limit.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

use crate::batch::{Batch, Column};
use crate::error::{EvalError, Result};
use crate::executors::aggregation::Aggregates;
use crate::executors::{
    BatchExecutor, BatchResult, BatchSize, Evaluated, Operand, ensure_identity,
};
use wire::coprocessor as proto;
use wire::datum::EvalType;

pub struct HashAggExecutor<'a> {
    src: Box<dyn BatchExecutor + 'a>,
    aggs: Aggregates,
    group_by: Vec<Operand>,
    /// Group `g`'s values are at index `g` of these columns (one per group-by item).
    keys: Vec<Column>,
    groups: HashMap<Vec<u8>, usize, GroupKeyHash>,
    schema: Vec<EvalType>,
    batch_size: BatchSize,
    /// 0 = no paging.
    paging_size: u64,
    drained: bool,
    /// The group of each value in `0..DIRECT_KEYS` of a lone Int group-by item ([`NO_GROUP`]:
    /// none yet); empty until such a value is met. See [`DIRECT_KEYS`].
    direct: Vec<u32>,
    // Buffers reused across batches.
    key_buf: Vec<u8>,
    group_of_row: Vec<usize>,
    identity: Vec<usize>,
}

impl<'a> HashAggExecutor<'a> {
    pub(crate) fn new(
        src: Box<dyn BatchExecutor + 'a>,
        agg: &proto::Aggregation,
        paging_size: u64,
    ) -> Result<Self> {
        if agg.group_by.is_empty() {
            return Err(crate::Error::InvalidRequest(
                "a hash aggregation needs group-by items".into(),
            ));
        }
        let aggs = Aggregates::build(&agg.agg_func, src.schema())?;
        let group_by = agg
            .group_by
            .iter()
            .map(|e| Operand::build(e, src.schema()))
            .collect::<Result<Vec<_>, _>>()?;
        let key_types: Vec<EvalType> = group_by.iter().map(|g| g.result_type()).collect();
        let mut schema = aggs.output_types();
        schema.extend_from_slice(&key_types);
        Ok(HashAggExecutor {
            src,
            aggs,
            group_by,
            keys: key_types
                .iter()
                .map(|t| Column::with_capacity(*t, 0))
                .collect(),
            groups: HashMap::with_hasher(GroupKeyHash::new()),
            schema,
            batch_size: BatchSize::default(),
            paging_size,
            drained: false,
            direct: Vec::new(),
            key_buf: Vec::new(),
            group_of_row: Vec::new(),
            identity: Vec::new(),
        })
    }

    /// Assigns every live row of `batch` to its group (creating groups as needed) and folds the
    /// rows into the aggregates.
    fn consume(&mut self, batch: &Batch) -> Result<()> {
        let n = batch.logical_rows.len();
        let evaluated = self
            .group_by
            .iter()
            .map(|g| g.eval(batch))
            .collect::<Result<Vec<Evaluated>, _>>()?;
        ensure_identity(&mut self.identity, n);
        let views: Vec<(&Column, &[usize])> = evaluated
            .iter()
            .map(|e| e.view(batch, &self.identity))
            .collect();
        self.group_of_row.clear();
        let lone_int = match views.as_slice() {
            [(Column::Int(values), rows)] => Some((values, *rows)),
            _ => None,
        };
        for j in 0..n {
            if let Some((values, rows)) = lone_int
                && let Some(x) = values[rows[j]]
                && (0..DIRECT_KEYS as i64).contains(&x)
            {
                if self.direct.is_empty() {
                    self.direct = vec![NO_GROUP; DIRECT_KEYS];
                }
                let slot = &mut self.direct[x as usize];
                if *slot == NO_GROUP {
                    let g = self.aggs.push_group();
                    if !self.keys[0].push_from(views[0].0, rows[j]) {
                        return Err(key_type_error(views[0].0, &self.keys[0]));
                    }
                    *slot = g as u32;
                }
                self.group_of_row.push(*slot as usize);
                continue;
            }
            self.key_buf.clear();
            for (col, rows) in &views {
                encode_group_key(&mut self.key_buf, col, rows[j]);
            }
            let g = match self.groups.get(self.key_buf.as_slice()) {
                Some(&g) => g,
                None => {
                    let g = self.aggs.push_group();
                    self.groups.insert(self.key_buf.clone(), g);
                    for (k, (col, rows)) in self.keys.iter_mut().zip(&views) {
                        if !k.push_from(col, rows[j]) {
                            return Err(key_type_error(col, k));
                        }
                    }
                    g
                }
            };
            self.group_of_row.push(g);
        }
        self.aggs.update(batch, Some(&self.group_of_row))
    }

    /// Every group as a partial row; the groups are forgotten.
    fn emit(&mut self, is_drained: bool) -> Result<BatchResult> {
        let rows = self.aggs.groups();
        let mut columns = self.aggs.take_output()?;
        for k in &mut self.keys {
            let empty = Column::with_capacity(k.eval_type(), 0);
            columns.push(std::mem::replace(k, empty));
        }
        self.groups.clear();
        self.direct.fill(NO_GROUP);
        Ok(BatchResult {
            batch: Batch {
                columns,
                logical_rows: (0..rows).collect(),
            },
            is_drained,
        })
    }
}

/// A group-by value whose type is not the one its item declared.
fn key_type_error(value: &Column, declared: &Column) -> crate::Error {
    EvalError::type_error(format!(
        "group-by value of type {:?} where {:?} was declared",
        value.eval_type(),
        declared.eval_type()
    ))
    .into()
}

/// Values `0..DIRECT_KEYS` of a lone Int group-by item find their group by indexing
/// [`HashAggExecutor::direct`], with no key encoding and no hash lookup: a `GROUP BY` over a
/// small code (a status, a month, a category id) is the common case, and the lookup was most of
/// its per-row cost. Every other value (NULL, negative, large) takes the hash map; a value
/// always takes the same path, so no group is made twice. Groups are numbered in order of first
/// appearance either way, so the output is the same.
const DIRECT_KEYS: usize = 4096;
const NO_GROUP: u32 = u32::MAX;

/// The hash of encoded group keys: a multiply-and-mix over 8-byte words, seeded per map from
/// the standard library's random keys.
///
/// SipHash (the default) cost about a sixth of a `GROUP BY` over a scan; keys here are short
/// (9 bytes for one integer) and hashed once per row. The random seed keeps an adversary who
/// controls the grouped values from precomputing collisions, which an unseeded hash like the
/// FxHash TiKV uses would allow; it is not a cryptographic guarantee, and a flood would only
/// make one query slower.
#[derive(Clone)]
struct GroupKeyHash {
    seed: u64,
}

impl GroupKeyHash {
    fn new() -> GroupKeyHash {
        GroupKeyHash {
            seed: RandomState::new().hash_one(0x5eed_u64) | 1,
        }
    }
}

impl BuildHasher for GroupKeyHash {
    type Hasher = GroupKeyHasher;

    fn build_hasher(&self) -> GroupKeyHasher {
        GroupKeyHasher { h: self.seed }
    }
}

struct GroupKeyHasher {
    h: u64,
}

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl GroupKeyHasher {
    #[inline]
    fn word(&mut self, w: u64) {
        self.h = (self.h ^ w).wrapping_mul(MUL).rotate_left(29);
    }
}

impl Hasher for GroupKeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.word(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.word(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.word(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // Final avalanche (murmur3's fmix64): the table uses the top bits for its groups.
        let mut h = self.h;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// Appends the group-key encoding of `col[i]`: a NULL flag byte, then the value (8 bytes for
/// numbers, a length-prefixed run for bytes). The column's type is fixed per group-by item, so
/// the encoding needs no type tag to be injective.
fn encode_group_key(buf: &mut Vec<u8>, col: &Column, i: usize) {
    match col {
        Column::Int(v) => match v[i] {
            None => buf.push(0),
            Some(x) => {
                buf.push(1);
                buf.extend_from_slice(&x.to_le_bytes());
            }
        },
        Column::UInt(v) => match v[i] {
            None => buf.push(0),
            Some(x) => {
                buf.push(1);
                buf.extend_from_slice(&x.to_le_bytes());
            }
        },
        Column::Real(v) => match v[i] {
            None => buf.push(0),
            Some(x) => {
                buf.push(1);
                let x = if x == 0.0 { 0.0 } else { x };
                buf.extend_from_slice(&x.to_bits().to_le_bytes());
            }
        },
        Column::Bytes(v) => match &v[i] {
            None => buf.push(0),
            Some(x) => {
                buf.push(1);
                buf.extend_from_slice(&(x.len() as u64).to_le_bytes());
                buf.extend_from_slice(x);
            }
        },
    }
}

impl BatchExecutor for HashAggExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        &self.schema
    }

    /// Consumes one source batch per call (so the caller can check its deadline between
    /// batches); returns the groups when the source is drained or the page is full.
    fn next_batch(&mut self, _scan_rows: usize) -> Result<BatchResult> {
        if self.drained {
            return Ok(BatchResult {
                batch: Batch::empty(&self.schema),
                is_drained: true,
            });
        }
        let r = self.src.next_batch(self.batch_size.next_size())?;
        if !r.batch.is_empty() {
            self.consume(&r.batch)?;
        }
        if r.is_drained {
            self.drained = true;
            return self.emit(true);
        }
        if self.paging_size > 0 && self.aggs.groups() as u64 >= self.paging_size {
            return self.emit(false);
        }
        Ok(BatchResult {
            batch: Batch::empty(&self.schema),
            is_drained: false,
        })
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        Some(&*self.src)
    }

    fn is_resumable(&self) -> bool {
        self.aggs.groups() == 0 && self.src.is_resumable()
    }
}
