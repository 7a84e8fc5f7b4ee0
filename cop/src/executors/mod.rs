//! Vectorized executors: each pulls column batches from the one below it.
