//! `bench summarize`: several runs' JSON lines → markdown (median and min–max of each
//! figure, each target met or not, each figure against the raw ceiling).

use std::fmt::Write as _;

use serde_json::Value;

use crate::stats::{Spread, spread};
use std::path::PathBuf;

/// Options of `bench summarize`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct SummarizeArgs {
    /// JSON-lines files of the in-memory runs (one file per run).
    #[arg(long, num_args = 1..)]
    memory: Vec<PathBuf>,
    /// JSON-lines files of the PostgreSQL runs.
    #[arg(long, num_args = 1..)]
    postgres: Vec<PathBuf>,
    /// Why PostgreSQL was not measured (when no PostgreSQL files are given).
    #[arg(long, default_value = "not run")]
    postgres_note: String,
    /// Free text naming what was measured (commit, date).
    #[arg(long, default_value = "")]
    measured: String,
}

/// All runs of one server configuration: file → lines.
struct Runs {
    runs: Vec<Vec<Value>>,
}

impl Runs {
    fn load(paths: &[PathBuf]) -> Result<Self, String> {
        let mut runs = Vec::new();
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let lines = text
                .lines()
                .filter(|line| line.trim_start().starts_with('{'))
                .map(|line| {
                    serde_json::from_str(line).map_err(|error| {
                        format!("{}: bad JSON line ({error}): {line}", path.display())
                    })
                })
                .collect::<Result<Vec<Value>, String>>()?;
            runs.push(lines);
        }
        Ok(Self { runs })
    }

    /// (scenario, concurrency) in first-seen order.
    fn keys(&self) -> Vec<(String, u64)> {
        let mut keys: Vec<(String, u64)> = Vec::new();
        for line in self.runs.iter().flatten() {
            if line["scenario"] == "meta" || line.get("failed").is_some() {
                continue;
            }
            let key = key_of(line);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    fn first(&self, scenario: &str, concurrency: u64) -> Option<&Value> {
        self.runs
            .iter()
            .flatten()
            .find(|line| key_of(line) == (scenario.to_owned(), concurrency))
    }

    /// One figure over the runs that measured it.
    fn figure(&self, scenario: &str, concurrency: Option<u64>, field: &str) -> Option<Spread> {
        let values: Vec<f64> = self
            .runs
            .iter()
            .filter_map(|run| {
                run.iter()
                    .find(|line| {
                        line["scenario"] == scenario
                            && concurrency.is_none_or(|c| line["concurrency"].as_u64() == Some(c))
                    })
                    .and_then(|line| line[field].as_f64())
            })
            .collect();
        spread(&values)
    }

    /// The load averages seen before each run.
    fn loadavgs(&self) -> Vec<String> {
        self.runs
            .iter()
            .flatten()
            .filter(|line| line["scenario"] == "meta")
            .filter_map(|line| line["loadavg_before"].as_str().map(str::to_owned))
            .collect()
    }

    /// Scenarios a run could not measure, with the reason.
    fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for (i, run) in self.runs.iter().enumerate() {
            for line in run {
                if let Some(reason) = line["failed"].as_str() {
                    let scenario = line["scenario"].as_str().unwrap_or("?");
                    failures.push(format!("run {}: {scenario}: {reason}", i + 1));
                }
            }
        }
        failures
    }

    fn errors(&self) -> u64 {
        self.runs
            .iter()
            .flatten()
            .filter_map(|line| line["errors"].as_u64())
            .sum()
    }
}

fn key_of(line: &Value) -> (String, u64) {
    (
        line["scenario"].as_str().unwrap_or("?").to_owned(),
        line["concurrency"].as_u64().unwrap_or(0),
    )
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Rate,
    Millis,
    Fraction,
    Bytes,
    Megabytes,
}

fn number(value: f64, kind: Kind) -> String {
    match kind {
        Kind::Rate | Kind::Bytes => thousands(value.round() as i64),
        Kind::Millis if value < 10.0 => format!("{value:.2}"),
        Kind::Millis => format!("{value:.1}"),
        Kind::Fraction => format!("{:.1}%", value * 100.0),
        Kind::Megabytes => format!("{value:.1} MB"),
    }
}

