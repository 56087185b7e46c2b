//! The closed-loop load driver: `concurrency` tasks each issue one operation after
//! another for a warm-up (not recorded), then for a fixed duration or a fixed count.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::stats::{ms, percentile};

/// How long and how wide to load.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) concurrency: usize,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    /// Fixed number of measured operations instead of `duration`.
    pub(crate) count: Option<u64>,
}

/// What one operation reports beyond having finished.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outcome {
    /// The latency to record, when not the operation's whole wall time (setup excluded).
    pub(crate) latency: Option<Duration>,
    /// A second latency of interest (time to first frame, resume-only latency).
    pub(crate) part: Option<Duration>,
    /// SSE frames received.
    pub(crate) frames: u64,
}

/// What the measured phase saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct Measured {
    pub(crate) ops: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) seconds: f64,
    /// Sorted, microseconds.
    pub(crate) latencies: Vec<u64>,
    /// Sorted, microseconds.
    pub(crate) parts: Vec<u64>,
    pub(crate) frames: u64,
}

impl Measured {
    pub(crate) fn ops_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ops as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub(crate) fn latency_ms(&self, q: f64) -> Option<f64> {
        percentile(&self.latencies, q).map(ms)
    }

    pub(crate) fn part_ms(&self, q: f64) -> Option<f64> {
        percentile(&self.parts, q).map(ms)
    }
}

#[derive(Default)]
struct TaskResult {
    ops: u64,
    errors: u64,
    first_error: Option<String>,
    latencies: Vec<u64>,
    parts: Vec<u64>,
    frames: u64,
    last_done: Option<Instant>,
}

/// Runs `op` under `plan`. `op` receives a sequence number unique within this call.
pub(crate) async fn run<F, Fut>(plan: Plan, op: F) -> Measured
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, String>> + Send + 'static,
{
    let op = Arc::new(op);
    let seq = Arc::new(AtomicU64::new(0));
    if !plan.warmup.is_zero() {
        let deadline = Instant::now() + plan.warmup;
        phase(&op, &seq, plan.concurrency, Some(deadline), None, false).await;
    }
    let start = Instant::now();
    let deadline = plan.count.is_none().then(|| start + plan.duration);
    let limit = plan.count.map(|count| (Arc::new(AtomicU64::new(0)), count));
    let results = phase(&op, &seq, plan.concurrency, deadline, limit, true).await;
    let mut measured = Measured::default();
    let mut last_done = start;
    for result in results {
        measured.ops += result.ops;
        measured.errors += result.errors;
        if measured.first_error.is_none() {
            measured.first_error = result.first_error;
        }
        measured.latencies.extend(result.latencies);
        measured.parts.extend(result.parts);
        measured.frames += result.frames;
        if let Some(done) = result.last_done {
            last_done = last_done.max(done);
        }
    }
    measured.latencies.sort_unstable();
    measured.parts.sort_unstable();
    measured.seconds = last_done.duration_since(start).as_secs_f64();
    measured
}

async fn phase<F, Fut>(
    op: &Arc<F>,
    seq: &Arc<AtomicU64>,
    concurrency: usize,
    deadline: Option<Instant>,
    limit: Option<(Arc<AtomicU64>, u64)>,
    record: bool,
) -> Vec<TaskResult>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, String>> + Send + 'static,
{
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency.max(1) {
        let op = op.clone();
        let seq = seq.clone();
        let limit = limit.clone();
        tasks.push(tokio::spawn(async move {
            let mut result = TaskResult::default();
            loop {
                if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                    break;
                }
                if let Some((taken, count)) = &limit
                    && taken.fetch_add(1, Ordering::Relaxed) >= *count
                {
                    break;
                }
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let started = Instant::now();
                let outcome = op(n).await;
                let done = Instant::now();
                if !record {
                    continue;
                }
                result.last_done = Some(done);
                match outcome {
                    Ok(outcome) => {
                        result.ops += 1;
                        let latency = outcome.latency.unwrap_or(done - started);
                        result.latencies.push(latency.as_micros() as u64);
                        if let Some(part) = outcome.part {
                            result.parts.push(part.as_micros() as u64);
                        }
                        result.frames += outcome.frames;
                    }
                    Err(error) => {
                        result.errors += 1;
                        if result.first_error.is_none() {
                            result.first_error = Some(error);
                        }
                        // Do not spin on a dead server.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            result
        }));
    }
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok(result) => results.push(result),
            Err(error) => results.push(TaskResult {
                errors: 1,
                first_error: Some(format!("load task failed: {error}")),
                ..TaskResult::default()
            }),
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_counted_plan_runs_exactly_that_many_operations() {
        let plan = Plan {
            concurrency: 4,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(60),
            count: Some(103),
        };
        let measured = run(plan, |n| async move {
            if n % 10 == 3 {
                Err(format!("op {n}"))
            } else {
                Ok(Outcome {
                    frames: 2,
                    ..Outcome::default()
                })
            }
        })
        .await;
        assert_eq!(measured.ops + measured.errors, 103);
        assert_eq!(measured.errors, 10);
        assert_eq!(measured.frames, 2 * measured.ops);
        assert_eq!(measured.latencies.len() as u64, measured.ops);
        assert!(measured.first_error.unwrap().starts_with("op "));
    }
}
