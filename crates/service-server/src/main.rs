//! The agent-run server over the example graphs: `dev` (in memory, stacks exposed,
//! request log on) and `start` (production defaults). A program serving its own
//! graphs does the same with its own source (`examples/custom-server`).

use std::process::ExitCode;

/// glibc's malloc spent over half of a streamed run's CPU keeping its free lists
/// (docs/performance.md §3); jemalloc's size-class arenas do not.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    service_server::Server::new(service_example_graphs::registry).main()
}
