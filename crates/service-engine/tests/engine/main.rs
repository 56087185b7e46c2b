//! Engine behaviour with the in-memory store, the example graphs and an injected
//! clock, by topic.

mod assistants;
mod checkpoint_reads;
mod claims;
mod endings;
mod instances;
mod observed;
mod queue;
mod schedules;
mod semantic;
mod state;
mod streams;
mod support;
mod telemetry;
