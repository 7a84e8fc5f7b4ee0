//! Remote compaction: this server's compactions run on its workers (`kvengine`'s
//! `CompactionOffload`, installed on the engine when `kvengine.remote-compaction` is on).
//!
//! **Decision** ([`decide`], a pure function, one place): a compaction the engine planned goes
//! to a worker unless its inputs are below `remote-compaction-min-input-size`
//! (`small_input`), no worker is alive (`no_worker`), or, with
//! `remote-compaction-load-aware`, this server's CPU is idle (`server_idle`: the coprocessor
//! offload's CPU monitor). Each decision is counted in
//! `stratus_server_compaction_remote_decisions_total{reason}` (`remote` or the reason it
//! stayed), as `tikv_coprocessor_remote_decision_total` counts the coprocessor's.
//!
//! **Workers** are the coprocessor offload's pool (`worker_pool`): alive workers of this
//! server's zone first, the least busy, in turn. A job goes to the first; a connection error,
//! a timeout, a 503 (the worker is full or its memory high), another error status or an
//! answer that does not decode costs **one** retry on the next worker (with fresh output
//! ids), then the engine compacts here; a 400 (the worker found the job malformed) is not
//! retried, as every worker would refuse it. A worker that failed to answer (connection
//! error, timeout) counts as dead for the pool's TTL, for offloads and compactions alike; one
//! that answered 503 does not (it still serves coprocessor requests). Attempts are counted in
//! `stratus_server_compaction_remote_attempts_total{outcome}`, whole jobs, once the engine
//! checked the result, in `stratus_server_compaction_remote_jobs_total{result}` (`ok`,
//! `retried` (ok on the second worker), `fell_back` (compacted here), `rejected` (the result
//! failed the engine's check against the object store; compacted here)).
//!
//! The engine allocates the output ids, checks a result against the object store, proposes
//! it through the Raft log, and deletes the outputs of failed jobs (`kvengine`'s
//! `compaction_exec`): nothing here decides what becomes visible.

use std::sync::Arc;
use std::time::{Duration, Instant};

use changeset::{CompactionJob, CompactionResult};
use kvengine::{CompactionOffload, OffloadOutcome};
use node::{ClientError, HttpClient};

use crate::cpu_load::{CpuMonitor, CpuState};
use crate::metrics::{self, CompactionAttempt, CompactionDecision, CompactionJobResult};
use crate::worker_pool::WorkerPool;

/// `[kvengine] remote-compaction-*`.
#[derive(Debug, Clone)]
pub struct RemoteCompactionSettings {
    pub min_input_size: u64,
    pub timeout: Duration,
    pub load_aware: bool,
}

/// Where a compaction of `input_bytes` runs (module docs).
pub fn decide(
    settings: &RemoteCompactionSettings,
    input_bytes: u64,
    any_worker_alive: bool,
    cpu: Option<CpuState>,
) -> CompactionDecision {
    if input_bytes < settings.min_input_size {
        return CompactionDecision::SmallInput;
    }
    if !any_worker_alive {
        return CompactionDecision::NoWorker;
    }
    // No CPU signal counts as busy, as the coprocessor offload counts it.
    if settings.load_aware && cpu == Some(CpuState::Idle) {
        return CompactionDecision::ServerIdle;
    }
    CompactionDecision::Remote
}

/// The `POST /compact` URL of a worker whose coprocessor URL is `addr`.
pub fn compact_url(addr: &str) -> String {
    let base = addr
        .strip_suffix(wire::paths::COPROCESSOR)
        .unwrap_or(addr)
        .trim_end_matches('/');
    format!("{base}{}", wire::paths::COMPACT)
}

/// The offload installed on the engine.
pub struct RemoteCompaction {
    settings: RemoteCompactionSettings,
    workers: Arc<WorkerPool>,
    client: HttpClient,
    runtime: tokio::runtime::Handle,
    cpu: Option<Arc<CpuMonitor>>,
}

impl RemoteCompaction {
    pub fn new(
        settings: RemoteCompactionSettings,
        workers: Arc<WorkerPool>,
        client: HttpClient,
        runtime: tokio::runtime::Handle,
        cpu: Option<Arc<CpuMonitor>>,
    ) -> RemoteCompaction {
        RemoteCompaction {
            settings,
            workers,
            client,
            runtime,
            cpu,
        }
    }

    /// One attempt on worker `w`: the decoded result, or the outcome to count and a detail.
    fn attempt(
        &self,
        w: usize,
        body: bytes::Bytes,
        timeout: Duration,
    ) -> Result<CompactionResult, (CompactionAttempt, String)> {
        let addr = self.workers.addr(w);
        let url = compact_url(&addr);
        let _in_flight = self.workers.begin(w);
        let posted = self.runtime.block_on(self.client.post(&url, body, timeout));
        match posted {
            Ok(reply) if reply.status.is_success() => {
                self.workers.mark_alive(w);
                CompactionResult::decode_bytes(reply.body)
                    .map_err(|e| (CompactionAttempt::BadResponse, format!("{e}: worker={url}")))
            }
            // Full, or short of memory for compactions: not dead (its coprocessor requests go on).
            Ok(reply) if reply.status == hyper::StatusCode::SERVICE_UNAVAILABLE => Err((
                CompactionAttempt::Unavailable,
                format!(
                    "503: {}: worker={url}",
                    String::from_utf8_lossy(&reply.body).trim()
                ),
            )),
            Ok(reply) if reply.status == hyper::StatusCode::BAD_REQUEST => Err((
                CompactionAttempt::BadRequest,
                format!(
                    "worker refused the job: {}: worker={url}",
                    String::from_utf8_lossy(&reply.body).trim()
                ),
            )),
            Ok(reply) => Err((
                CompactionAttempt::BadStatus,
                format!(
                    "worker answered {}: {}: worker={url}",
                    reply.status,
                    String::from_utf8_lossy(&reply.body).trim()
                ),
            )),
            Err(e @ ClientError::Timeout { .. }) => {
                self.workers.mark_dead(w, Instant::now());
                Err((CompactionAttempt::Timeout, e.to_string()))
            }
            Err(e) => {
                self.workers.mark_dead(w, Instant::now());
                Err((CompactionAttempt::Connect, e.to_string()))
            }
        }
    }
}