fn thousands(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if value < 0 { format!("-{out}") } else { out }
}

fn cell(spread: Option<Spread>, kind: Kind) -> String {
    match spread {
        None => "–".to_owned(),
        Some(s) if s.min == s.max => number(s.median, kind),
        Some(s) => format!(
            "{} ({}–{})",
            number(s.median, kind),
            number(s.min, kind),
            number(s.max, kind)
        ),
    }
}

#[derive(Clone, Copy, Debug)]
enum Bound {
    AtLeast(f64),
    Below(f64),
}

impl Bound {
    fn met(self, value: f64) -> bool {
        match self {
            Self::AtLeast(bound) => value >= bound,
            Self::Below(bound) => value < bound,
        }
    }
}

/// One target of issue 6.
struct Target {
    text: &'static str,
    scenario: &'static str,
    concurrency: Option<u64>,
    field: &'static str,
    /// The field read for PostgreSQL, when it differs (a thread's state lives in the
    /// database there, so all of the process's growth is beyond it).
    pg_field: Option<&'static str>,
    kind: Kind,
    bound: Bound,
}

const TARGETS: [Target; 16] = [
    Target {
        text: "S1 create thread, c=1: ≥ 50% of ceiling",
        scenario: "S1",
        concurrency: Some(1),
        field: "ceiling_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.5),
    },
    Target {
        text: "S1 create thread, c=32: ≥ 50% of ceiling",
        scenario: "S1",
        concurrency: Some(32),
        field: "ceiling_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.5),
    },
    Target {
        text: "S2 stateless echo wait, c=1: ≥ 20% of ceiling",
        scenario: "S2",
        concurrency: Some(1),
        field: "ceiling_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.2),
    },
    Target {
        text: "S2 stateless echo wait, c=32: ≥ 20% of ceiling",
        scenario: "S2",
        concurrency: Some(32),
        field: "ceiling_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.2),
    },
    Target {
        text: "S2 stateless echo wait, c=1: p50 < 1 ms",
        scenario: "S2",
        concurrency: Some(1),
        field: "p50_ms",
        pg_field: None,
        kind: Kind::Millis,
        bound: Bound::Below(1.0),
    },
    Target {
        text: "S3 echo wait on a fresh thread, c=1: ≥ 20% of ceiling",
        scenario: "S3",
        concurrency: Some(1),
        field: "ceiling_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.2),
    },
    Target {
        text: "S3 echo wait on a fresh thread, c=32: ≥ 20% of ceiling",
        scenario: "S3",
        concurrency: Some(32),
        field: "ceiling_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.2),
    },
    Target {
        text: "S4 steps stream, c=16: ≥ 100,000 frames/s",
        scenario: "S4",
        concurrency: Some(16),
        field: "frames_per_sec",
        pg_field: None,
        kind: Kind::Rate,
        bound: Bound::AtLeast(100_000.0),
    },
    Target {
        text: "S4 steps stream, c=1: first frame p50 < 2 ms",
        scenario: "S4",
        concurrency: Some(1),
        field: "ttff_p50_ms",
        pg_field: None,
        kind: Kind::Millis,
        bound: Bound::Below(2.0),
    },
    Target {
        text: "S4 steps stream, c=16: first frame p50 < 2 ms",
        scenario: "S4",
        concurrency: Some(16),
        field: "ttff_p50_ms",
        pg_field: None,
        kind: Kind::Millis,
        bound: Bound::Below(2.0),
    },
    Target {
        text: "S5 filtered search over 10,000 items, c=32: ≥ 5,000/s",
        scenario: "S5",
        concurrency: Some(32),
        field: "ops_per_sec",
        pg_field: None,
        kind: Kind::Rate,
        bound: Bound::AtLeast(5000.0),
    },
    Target {
        text: "S6 idle RSS after start: < 30 MB",
        scenario: "S6",
        concurrency: None,
        field: "idle_rss_mb",
        pg_field: None,
        kind: Kind::Megabytes,
        bound: Bound::Below(30.0),
    },
    Target {
        text: "S6 per idle thread beyond its own state: < 2 KB (PostgreSQL: all RSS growth, the state is in the database)",
        scenario: "S6",
        concurrency: None,
        field: "beyond_state_bytes",
        pg_field: Some("growth_per_thread_bytes"),
        kind: Kind::Bytes,
        bound: Bound::Below(2048.0),
    },
    Target {
        text: "S7 interrupt then resume, c=1: p50 < 5 ms",
        scenario: "S7",
        concurrency: Some(1),
        field: "p50_ms",
        pg_field: None,
        kind: Kind::Millis,
        bound: Bound::Below(5.0),
    },
    Target {
        text: "S8 S3 with a webhook, c=1: ≥ 80% of S3's runs/s",
        scenario: "S8",
        concurrency: Some(1),
        field: "s3_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.8),
    },
    Target {
        text: "S8 S3 with a webhook, c=32: ≥ 80% of S3's runs/s",
        scenario: "S8",
        concurrency: Some(32),
        field: "s3_fraction",
        pg_field: None,
        kind: Kind::Fraction,
        bound: Bound::AtLeast(0.8),
    },
];

