//! `bench cancel`: how long a cancel sent to one instance takes to stop a run executing
//! on another instance of the same database. One run at a time: a `slow` run of a
//! minute is streamed from instance A on a thread made for it (so A's idle worker
//! executes it), and once it is running it is cancelled through instance B; the
//! latency is from sending the cancel to B until A's stream of the run ends, which
//! A does once it has stopped and settled the run.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::client::Http;
use crate::stats::{ms, percentile};

/// Options of `bench cancel`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct CancelArgs {
    /// Instance A, which executes the runs.
    #[arg(long)]
    url: String,
    /// Instance B, which is sent the cancels.
    #[arg(long)]
    other_url: String,
    /// Cancels measured.
    #[arg(long, default_value_t = 300)]
    count: usize,
    /// Cancels sent first and not recorded (connections, statement caches).
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// A label copied into the JSON line.
    #[arg(long, default_value = "")]
    label: String,
}

/// The longest one cancel may take before the measurement fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// Measures `count` cancels after the warm-up; prints one JSON line (stdout) and a
/// summary (stderr).
pub(crate) async fn run(args: CancelArgs) -> Result<(), String> {
    let (a, b) = (Http::new(&args.url), Http::new(&args.other_url));
    for _ in 0..args.warmup {
        once(&a, &b).await?;
    }
    let mut micros = Vec::with_capacity(args.count);
    for _ in 0..args.count {
        micros.push(once(&a, &b).await?.as_micros() as u64);
    }
    micros.sort_unstable();
    let at = |q| percentile(&micros, q).map(ms);
    let line = json!({
        "scenario": "cancel_across_instances",
        "label": args.label,
        "count": micros.len(),
        "p50_ms": at(0.5),
        "p90_ms": at(0.9),
        "p99_ms": at(0.99),
        "max_ms": at(1.0),
        "min_ms": at(0.0),
    });
    println!("{line}");
    eprintln!(
        "cancel on B -> run stopped on A, {} cancels: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        micros.len(),
        at(0.5).unwrap_or_default(),
        at(0.9).unwrap_or_default(),
        at(0.99).unwrap_or_default(),
        at(1.0).unwrap_or_default(),
    );
    Ok(())
}

/// One run executing on `a`, cancelled through `b`: the time from sending the cancel
/// until `a`'s stream of the run ended.
async fn once(a: &Http, b: &Http) -> Result<Duration, String> {
    let thread = Uuid::new_v4();
    let body = json!({
        "assistant_id": "slow",
        "input": {"delay_ms": 60_000},
        "if_not_exists": "create",
    });
    let mut stream = a
        .open(
            &format!("/threads/{thread}/runs/stream"),
            Bytes::from(body.to_string()),
        )
        .await?;
    let run = run_id(&mut stream).await?;
    let run_path = format!("/threads/{thread}/runs/{run}");
    let started = Instant::now();
    loop {
        let status = b.get_json(&run_path).await?["status"].clone();
        if status == "running" {
            break;
        }
        if status != "pending" || started.elapsed() > PATIENCE {
            return Err(format!("run {run} did not start: {status}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let sent = Instant::now();
    let cancel_path = format!("{run_path}/cancel");
    let cancel = b.post(&cancel_path, Bytes::new());
    let (cancelled, ended) = tokio::join!(cancel, tokio::time::timeout(PATIENCE, end(stream)));
    cancelled?;
    let ended = ended
        .map_err(|_| format!("run {run} was still streamed {PATIENCE:?} after its cancel"))??;
    let status = b.get_json(&run_path).await?["status"].clone();
    if status == "success" || status == "running" {
        return Err(format!("run {run} was not stopped: {status}"));
    }
    Ok(ended - sent)
}

/// The run id of the stream's first frame (`metadata`).
async fn run_id(stream: &mut Incoming) -> Result<String, String> {
    let mut text = Vec::new();
    while let Some(frame) = stream.frame().await {
        let frame = frame.map_err(|error| format!("reading the run's stream: {error}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        text.extend_from_slice(&data);
        // Only whole lines: a chunk may end within one.
        let Some(whole) = text.iter().rposition(|&byte| byte == b'\n') else {
            continue;
        };
        let Some(line) = text[..whole]
            .split(|&byte| byte == b'\n')
            .find_map(|line| line.strip_prefix(b"data: "))
        else {
            continue;
        };
        let metadata: Value = serde_json::from_slice(line.trim_ascii())
            .map_err(|error| format!("the metadata frame is not JSON: {error}"))?;
        return metadata["run_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("the first frame names no run: {metadata}"));
    }
    Err("the run's stream ended before its metadata frame".into())
}

/// Reads the stream to its end; when it ended.
async fn end(mut stream: Incoming) -> Result<Instant, String> {
    while let Some(frame) = stream.frame().await {
        frame.map_err(|error| format!("reading the run's stream: {error}"))?;
    }
    Ok(Instant::now())
}
