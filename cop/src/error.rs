//! Errors of the coprocessor.
//!
//! Two kinds travel differently: an [`EvalError`] (overflow, a bad value in a row, a type the
//! expression cannot take) is a property of the query on this data and goes back inside the
//! response data ([`wire::coprocessor::SelectResponse::error`], its code one of
//! [`wire::coprocessor::eval_error_code`]); an [`Error`] means the request itself could not be
//! served (malformed DAG, a lock, a storage failure) and goes into the response's error fields.
//! A decoder's [`CodecError`] met during execution (a corrupt stored row) is an [`EvalError`].

use wire::codec::CodecError;
use wire::coprocessor::eval_error_code as code;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct EvalError {
    pub code: i32,
    pub msg: String,
}

impl EvalError {
    pub fn overflow(what: impl std::fmt::Display) -> EvalError {
        EvalError {
            code: code::OVERFLOW,
            msg: format!("value out of range: {what}"),
        }
    }

    pub fn type_error(msg: impl Into<String>) -> EvalError {
        EvalError {
            code: code::TYPE,
            msg: msg.into(),
        }
    }

    pub fn corrupt(msg: impl Into<String>) -> EvalError {
        EvalError {
            code: code::CORRUPT_DATA,
            msg: msg.into(),
        }
    }
}

impl From<CodecError> for EvalError {
    fn from(e: CodecError) -> EvalError {
        EvalError::corrupt(e.to_string())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request or its DAG is malformed or asks for something not served.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The request or DAG bytes did not decode.
    #[error("request does not decode: {what}")]
    Decode {
        what: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    /// Evaluation failed; reported inside the response data.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// A read of the snapshot failed (including a lock in the way: see
    /// `kvengine::ErrorKind::KeyIsLocked`).
    #[error(transparent)]
    Storage(#[from] kvengine::Error),
    /// The deadline passed before the request finished.
    #[error("deadline exceeded: deadline_ms={deadline_ms}")]
    DeadlineExceeded { deadline_ms: u64 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