/// Targets the issue sets for the PostgreSQL server alone.
const PG_TARGETS: [Target; 2] = [
    Target {
        text: "PostgreSQL: S2 stateless echo wait, c=1: p50 < 5 ms",
        scenario: "S2",
        concurrency: Some(1),
        field: "p50_ms",
        pg_field: None,
        kind: Kind::Millis,
        bound: Bound::Below(5.0),
    },
    Target {
        text: "PostgreSQL: S3 echo wait on a fresh thread, c=32: ≥ 1,000 runs/s",
        scenario: "S3",
        concurrency: Some(32),
        field: "ops_per_sec",
        pg_field: None,
        kind: Kind::Rate,
        bound: Bound::AtLeast(1000.0),
    },
];

fn verdict(target: &Target, figure: Option<Spread>) -> String {
    let Some(figure) = figure else {
        return "not measured".to_owned();
    };
    let (median, lo, hi) = (
        target.bound.met(figure.median),
        target.bound.met(figure.min),
        target.bound.met(figure.max),
    );
    match (median, lo && hi) {
        (true, true) => "**met**".to_owned(),
        (true, false) => "**met** (median; not in every run)".to_owned(),
        (false, _) if lo || hi => "**missed** (median; met in some runs)".to_owned(),
        (false, _) => "**missed**".to_owned(),
    }
}

/// The Other column: scenario-specific figures.
fn other(runs: &Runs, scenario: &str, concurrency: u64) -> String {
    let c = Some(concurrency);
    match scenario {
        "C0" => "raw axum, same load pattern as S1".to_owned(),
        "S4" => format!(
            "{} frames/s; first frame p50 {} ms, p99 {} ms; {} frames/run",
            cell(runs.figure(scenario, c, "frames_per_sec"), Kind::Rate),
            cell(runs.figure(scenario, c, "ttff_p50_ms"), Kind::Millis),
            cell(runs.figure(scenario, c, "ttff_p99_ms"), Kind::Millis),
            cell(runs.figure(scenario, c, "frames_per_run"), Kind::Rate),
        ),
        "S5-put" => format!(
            "{} puts into one namespace",
            cell(runs.figure(scenario, c, "items"), Kind::Rate)
        ),
        "S5" => format!(
            "over {} items, {} match each filter, limit 10",
            cell(runs.figure(scenario, c, "items"), Kind::Rate),
            cell(runs.figure(scenario, c, "matches_per_filter"), Kind::Rate)
        ),
        "S5q-put" => format!(
            "{} puts, each embedded on write",
            cell(runs.figure(scenario, c, "items"), Kind::Rate)
        ),
        "S5q" => format!(
            "query over {} items, 384 dims, limit 10",
            cell(runs.figure(scenario, c, "items"), Kind::Rate)
        ),
        "S6" => format!(
            "idle RSS {}; growth {} B/thread; own state (thread+history+runs JSON) {} B; beyond it {} B",
            cell(runs.figure(scenario, c, "idle_rss_mb"), Kind::Megabytes),
            cell(
                runs.figure(scenario, c, "growth_per_thread_bytes"),
                Kind::Bytes
            ),
            cell(runs.figure(scenario, c, "own_state_bytes"), Kind::Bytes),
            cell(runs.figure(scenario, c, "beyond_state_bytes"), Kind::Bytes),
        ),
        "S7" => format!(
            "resume alone p50 {} ms",
            cell(runs.figure(scenario, c, "resume_p50_ms"), Kind::Millis)
        ),
        "S8" => format!(
            "{} deliveries/s; {} of S3's runs/s",
            cell(runs.figure(scenario, c, "deliveries_per_sec"), Kind::Rate),
            cell(runs.figure(scenario, c, "s3_fraction"), Kind::Fraction),
        ),
        _ => String::new(),
    }
}

