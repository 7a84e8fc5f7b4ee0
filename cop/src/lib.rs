//! The Stratus coprocessor: everything needed to execute a pushed-down query against an engine
//! snapshot, with no knowledge of HTTP or of where the snapshot came from (a local shard and
//! one rebuilt on a worker run the same code).
//!
//! Data flows: [`proto`] (wire types) → [`handler`] (parse, cache fast path, paging) →
//! [`executors`] (scan → selection → aggregation / TopN / limit / projection, over column
//! batches of [`batch`]) with [`expr`] for expressions and [`codec`] for keys, rows and datums.
//! [`paging`] says how a page reports what it covered; [`topn_paging`] is the policy that turns
//! an offloaded large TopN into pages.

pub mod batch;
pub mod cache;
pub mod codec;
pub mod datum;
pub mod error;
pub mod executors;
pub mod expr;
pub mod handler;
pub mod paging;
pub mod proto;
pub mod topn_paging;

pub use error::{CodecError, Error, EvalError, Result};
