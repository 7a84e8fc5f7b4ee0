//! The one error of every decoder in [`crate::codec`]: bytes that do not read as what they
//! should be. It says what was being read and what was wrong with it, never panics the caller,
//! and converts into the coprocessor's evaluation error where a row is read during execution.

/// A decoder of keys, rows or datums met bytes it cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt {what}: {detail}")]
pub struct CodecError {
    pub what: &'static str,
    pub detail: String,
}

impl CodecError {
    pub fn new(what: &'static str, detail: impl Into<String>) -> CodecError {
        CodecError {
            what,
            detail: detail.into(),
        }
    }
}