/// The markdown section.
pub(crate) fn summarize(args: &SummarizeArgs) -> Result<String, String> {
    let memory = Runs::load(&args.memory)?;
    let postgres = Runs::load(&args.postgres)?;
    if memory.runs.is_empty() {
        return Err("no in-memory runs given (--memory FILE...)".into());
    }
    let pg_note = if postgres.runs.is_empty() {
        Some(format!("not measured: {}", args.postgres_note))
    } else {
        None
    };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "_Generated by `scripts/bench`{}._\n",
        if args.measured.is_empty() {
            String::new()
        } else {
            format!(" — {}", args.measured)
        }
    );
    let _ = writeln!(md, "**Machine:** {}\n", machine());
    let _ = writeln!(
        md,
        "**Runs:** {} in memory{}. Each figure is the median over the runs, with the range (min–max) seen in brackets. \
         \"÷ ceiling\" = operations/s divided by the raw axum ceiling's requests/s at the same concurrency, measured in the same run.\n",
        memory.runs.len(),
        if postgres.runs.is_empty() {
            String::new()
        } else {
            format!(", {} with PostgreSQL", postgres.runs.len())
        }
    );
    let loads = memory.loadavgs();
    if !loads.is_empty() {
        let _ = writeln!(
            md,
            "**Other load on the machine** (1/5/15-minute load average before each in-memory `bench run`, two per run): {}\n",
            loads.join("; ")
        );
    }
    if let Some(note) = &pg_note {
        let _ = writeln!(md, "**PostgreSQL:** {note}\n");
    }
    let errors = memory.errors() + postgres.errors();
    if errors > 0 {
        let _ = writeln!(
            md,
            "**Errors:** {errors} operations failed across the runs (see the JSON lines).\n"
        );
    }

    for (label, runs) in [("in memory", &memory), ("PostgreSQL", &postgres)] {
        for failure in runs.failures() {
            let _ = writeln!(md, "**Not measured ({label}):** {failure}\n");
        }
    }
    let _ = writeln!(md, "#### Targets\n");
    let _ = writeln!(md, "| Target | In memory | Met? | PostgreSQL |");
    let _ = writeln!(md, "|---|---|---|---|");
    for target in &TARGETS {
        let figure = memory.figure(target.scenario, target.concurrency, target.field);
        let pg = match &pg_note {
            Some(_) => "not measured".to_owned(),
            None => {
                let field = target.pg_field.unwrap_or(target.field);
                let figure = postgres.figure(target.scenario, target.concurrency, field);
                format!(
                    "{} — {}",
                    cell(figure, target.kind),
                    verdict(target, figure)
                )
            }
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {pg} |",
            target.text,
            cell(figure, target.kind),
            verdict(target, figure)
        );
    }

    if pg_note.is_none() {
        let _ = writeln!(md, "\n| PostgreSQL target | PostgreSQL | Met? |");
        let _ = writeln!(md, "|---|---|---|");
        for target in &PG_TARGETS {
            let figure = postgres.figure(target.scenario, target.concurrency, target.field);
            let _ = writeln!(
                md,
                "| {} | {} | {} |",
                target.text,
                cell(figure, target.kind),
                verdict(target, figure)
            );
        }
    }

    let _ = writeln!(md, "\n#### All figures\n");
    let _ = writeln!(
        md,
        "| Scenario | c | ops/s | p50 ms | p99 ms | ÷ ceiling | Other | PostgreSQL ops/s | PostgreSQL p50 ms | PostgreSQL ÷ ceiling |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    for (scenario, concurrency) in memory.keys() {
        let c = Some(concurrency);
        let name = memory
            .first(&scenario, concurrency)
            .and_then(|line| line["name"].as_str())
            .unwrap_or("")
            .to_owned();
        let pg = |field: &str, kind: Kind| match &pg_note {
            Some(_) => "not measured".to_owned(),
            None if scenario == "C0" => "(same ceiling)".to_owned(),
            None => cell(postgres.figure(&scenario, c, field), kind),
        };
        let _ = writeln!(
            md,
            "| {scenario} {name} | {concurrency} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(memory.figure(&scenario, c, "ops_per_sec"), Kind::Rate),
            cell(memory.figure(&scenario, c, "p50_ms"), Kind::Millis),
            cell(memory.figure(&scenario, c, "p99_ms"), Kind::Millis),
            cell(
                memory.figure(&scenario, c, "ceiling_fraction"),
                Kind::Fraction
            ),
            other(&memory, &scenario, concurrency),
            pg("ops_per_sec", Kind::Rate),
            pg("p50_ms", Kind::Millis),
            pg("ceiling_fraction", Kind::Fraction),
        );
    }
    Ok(md)
}

