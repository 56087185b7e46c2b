//! The scenarios. Each validates the server's answer once before loading it, then
//! reports throughput and latency percentiles as one JSON line.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::RunArgs;
use crate::client::Http;
use crate::load::{self, Measured, Outcome, Plan};

mod semantic;
mod webhook;

/// The echo input every echo scenario sends.
fn echo_body() -> Value {
    json!({"assistant_id": "echo", "input": {"messages": [{"type": "human", "content": "hi"}]}})
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

struct Bench {
    args: RunArgs,
    http: Http,
    /// Ceiling requests/s by concurrency, measured in this sitting.
    ceiling: BTreeMap<usize, f64>,
    lines: Vec<Value>,
}

/// Runs the selected scenarios in a fixed order (S6 last: it leaves 10,000 threads).
pub(crate) async fn run_all(args: RunArgs) -> Result<(), String> {
    let selected = |name: &str| args.scenarios.iter().any(|s| s.eq_ignore_ascii_case(name));
    let loadavg_before = loadavg();
    // Idle RSS first, before this tool has sent the server anything.
    let rss_at_start = match args.server_pid {
        Some(pid) => Some(rss_kb(pid)?),
        None => None,
    };
    let mut bench = Bench {
        http: Http::with_key(&args.url, api_key(args.api_key.as_deref())?),
        args: args.clone(),
        ceiling: BTreeMap::new(),
        lines: Vec::new(),
    };
    if let Some(url) = args.ceiling_url.clone() {
        let mut widths: Vec<usize> = Vec::new();
        for (name, list) in [
            ("s1", &[1, 32][..]),
            ("s2", &[1, 32]),
            ("s3", &[1, 32]),
            ("s4", &[1, 16]),
            ("s5", &[1, 32]),
            ("s5q", &[1, 32]),
            ("s7", &[1]),
            ("s8", &[1, 32]),
        ] {
            if selected(name) {
                widths.extend(bench.widths(list));
            }
        }
        widths.sort_unstable();
        widths.dedup();
        bench.ceiling_runs(&url, &widths).await?;
    }
    for name in ["s1", "s2", "s3", "s4", "s5", "s5q", "s7", "s8"] {
        if !selected(name) {
            continue;
        }
        let result = match name {
            "s1" => bench.s1().await,
            "s2" => bench.s2().await,
            "s3" => bench.s3().await,
            "s4" => bench.s4().await,
            "s5" => bench.s5().await,
            "s5q" => bench.s5q().await,
            "s7" => bench.s7().await,
            _ => bench.s8().await,
        };
        if let Err(error) = result {
            bench.failed(&name.to_uppercase(), &error);
        }
    }
    if selected("s6") {
        match (args.server_pid, rss_at_start) {
            (Some(pid), Some(idle)) => {
                if let Err(error) = bench.s6(pid, idle).await {
                    bench.failed("S6", &error);
                }
            }
            _ => eprintln!("S6 skipped: give --server-pid to read the server's memory"),
        }
    }
    bench.print_table();
    let meta = json!({
        "scenario": "meta",
        "label": args.label,
        "server": args.url,
        "loadavg_before": loadavg_before,
        "loadavg_after": loadavg(),
    });
    println!("{meta}");
    Ok(())
}

/// The 1/5/15-minute load averages: other work on the machine shows up here.
/// The `--api-key` as a header value; a key that cannot be one is refused.
fn api_key(key: Option<&str>) -> Result<Option<http::HeaderValue>, String> {
    key.map(|key| {
        http::HeaderValue::from_str(key).map_err(|_| "--api-key is not a valid header value".into())
    })
    .transpose()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Bench {
    fn plan(&self, concurrency: usize) -> Plan {
        Plan {
            concurrency,
            warmup: Duration::from_secs_f64(self.args.warmup.max(0.0)),
            duration: Duration::from_secs_f64(self.args.duration.max(0.1)),
            count: self.args.count,
        }
    }

    /// Prints and keeps one JSON line.
    fn emit(&mut self, scenario: &str, name: &str, concurrency: usize, m: &Measured, extra: Value) {
        let mut line = Map::new();
        line.insert("scenario".into(), json!(scenario));
        line.insert("name".into(), json!(name));
        if !self.args.label.is_empty() {
            line.insert("label".into(), json!(self.args.label));
        }
        line.insert("server".into(), json!(self.http.base()));
        line.insert("concurrency".into(), json!(concurrency));
        line.insert("ops".into(), json!(m.ops));
        line.insert("errors".into(), json!(m.errors));
        line.insert("seconds".into(), json!(round(m.seconds, 3)));
        line.insert("ops_per_sec".into(), json!(round(m.ops_per_sec(), 1)));
        line.insert(
            "p50_ms".into(),
            json!(m.latency_ms(0.50).map(|v| round(v, 3))),
        );
        line.insert(
            "p99_ms".into(),
            json!(m.latency_ms(0.99).map(|v| round(v, 3))),
        );
        if scenario != "C0"
            && let Some(ceiling) = self.ceiling.get(&concurrency)
        {
            line.insert("ceiling_ops_per_sec".into(), json!(round(*ceiling, 1)));
            line.insert(
                "ceiling_fraction".into(),
                json!(round(m.ops_per_sec() / ceiling, 4)),
            );
        }
        if let Value::Object(extra) = extra {
            line.extend(extra);
        }
        if let Some(error) = &m.first_error {
            line.insert("first_error".into(), json!(error));
        }
        let line = Value::Object(line);
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
        if m.errors > 0 {
            eprintln!(
                "warning: {scenario} c={concurrency}: {} errors, first: {}",
                m.errors,
                m.first_error.as_deref().unwrap_or("?")
            );
        }
        self.lines.push(line);
    }

    /// A scenario that could not be measured (its validation failed): one JSON line
    /// saying why, and the run goes on with the next scenario.
    fn failed(&mut self, scenario: &str, error: &str) {
        eprintln!("error: {scenario} not measured: {error}");
        let line = json!({
            "scenario": scenario,
            "label": self.args.label,
            "server": self.http.base(),
            "failed": error,
        });
        println!("{line}");
    }

    async fn ceiling_runs(&mut self, url: &str, widths: &[usize]) -> Result<(), String> {
        let http = Http::new(url);
        http.post("/threads", Bytes::from_static(b"{}"))
            .await
            .map_err(|error| format!("the ceiling at {url} does not answer: {error}"))?;
        for &concurrency in widths {
            let client = http.clone();
            let m = load::run(self.plan(concurrency), move |_| {
                let client = client.clone();
                async move {
                    client.post("/threads", Bytes::from_static(b"{}")).await?;
                    Ok(Outcome::default())
                }
            })
            .await;
            self.ceiling.insert(concurrency, m.ops_per_sec());
            let saved = std::mem::replace(&mut self.http, http.clone());
            self.emit(
                "C0",
                "raw axum ceiling: POST returning small JSON",
                concurrency,
                &m,
                json!({}),
            );
            self.http = saved;
        }
        Ok(())
    }

    /// The concurrencies of `list` the run asked for.
    /// A figure an earlier scenario of this sitting reported.
    fn figure(&self, scenario: &str, concurrency: usize, field: &str) -> Option<f64> {
        self.lines
            .iter()
            .find(|line| line["scenario"] == scenario && line["concurrency"] == concurrency)
            .and_then(|line| line[field].as_f64())
    }

    fn widths(&self, list: &[usize]) -> Vec<usize> {
        list.iter()
            .copied()
            .filter(|width| {
                self.args.concurrency.is_empty() || self.args.concurrency.contains(width)
            })
            .collect()
    }

    async fn s1(&mut self) -> Result<(), String> {
        let created = self.http.post_json("/threads", &json!({})).await?;
        if created["thread_id"].as_str().is_none() {
            return Err(format!(
                "S1: POST /threads answered without thread_id: {created}"
            ));
        }
        for concurrency in self.widths(&[1, 32]) {
            let http = self.http.clone();
            let m = load::run(self.plan(concurrency), move |_| {
                let http = http.clone();
                async move {
                    http.post("/threads", Bytes::from_static(b"{}")).await?;
                    Ok(Outcome::default())
                }
            })
            .await;
            self.emit("S1", "create an empty thread", concurrency, &m, json!({}));
        }
        Ok(())
    }

    async fn s2(&mut self) -> Result<(), String> {
        let body = Bytes::from(echo_body().to_string());
        let answer = self.http.post("/runs/wait", body.clone()).await?;
        if !contains(&answer, b"echo: hi") {
            return Err(format!(
                "S2: POST /runs/wait did not echo: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        for concurrency in self.widths(&[1, 32]) {
            let http = self.http.clone();
            let body = body.clone();
            let m = load::run(self.plan(concurrency), move |_| {
                let http = http.clone();
                let body = body.clone();
                async move {
                    let answer = http.post("/runs/wait", body).await?;
                    if !contains(&answer, b"echo: hi") {
                        return Err(format!(
                            "unexpected answer: {}",
                            String::from_utf8_lossy(&answer)
                        ));
                    }
                    Ok(Outcome::default())
                }
            })
            .await;
            self.emit("S2", "stateless echo run, wait", concurrency, &m, json!({}));
        }
        Ok(())
    }

    async fn s3(&mut self) -> Result<(), String> {
        let answer = thread_echo(&self.http, Uuid::new_v4()).await?;
        if !contains(&answer, b"echo: hi") {
            return Err(format!(
                "S3: the thread run did not echo: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        let mut body = echo_body();
        body["if_not_exists"] = json!("create");
        let body = Bytes::from(body.to_string());
        for concurrency in self.widths(&[1, 32]) {
            let m = self.load_fresh_thread_waits(concurrency, &body).await;
            self.emit(
                "S3",
                "echo run, wait, on a fresh thread (if_not_exists=create)",
                concurrency,
                &m,
                json!({}),
            );
        }
        Ok(())
    }

    /// Loads `POST /threads/<new id>/runs/wait` with an echo `body`, checking each
    /// answer echoes (S3, S8).
    async fn load_fresh_thread_waits(&self, concurrency: usize, body: &Bytes) -> Measured {
        let http = self.http.clone();
        let body = body.clone();
        load::run(self.plan(concurrency), move |_| {
            let http = http.clone();
            let body = body.clone();
            async move {
                let path = format!("/threads/{}/runs/wait", Uuid::new_v4());
                let answer = http.post(&path, body).await?;
                if !contains(&answer, b"echo: hi") {
                    return Err(format!(
                        "unexpected answer: {}",
                        String::from_utf8_lossy(&answer)
                    ));
                }
                Ok(Outcome::default())
            }
        })
        .await
    }

    async fn s4(&mut self) -> Result<(), String> {
        let n = self.args.steps;
        let mut body = json!({
            "assistant_id": "steps",
            "input": {"n": n},
            "stream_mode": ["values", "updates", "custom"],
            "config": {"recursion_limit": n * 2 + 10},
        });
        if let Some(durability) = &self.args.durability {
            body["durability"] = json!(durability);
        }
        let body = Bytes::from(body.to_string());
        // Validate one run: metadata + (n + 1) values + n updates + n custom, no error.
        // A transport failure (the server aborts a lagging stream) is retried.
        let mut attempt = 0;
        let (streamed, text) = loop {
            attempt += 1;
            let thread = new_thread(&self.http).await?;
            let mut text = Vec::new();
            match self
                .http
                .stream(
                    &format!("/threads/{thread}/runs/stream"),
                    body.clone(),
                    Some(&mut text),
                )
                .await
            {
                Ok(streamed) => break (streamed, text),
                Err(error) if attempt >= 3 => return Err(format!("S4: {error} (3 attempts)")),
                Err(error) => eprintln!("warning: S4 validation attempt {attempt}: {error}"),
            }
        };
        if contains(&text, b"event: error") || streamed.frames < 3 * n {
            let tail = &text[text.len().saturating_sub(400)..];
            return Err(format!(
                "S4: a steps run streamed {} frames (expected about {}); tail: {}",
                streamed.frames,
                3 * n + 2,
                String::from_utf8_lossy(tail)
            ));
        }
        for concurrency in self.widths(&[1, 16]) {
            let http = self.http.clone();
            let body = body.clone();
            let m = load::run(self.plan(concurrency), move |_| {
                let http = http.clone();
                let body = body.clone();
                async move {
                    let thread = new_thread(&http).await?;
                    let started = Instant::now();
                    let streamed = http
                        .stream(&format!("/threads/{thread}/runs/stream"), body, None)
                        .await?;
                    if streamed.frames < 3 * n {
                        return Err(format!("the stream ended after {} frames", streamed.frames));
                    }
                    Ok(Outcome {
                        latency: Some(started.elapsed()),
                        part: streamed.first_frame,
                        frames: streamed.frames,
                    })
                }
            })
            .await;
            let frames_per_sec = if m.seconds > 0.0 {
                m.frames as f64 / m.seconds
            } else {
                0.0
            };
            let extra = json!({
                "steps": n,
                "frames": m.frames,
                "frames_per_run": m.frames.checked_div(m.ops).unwrap_or(0),
                "frames_per_sec": round(frames_per_sec, 0),
                "ttff_p50_ms": m.part_ms(0.50).map(|v| round(v, 3)),
                "ttff_p99_ms": m.part_ms(0.99).map(|v| round(v, 3)),
            });
            self.emit(
                "S4",
                "stream a steps run (values+updates+custom)",
                concurrency,
                &m,
                extra,
            );
        }
        Ok(())
    }

    /// Puts `items` values (`value(i)` at key `item-i`) into `namespace` at c=32, as one
    /// counted load reported as `<scenario>-put`.
    async fn fill_namespace(
        &mut self,
        scenario: &str,
        name: &str,
        namespace: &Value,
        items: u64,
        value: impl Fn(u64) -> Value + Send + Sync + 'static,
    ) -> Result<(), String> {
        let put_plan = Plan {
            concurrency: 32,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(3600),
            count: Some(items),
        };
        let http = self.http.clone();
        let ns = namespace.clone();
        let m = load::run(put_plan, move |i| {
            let http = http.clone();
            let body = Bytes::from(
                json!({"namespace": ns, "key": format!("item-{i}"), "value": value(i)}).to_string(),
            );
            async move {
                http.call(http::Method::PUT, "/store/items", body).await?;
                Ok(Outcome::default())
            }
        })
        .await;
        if m.errors > 0 {
            return Err(format!(
                "{scenario}: {} puts failed, first: {}",
                m.errors,
                m.first_error.unwrap_or_default()
            ));
        }
        self.emit(
            &format!("{scenario}-put"),
            name,
            32,
            &m,
            json!({"items": items}),
        );
        Ok(())
    }

    /// Loads `POST /store/items/search` with `search(n)` bodies at c=1 and c=32, each
    /// answer checked by `found` (an answer it refuses counts as an error).
    async fn search_loads(
        &mut self,
        scenario: &str,
        name: &str,
        search: impl Fn(u64) -> Bytes + Clone + Send + Sync + 'static,
        found: fn(&[u8]) -> bool,
        extra: Value,
    ) {
        for concurrency in self.widths(&[1, 32]) {
            let http = self.http.clone();
            let search = search.clone();
            let m = load::run(self.plan(concurrency), move |n| {
                let http = http.clone();
                let body = search(n);
                async move {
                    let answer = http.post("/store/items/search", body).await?;
                    if !found(&answer) {
                        return Err(format!(
                            "unexpected search answer: {}",
                            String::from_utf8_lossy(&answer)
                        ));
                    }
                    Ok(Outcome::default())
                }
            })
            .await;
            self.emit(scenario, name, concurrency, &m, extra.clone());
        }
    }

    async fn s5(&mut self) -> Result<(), String> {
        let items = self.args.store_items.max(1);
        let groups = 1000.min(items);
        let namespace = json!(["bench", "s5", Uuid::new_v4().simple().to_string()]);
        self.fill_namespace(
            "S5",
            "store put (filling the namespace)",
            &namespace,
            items,
            move |i| json!({"i": i, "group": i % groups, "text": format!("item number {i}")}),
        )
        .await?;
        let search = move |g: u64| {
            Bytes::from(
                json!({"namespace_prefix": namespace, "filter": {"group": g % groups}, "limit": 10})
                    .to_string(),
            )
        };
        let expected = (items / groups).min(10) as usize;
        let found = self
            .http
            .post_json(
                "/store/items/search",
                &serde_json::from_slice(&search(7)).unwrap_or_default(),
            )
            .await?;
        let count = found["items"].as_array().map_or(0, Vec::len);
        if count != expected {
            return Err(format!(
                "S5: a filtered search found {count} items, expected {expected}: {found}"
            ));
        }
        self.search_loads(
            "S5",
            "filtered store search",
            search,
            |answer| contains(answer, b"\"group\""),
            json!({"items": items, "matches_per_filter": items / groups}),
        )
        .await;
        Ok(())
    }

    async fn s6(&mut self, pid: u32, idle_kb: u64) -> Result<(), String> {
        let threads = self.args.memory_threads.max(1);
        let before_kb = rss_kb(pid)?;
        let plan = Plan {
            concurrency: 32,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(3600),
            count: Some(threads),
        };
        let http = self.http.clone();
        let m = load::run(plan, move |_| {
            let http = http.clone();
            async move {
                thread_echo(&http, Uuid::new_v4()).await?;
                Ok(Outcome::default())
            }
        })
        .await;
        // Let finished runs' buffers go and the allocator settle.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after_kb = rss_kb(pid)?;
        // One more thread, to measure what the API hands back about it.
        let thread = Uuid::new_v4();
        thread_echo(&self.http, thread).await?;
        let thread_json = self.http.get_json(&format!("/threads/{thread}")).await?;
        let history = self
            .http
            .post_json(
                &format!("/threads/{thread}/history"),
                &json!({"limit": 1000}),
            )
            .await?;
        let runs = self
            .http
            .get_json(&format!("/threads/{thread}/runs"))
            .await?;
        let sizes = [&thread_json, &history, &runs].map(|value| value.to_string().len() as f64);
        let own_state = sizes.iter().sum::<f64>();
        let growth = (after_kb as f64 - before_kb as f64) * 1024.0 / m.ops.max(1) as f64;
        let extra = json!({
            "threads": m.ops,
            "idle_rss_kb": idle_kb,
            "idle_rss_mb": round(idle_kb as f64 / 1024.0, 2),
            "before_rss_kb": before_kb,
            "after_rss_kb": after_kb,
            "growth_per_thread_bytes": round(growth, 0),
            "thread_json_bytes": sizes[0],
            "history_json_bytes": sizes[1],
            "runs_json_bytes": sizes[2],
            "own_state_bytes": own_state,
            "beyond_state_bytes": round(growth - own_state, 0),
        });
        self.emit(
            "S6",
            "memory: 10,000 threads each with one echo run",
            32,
            &m,
            extra,
        );
        Ok(())
    }

    async fn s7(&mut self) -> Result<(), String> {
        let first = json!({"assistant_id": "approval", "input": {"topic": "bench"}}).to_string();
        let resume = json!({"assistant_id": "approval", "command": {"resume": true}}).to_string();
        let (first, resume) = (Bytes::from(first), Bytes::from(resume));
        let round_trip = |http: Http, first: Bytes, resume: Bytes| async move {
            let thread = new_thread(&http).await?;
            let path = format!("/threads/{thread}/runs/wait");
            let started = Instant::now();
            let paused = http.post(&path, first).await?;
            if !contains(&paused, b"approve?") {
                return Err(format!(
                    "no interrupt: {}",
                    String::from_utf8_lossy(&paused)
                ));
            }
            let resumed_at = Instant::now();
            let done = http.post(&path, resume).await?;
            if !contains(&done, b"approved") {
                return Err(format!("not approved: {}", String::from_utf8_lossy(&done)));
            }
            Ok(Outcome {
                latency: Some(started.elapsed()),
                part: Some(resumed_at.elapsed()),
                frames: 0,
            })
        };
        round_trip(self.http.clone(), first.clone(), resume.clone())
            .await
            .map_err(|error| format!("S7: {error}"))?;
        let http = self.http.clone();
        let m = load::run(self.plan(1), move |_| {
            round_trip(http.clone(), first.clone(), resume.clone())
        })
        .await;
        let extra = json!({
            "resume_p50_ms": m.part_ms(0.50).map(|v| round(v, 3)),
            "resume_p99_ms": m.part_ms(0.99).map(|v| round(v, 3)),
        });
        self.emit(
            "S7",
            "approval: interrupt then resume (two waits)",
            1,
            &m,
            extra,
        );
        Ok(())
    }

    fn print_table(&self) {
        let mut out = std::io::stderr().lock();
        let _ = writeln!(
            out,
            "\n{:<7} {:>4} {:>10} {:>9} {:>9} {:>8}  other",
            "scen", "conc", "ops/s", "p50 ms", "p99 ms", "÷ceil"
        );
        for line in &self.lines {
            let num = |key: &str| line[key].as_f64();
            let fmt = |value: Option<f64>, digits: usize| {
                value.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
            };
            let other = match line["scenario"].as_str() {
                Some("S4") => format!(
                    "{} frames/s, first frame p50 {} ms p99 {} ms",
                    fmt(num("frames_per_sec"), 0),
                    fmt(num("ttff_p50_ms"), 3),
                    fmt(num("ttff_p99_ms"), 3)
                ),
                Some("S6") => format!(
                    "idle {} MB; {} → {} kB; {} B/thread, own state {} B, beyond {} B",
                    fmt(num("idle_rss_mb"), 1),
                    fmt(num("before_rss_kb"), 0),
                    fmt(num("after_rss_kb"), 0),
                    fmt(num("growth_per_thread_bytes"), 0),
                    fmt(num("own_state_bytes"), 0),
                    fmt(num("beyond_state_bytes"), 0)
                ),
                Some("S7") => format!("resume only p50 {} ms", fmt(num("resume_p50_ms"), 3)),
                _ => String::new(),
            };
            let errors = line["errors"].as_u64().unwrap_or(0);
            let other = if errors > 0 {
                format!("{other} ERRORS: {errors}")
            } else {
                other
            };
            let _ = writeln!(
                out,
                "{:<7} {:>4} {:>10} {:>9} {:>9} {:>8}  {other}",
                line["scenario"].as_str().unwrap_or("?"),
                line["concurrency"].as_u64().unwrap_or(0),
                fmt(num("ops_per_sec"), 0),
                fmt(num("p50_ms"), 3),
                fmt(num("p99_ms"), 3),
                fmt(num("ceiling_fraction").map(|f| f * 100.0), 1) + "%",
            );
        }
    }
}

/// One `echo` run with wait on thread `thread`, created by the run itself.
async fn thread_echo(http: &Http, thread: Uuid) -> Result<Bytes, String> {
    let mut body = echo_body();
    body["if_not_exists"] = json!("create");
    http.post(
        &format!("/threads/{thread}/runs/wait"),
        Bytes::from(body.to_string()),
    )
    .await
}

async fn new_thread(http: &Http) -> Result<String, String> {
    let created = http.post_json("/threads", &json!({})).await?;
    created["thread_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("POST /threads answered without thread_id: {created}"))
}

/// VmRSS of a process, in kB.
fn rss_kb(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status =
        std::fs::read_to_string(&path).map_err(|error| format!("cannot read {path}: {error}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("{path} has no VmRSS line"))
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_rss_is_readable() {
        assert!(rss_kb(std::process::id()).unwrap() > 0);
    }

    #[test]
    fn contains_finds_needles() {
        assert!(contains(b"{\"content\":\"echo: hi\"}", b"echo: hi"));
        assert!(!contains(b"echo", b"echo: hi"));
    }
}
