//! S8: S3 (an echo wait on a fresh thread) with a run-completion webhook to a receiver
//! in this process, answering 204 at once: runs/s beside S3's, and deliveries/s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::routing::post;
use bytes::Bytes;
use serde_json::json;
use uuid::Uuid;

use super::{Bench, contains, echo_body};

/// Counts the deliveries it answers.
struct Receiver {
    url: String,
    delivered: Arc<AtomicU64>,
}

impl Receiver {
    async fn start() -> Result<Self, String> {
        let delivered = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&delivered);
        let app = axum::Router::new().route(
            "/hook",
            post(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                async { StatusCode::NO_CONTENT }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|error| format!("S8: cannot start the webhook receiver: {error}"))?;
        let address = listener
            .local_addr()
            .map_err(|error| format!("S8: {error}"))?;
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self {
            url: format!("http://{address}/hook"),
            delivered,
        })
    }

    fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Waits until deliveries stop arriving (none for 200 ms), at most `limit`.
    async fn settle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut last = self.delivered();
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = self.delivered();
            if now == last {
                return;
            }
            last = now;
        }
    }
}

impl Bench {
    pub(super) async fn s8(&mut self) -> Result<(), String> {
        let receiver = Receiver::start().await?;
        let mut body = echo_body();
        body["if_not_exists"] = json!("create");
        body["webhook"] = json!(receiver.url);
        let body = Bytes::from(body.to_string());
        let path = format!("/threads/{}/runs/wait", Uuid::new_v4());
        let answer = self.http.post(&path, body.clone()).await?;
        if !contains(&answer, b"echo: hi") {
            return Err(format!(
                "S8: the run did not echo: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        receiver.settle(Duration::from_secs(5)).await;
        if receiver.delivered() == 0 {
            return Err("S8: the run's webhook never reached the receiver".into());
        }
        for concurrency in self.widths(&[1, 32]) {
            let before = receiver.delivered();
            let started = Instant::now();
            let m = self.load_fresh_thread_waits(concurrency, &body).await;
            receiver.settle(Duration::from_secs(30)).await;
            let delivered = receiver.delivered() - before;
            let s3 = self.figure("S3", concurrency, "ops_per_sec");
            let extra = json!({
                "deliveries": delivered,
                "deliveries_per_sec": delivered as f64 / started.elapsed().as_secs_f64(),
                "s3_fraction": s3.filter(|s3| *s3 > 0.0).map(|s3| m.ops_per_sec() / s3),
            });
            self.emit(
                "S8",
                "S3 with a webhook to a local receiver",
                concurrency,
                &m,
                extra,
            );
        }
        Ok(())
    }
}