/// nproc, CPU model, memory and kernel, from /proc.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map_or("unknown CPU", |(_, model)| model.trim())
        .to_owned();
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kb: f64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "nproc {nproc}, {model}, {:.1} GiB RAM, Linux {}; the load tool, the ceiling and the server share these cores",
        mem_kb / 1024.0 / 1024.0,
        kernel.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_formatted_for_the_table() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(number(0.512, Kind::Fraction), "51.2%");
        assert_eq!(number(0.4567, Kind::Millis), "0.46");
        assert_eq!(
            cell(
                Some(Spread {
                    median: 2.0,
                    min: 1.0,
                    max: 3.0
                }),
                Kind::Rate
            ),
            "2 (1–3)"
        );
        assert_eq!(cell(None, Kind::Rate), "–");
    }

    #[test]
    fn verdicts_show_when_runs_disagree() {
        let target = &TARGETS[4];
        let s = |median, min, max| Some(Spread { median, min, max });
        assert_eq!(verdict(target, s(0.5, 0.4, 0.6)), "**met**");
        assert!(verdict(target, s(0.9, 0.8, 1.2)).contains("not in every run"));
        assert!(verdict(target, s(1.1, 0.9, 1.2)).contains("met in some"));
        assert_eq!(verdict(target, s(2.0, 1.5, 3.0)), "**missed**");
        assert_eq!(verdict(target, None), "not measured");
    }

    #[test]
    fn figures_are_taken_per_scenario_and_concurrency() {
        let runs = Runs {
            runs: vec![
                vec![
                    serde_json::json!({"scenario": "S1", "concurrency": 1, "ops_per_sec": 10.0}),
                    serde_json::json!({"scenario": "S1", "concurrency": 32, "ops_per_sec": 100.0}),
                ],
                vec![
                    serde_json::json!({"scenario": "S1", "concurrency": 32, "ops_per_sec": 300.0}),
                ],
            ],
        };
        assert_eq!(
            runs.figure("S1", Some(32), "ops_per_sec").unwrap().median,
            200.0
        );
        assert_eq!(
            runs.figure("S1", Some(1), "ops_per_sec").unwrap().median,
            10.0
        );
        assert_eq!(
            runs.keys(),
            vec![("S1".to_owned(), 1), ("S1".to_owned(), 32)]
        );
    }
}
