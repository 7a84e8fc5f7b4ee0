//! The Stratus storage server, as a library for now: the timestamp oracle ([`tso`]), the
//! [`concurrency_manager`] (max_ts and memory locks), [`latches`], and the transaction layer
//! ([`txn`]: 2PC, 1PC and async commit over kvengine, plus a coordinator).
//!
//! Its HTTP face (config, API, coprocessor endpoint, offload) comes with later issues.

pub mod concurrency_manager;
pub mod latches;
pub mod tso;
pub mod txn;

pub use concurrency_manager::ConcurrencyManager;
pub use tso::{Clock, ManualClock, SystemClock, Tso, TsoError, TsoOptions};
pub use txn::{Storage, TxnClient, TxnError};
