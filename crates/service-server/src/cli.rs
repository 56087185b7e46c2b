//! The command line every program built on [`Server`](crate::Server) takes: `dev` or
//! `start`, with the options both share.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Which defaults a boot uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Development: in memory, stacks exposed to clients, request log on.
    Dev,
    /// Production: PostgreSQL when `DATABASE_URL` is set, no stacks, no request log.
    Start,
}

/// Options shared by both modes; unset ones fall back to the environment, then to
/// the defaults (docs/configuration.md).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1).
    #[arg(long)]
    pub host: Option<String>,
    /// Port to listen on (default 8123, or PORT).
    #[arg(long)]
    pub port: Option<u16>,
    /// Runs this instance executes at once (default 10, or SERVICE_RUN_CONCURRENCY).
    #[arg(long, short = 'n')]
    pub concurrency: Option<usize>,
    /// Abort runs executing longer than this many milliseconds.
    #[arg(long = "run-timeout")]
    pub run_timeout_ms: Option<u64>,
    /// Configuration file (JSON).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The durable queue (a `redis://` URL): streams through Redis, as `start` does
    /// with REDIS_URL.
    #[arg(long)]
    pub queue: Option<String>,
    /// Do not serve the web console (`dev` serves it at /console; `start` only when
    /// the config file's `http.console` asks).
    #[arg(long)]
    pub no_console: bool,
    /// Log run activity (start, finish, duration).
    #[arg(long)]
    pub verbose: bool,
}

/// Serve graph-based agents behind the LangGraph SDKs' wire protocol.
#[derive(Debug, Parser)]
#[command(version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Development: in memory, stacks exposed, request log on.
    Dev(ServeArgs),
    /// Production: PostgreSQL when DATABASE_URL is set, no stacks, no request log.
    Start(ServeArgs),
}

impl Cli {
    /// The mode and options asked for.
    pub(crate) fn into_parts(self) -> (Mode, ServeArgs) {
        match self.command {
            Command::Dev(args) => (Mode::Dev, args),
            Command::Start(args) => (Mode::Start, args),
        }
    }
}
