//! `bench`: drives a server that speaks the LangGraph SDKs' HTTP protocol with the
//! scenarios of docs/performance.md and prints one JSON line per measurement (stdout)
//! plus a human table (stderr). `bench summarize` turns several runs' JSON lines into
//! the markdown tables of docs/performance.md. `bench cancel` measures how fast a
//! cancel reaches a run executing on another instance.

mod cancel;
mod client;
mod load;
mod report;
mod scenarios;
mod stats;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Load benchmark for the agent-run HTTP API.
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios against a server (and the raw ceiling, when given).
    Run(RunArgs),
    /// Summarise the JSON lines of several runs as markdown (median, min–max).
    Summarize(report::SummarizeArgs),
    /// Cancel runs executing on one instance through another of the same database.
    Cancel(cancel::CancelArgs),
}

/// Options of `bench run`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Base URL of the server under test.
    #[arg(long, default_value = "http://127.0.0.1:8123")]
    url: String,
    /// Base URL of the raw HTTP ceiling (`bench-ceiling`), driven with S1's pattern.
    #[arg(long)]
    ceiling_url: Option<String>,
    /// Process id of the server under test (S6 reads its VmRSS).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Scenarios to run, comma-separated (s1..s8; s8 reads s3's figures; s5q, the
    /// semantic search, only when named: it needs a server with `store.index`).
    #[arg(long, default_value = "s1,s2,s3,s4,s5,s6,s7,s8", value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Only the loads at these concurrencies, comma-separated (default: each
    /// scenario's own), e.g. `--concurrency 32` to profile one load.
    #[arg(long, value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Measured seconds per load.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Warm-up seconds before each load (not recorded).
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Measure exactly this many operations per load instead of `--duration`.
    #[arg(long)]
    count: Option<u64>,
    /// S4: supersteps per `steps` run.
    #[arg(long, default_value_t = 200)]
    steps: u64,
    /// S4: the runs' `durability` (`sync`, `async`, `exit`); the server's default when
    /// absent. `sync` waits for each superstep's checkpoint before the next.
    #[arg(long)]
    durability: Option<String>,
    /// S5: items in the searched namespace.
    #[arg(long, default_value_t = 10_000)]
    store_items: u64,
    /// S6: threads created, each with one `echo` run.
    #[arg(long, default_value_t = 10_000)]
    memory_threads: u64,
    /// Worker threads of the load tool's own runtime (1 = single-threaded).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// An API key sent as `x-api-key` to the server under test (not the ceiling).
    #[arg(long)]
    api_key: Option<String>,
    /// A label copied into every JSON line (e.g. `memory`, `postgres`).
    #[arg(long, default_value = "")]
    label: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Summarize(args) => match report::summarize(&args) {
            Ok(markdown) => {
                print!("{markdown}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Cancel(args) => exit_code(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| format!("cannot start the runtime: {error}"))
                .and_then(|runtime| runtime.block_on(cancel::run(args))),
        ),
        Command::Run(args) => {
            let runtime = if args.client_threads <= 1 {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
            } else {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(args.client_threads)
                    .enable_all()
                    .build()
            };
            let runtime = match runtime {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("error: cannot start the runtime: {error}");
                    return ExitCode::FAILURE;
                }
            };
            exit_code(runtime.block_on(scenarios::run_all(args)))
        }
    }
}

fn exit_code(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
