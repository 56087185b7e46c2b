//! The agent-run server: `dev` (in-memory store and checkpointer, example graphs,
//! stacks exposed, request log on) and `start` (production defaults).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use service_server::{ServeArgs, serve};

/// Serve graph-based agents behind the LangGraph SDKs' wire protocol.
#[derive(Debug, Parser)]
#[command(name = "service-server", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Development: in-memory, example graphs, stacks exposed, request log on.
    Dev(ServeArgs),
    /// Production: no stacks to clients, no request log.
    Start(ServeArgs),
}

/// glibc's malloc spent over half of a streamed run's CPU keeping its free lists
/// (docs/performance.md §3); jemalloc's size-class arenas do not.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (production, args) = match cli.command {
        Command::Dev(args) => (false, args),
        Command::Start(args) => (true, args),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve::run(production, args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
