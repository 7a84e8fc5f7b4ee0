//! `POST /compact`: a storage server's compaction job, run here (remote compaction).
//!
//! The body is a `changeset::CompactionJob` (protobuf): the inputs by file id, the range, the
//! GC safe point, the table options and the output ids the server allocated. The worker
//! opens the inputs through its object store (and its file cache, with S3), merges them with
//! the engine's own merge (`kvengine::run_compaction_job`), stores each output under the next
//! id of the job, and answers a `changeset::CompactionResult` (200): the outputs' metadata,
//! which the server verifies against the store before it proposes them.
//!
//! **Bounds.** At most `worker.max-compaction-jobs` jobs run at once; one more is answered 503
//! at once, as is any job arriving while memory is above `cop-limiter.high-mem-ratio` (the
//! cop-limiter's reading): a compaction holds one output table and the inputs' blocks it is
//! merging, and the server has somewhere else to go (another worker, or itself), so waiting
//! here would only delay it. Other answers: 400 for a body that is not a valid job (it names
//! an unknown column family, lacks options or ids, ...) or a job that cannot run as described
//! (more outputs than ids, an L0 input without the section it names), 413 over
//! `worker.max-request-size`, 502 when the object store fails, 504 when the job's deadline
//! passed before its last output was stored (nothing is stored after it), 500 on a panic.
//!
//! Metrics: `stratus_worker_compaction_jobs_total{result}`,
//! `stratus_worker_compaction_running`, `stratus_worker_compaction_bytes_total{direction}`
//! (`read`: input table bytes, `written`: output table bytes).

use std::sync::Arc;

use ::node::http::HttpError;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use changeset::{CompactionJob, CompactionResult};
use prost::Message;

use crate::metrics::{self, CompactionJobResult};
use crate::service::read_body;
use crate::state::WorkerState;

pub(crate) async fn compact_handler(
    State(state): State<Arc<WorkerState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (result, answer) = compact_answer(&state, &headers, body).await;
    metrics::COMPACTION_JOBS
        .with_label_values(&[result.as_str()])
        .inc();
    answer
}

async fn compact_answer(
    state: &Arc<WorkerState>,
    headers: &HeaderMap,
    body: Body,
) -> (CompactionJobResult, Response) {
    let limit = state.config().max_request_bytes();
    let body = match read_body(headers, body, limit, "compaction job").await {
        Ok(body) => body,
        Err(e) if e.result == crate::metrics::RequestResult::TooLarge => {
            return (CompactionJobResult::TooLarge, e.error.into_response());
        }
        Err(e) => return (CompactionJobResult::BadRequest, e.error.into_response()),
    };
    let job = match CompactionJob::decode_checked(body) {
        Ok(job) => job,
        Err(e) => {
            return (
                CompactionJobResult::BadRequest,
                HttpError::bad_request(e.to_string()).into_response(),
            );
        }
    };
    let Some(slot) = state.compaction_slots().try_acquire() else {
        let reason = format!(
            "compaction jobs full: running={} max={} (worker.max-compaction-jobs)",
            state.compaction_slots().running(),
            state.config().worker.max_compaction_jobs
        );
        return (
            CompactionJobResult::Busy,
            HttpError::unavailable(reason).into_response(),
        );
    };
    let high = state.config().cop_limiter.high_mem_ratio;
    if let Some(m) = state.limiter().read_memory()
        && m.ratio() > high
    {
        let reason = format!(
            "worker memory is high (cop-limiter.high-mem-ratio): ratio={:.3} high_mem_ratio={high}",
            m.ratio()
        );
        return (
            CompactionJobResult::Busy,
            HttpError::unavailable(reason).into_response(),
        );
    }
    let worker = Arc::clone(state);
    let ran = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        kvengine::run_compaction_job(worker.dfs().as_ref(), worker.block_cache(), &job)
    })
    .await;
    match ran {
        Ok(Ok(result)) => {
            metrics::COMPACTION_BYTES
                .with_label_values(&["read"])
                .inc_by(result.input_bytes);
            metrics::COMPACTION_BYTES
                .with_label_values(&["written"])
                .inc_by(result.outputs.iter().map(|t| t.size).sum());
            (CompactionJobResult::Ok, encoded(&result))
        }
        Ok(Err(e)) => failed(e),
        Err(join) => {
            tracing::error!("compaction handler failed: {join}");
            (
                CompactionJobResult::Internal,
                HttpError::internal(format!("compaction handler failed: {join}")).into_response(),
            )
        }
    }
}

fn encoded(result: &CompactionResult) -> Response {
    (
        [(header::CONTENT_TYPE, wire::PROTOBUF_CONTENT_TYPE)],
        result.encode_to_vec(),
    )
        .into_response()
}

/// The answer to a job that failed while running.
fn failed(e: kvengine::Error) -> (CompactionJobResult, Response) {
    let message = crate::error_chain(&e);
    match &e {
        kvengine::Error::Timeout { .. } => (
            CompactionJobResult::DeadlinePassed,
            HttpError {
                status: StatusCode::GATEWAY_TIMEOUT,
                message,
            }
            .into_response(),
        ),
        e if e.kind() == kvengine::ErrorKind::Invalid => (
            CompactionJobResult::BadRequest,
            HttpError::bad_request(message).into_response(),
        ),
        _ => {
            tracing::warn!("compaction job failed: {message}");
            (
                CompactionJobResult::StoreError,
                HttpError {
                    status: StatusCode::BAD_GATEWAY,
                    message,
                }
                .into_response(),
            )
        }
    }
}

/// The bound on jobs running at once (`worker.max-compaction-jobs`).
pub struct CompactionSlots {
    max: usize,
    running: Arc<std::sync::atomic::AtomicUsize>,
}

/// A running job's place; released on drop.
pub struct Slot {
    running: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let now = self
            .running
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            - 1;
        metrics::COMPACTION_RUNNING.set(now as i64);
    }
}

impl CompactionSlots {
    pub fn new(max: usize) -> CompactionSlots {
        CompactionSlots {
            max,
            running: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    /// A place, unless `max` jobs run already.
    pub fn try_acquire(&self) -> Option<Slot> {
        use std::sync::atomic::Ordering;
        let mut cur = self.running.load(Ordering::Acquire);
        loop {
            if cur >= self.max {
                return None;
            }
            match self.running.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    metrics::COMPACTION_RUNNING.set((cur + 1) as i64);
                    return Some(Slot {
                        running: Arc::clone(&self.running),
                    });
                }
                Err(now) => cur = now,
            }
        }
    }

    pub fn running(&self) -> usize {
        self.running.load(std::sync::atomic::Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_admit_up_to_the_bound_and_free_on_drop() {
        let slots = CompactionSlots::new(2);
        let a = slots.try_acquire().expect("first");
        let b = slots.try_acquire().expect("second");
        assert!(slots.try_acquire().is_none());
        assert_eq!(slots.running(), 2);
        drop(a);
        let c = slots.try_acquire().expect("a freed place");
        drop((b, c));
        assert_eq!(slots.running(), 0);
    }
}