/// Workers a job is tried on: the first and one retry.
const ATTEMPTS: usize = 2;

impl CompactionOffload for RemoteCompaction {
    fn wants(&self, _shard_id: u64, input_bytes: u64) -> bool {
        let now = Instant::now();
        let any_alive = self.workers.any_alive(now);
        let cpu = self.cpu.as_ref().map(|m| m.state(now));
        let decision = decide(&self.settings, input_bytes, any_alive, cpu);
        metrics::COMPACTION_DECISIONS
            .with_label_values(&[decision.as_str()])
            .inc();
        decision == CompactionDecision::Remote
    }

    fn timeout(&self) -> Duration {
        self.settings.timeout
    }

    fn run(
        &self,
        job: &CompactionJob,
        retry: &mut dyn FnMut() -> Option<CompactionJob>,
    ) -> Result<CompactionResult, String> {
        let started = Instant::now();
        let order = self.workers.order(started);
        let mut failures = Vec::new();
        let mut body = job.encode_to_bytes();
        for (i, w) in order.into_iter().take(ATTEMPTS).enumerate() {
            let left = self.settings.timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            if i > 0 {
                // Fresh output ids: the failed attempt may still be storing under its own.
                match retry() {
                    Some(next) => body = next.encode_to_bytes(),
                    None => break,
                }
            }
            match self.attempt(w, body.clone(), left) {
                Ok(result) => {
                    metrics::COMPACTION_ATTEMPTS
                        .with_label_values(&[CompactionAttempt::Ok.as_str()])
                        .inc();
                    tracing::debug!(
                        shard_id = job.shard_id,
                        outputs = result.outputs.len(),
                        merge_ms = result.merge_ms,
                        "compaction ran on a worker"
                    );
                    return Ok(result);
                }
                Err((outcome, detail)) => {
                    metrics::COMPACTION_ATTEMPTS
                        .with_label_values(&[outcome.as_str()])
                        .inc();
                    tracing::info!(shard_id = job.shard_id, %detail, "compaction attempt on a worker failed");
                    failures.push(detail);
                    // A job the worker refused as malformed fails the same way everywhere.
                    if outcome == CompactionAttempt::BadRequest {
                        break;
                    }
                }
            }
        }
        if failures.is_empty() {
            failures.push(format!(
                "no attempt fit in remote-compaction-timeout ({:?})",
                self.settings.timeout
            ));
        }
        Err(failures.join("; "))
    }

    fn finished(&self, shard_id: u64, outcome: OffloadOutcome<'_>) {
        let result = match outcome {
            OffloadOutcome::Used { attempts } if attempts <= 1 => CompactionJobResult::Ok,
            OffloadOutcome::Used { .. } => CompactionJobResult::Retried,
            OffloadOutcome::Failed { .. } => CompactionJobResult::FellBack,
            OffloadOutcome::Rejected { reason } => {
                tracing::warn!(
                    shard_id,
                    reason,
                    "a worker's compaction result failed the check: compacting here"
                );
                CompactionJobResult::Rejected
            }
        };
        metrics::COMPACTION_JOBS
            .with_label_values(&[result.as_str()])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(load_aware: bool) -> RemoteCompactionSettings {
        RemoteCompactionSettings {
            min_input_size: 100,
            timeout: Duration::from_secs(1),
            load_aware,
        }
    }

    #[test]
    fn a_compaction_stays_here_for_each_reason_and_goes_remote_otherwise() {
        use CompactionDecision::*;
        let s = settings(false);
        assert_eq!(decide(&s, 99, true, None), SmallInput);
        assert_eq!(decide(&s, 100, false, None), NoWorker);
        assert_eq!(decide(&s, 100, true, Some(CpuState::Idle)), Remote);
        let s = settings(true);
        assert_eq!(decide(&s, 100, true, Some(CpuState::Idle)), ServerIdle);
        assert_eq!(decide(&s, 100, true, Some(CpuState::Busy)), Remote);
        assert_eq!(decide(&s, 100, true, None), Remote);
    }

    #[test]
    fn the_compact_url_sits_beside_the_coprocessor_url() {
        assert_eq!(
            compact_url("http://127.0.0.1:7001/coprocessor"),
            "http://127.0.0.1:7001/compact"
        );
        assert_eq!(compact_url("https://w:1/"), "https://w:1/compact");
    }
}
