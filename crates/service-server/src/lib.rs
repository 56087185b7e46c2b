//! The agent-run server as a library: [`Server`] serves any graph source with the
//! bundled binary's commands, flags, environment knobs and configuration file. The
//! `service-server` binary is that server over the example graphs.

mod adapter;
mod cli;
mod config;
mod env;
mod graphs;
mod heap;
mod listen;
mod log;
mod metrics;
mod otel;
mod serve;
mod server;
mod settings;
mod ui;

pub use cli::{Mode, ServeArgs};
pub use env::ConfigError;
pub use log::{ConsoleLogger, LogFormat, Logger};
pub use server::Server;
