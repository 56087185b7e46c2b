//! The agent-run server as a library: boot ([`serve::run`]) and the PostgreSQL
//! coordinator. The `service-server` binary is a thin CLI over it.

mod config;
mod env;
mod graphs;
pub mod postgres;
pub mod serve;

pub use env::ConfigError;
pub use serve::ServeArgs;
