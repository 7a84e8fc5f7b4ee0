//! The Stratus coprocessor: everything needed to execute a pushed-down query against an engine
//! snapshot, with no knowledge of HTTP or of where the snapshot came from (a local shard and
//! one rebuilt on a worker run the same code).
//!
//! What a request says is the `wire` crate's: the messages (`wire::coprocessor`), values
//! (`wire::datum`), key and row codecs (`wire::codec`) and paging ranges (`wire::paging`), so
//! that a client can build and read them without linking an engine. This crate executes them.
//!
//! Data flows: [`handler`] (parse, cache fast path, paging) → [`executors`] (scan → selection
//! → aggregation / TopN / limit / projection, over column batches of [`batch`]) with [`expr`]
//! for expressions; [`cache`] is the server side of the coprocessor cache; [`error`] says which
//! failures travel inside the response and which replace it; [`fuzzing`] holds the entry points
//! of the `cop_*` fuzz targets.

pub mod batch;
pub mod cache;
pub mod error;
pub mod executors;
pub mod expr;
pub mod fuzzing;
pub mod handler;

pub use error::{Error, EvalError, Result};
