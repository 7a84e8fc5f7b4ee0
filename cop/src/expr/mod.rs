//! Expressions compiled from the DAG and evaluated over column batches.
