//! The agent-run server as a library: boot ([`serve::run`]). The `service-server`
//! binary is a thin CLI over it.

mod config;
mod env;
mod graphs;
pub mod serve;

pub use env::ConfigError;
pub use serve::ServeArgs;
