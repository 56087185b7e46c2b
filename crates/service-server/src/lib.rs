//! The agent-run server as a library: [`Server`] serves any graph source with the
//! bundled binary's commands, flags, environment knobs and configuration file. The
//! `service-server` binary is that server over the example graphs.

mod cli;
mod config;
mod env;
mod graphs;
mod heap;
mod listen;
mod metrics;
mod serve;
mod server;
mod settings;

pub use cli::{Mode, ServeArgs};
pub use env::ConfigError;
pub use server::Server;
