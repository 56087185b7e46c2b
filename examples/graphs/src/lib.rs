//! The example graphs the bundled server registers in development mode. Their ids
//! and behaviour are what end-to-end tests and users rely on; the Python versions are
//! in `examples/python-graphs/graphs.py`.
//!
//! | id | behaviour |
//! |---|---|
//! | `echo` | answers `{"type":"ai","content":"echo: <last message's text>"}` in `messages` (merged as `add_messages`) |
//! | `steps` | node `step` counts to `n` (default 3), writing `{"step": k}` to custom |
//! | `approval` | drafts (from `topic` or the last message), then interrupts for approval (also in the HITL `action_requests` shape); resume `true` or an approve/edit decision approves |
//! | `fail` | node `explode` fails with "boom" caused by "root cause" |
//! | `slow` | node `sleep` waits `delay_ms` (default 1000), then sets `done` |
//! | `reply` | hand-written agent writing a reply declaration to custom |
//! | `memory` | puts `{"text": text}` in the long-term store and counts the namespace |
//! | `nested` | `plan`, then `approval` as subgraph node `review` (its interrupt pauses `nested`), then `publish` |

use std::sync::Arc;

use service_graph::{Checkpointer, GraphError, GraphRegistry};

mod approval;
mod echo;
mod fail;
mod memory;
mod nested;
mod reply;
mod slow;
mod steps;

pub use reply::ReplyGraph;

/// The ids of every example graph, in registration order.
pub const GRAPH_IDS: [&str; 8] = [
    "echo", "steps", "approval", "fail", "slow", "reply", "memory", "nested",
];

/// A registry of the eight example graphs, their checkpoints kept by `checkpointer`
/// (the in-memory saver in development, a database saver in production).
pub fn registry(checkpointer: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
    let mut registry = GraphRegistry::new();
    let compiled = [
        ("echo", echo::graph(Arc::clone(&checkpointer))?),
        ("steps", steps::graph(Arc::clone(&checkpointer))?),
        ("approval", approval::graph(Arc::clone(&checkpointer))?),
        ("fail", fail::graph(Arc::clone(&checkpointer))?),
        ("slow", slow::graph(Arc::clone(&checkpointer))?),
        ("memory", memory::graph(Arc::clone(&checkpointer))?),
        ("nested", nested::graph(checkpointer)?),
    ];
    for (id, graph) in compiled {
        registry.insert(id, graph.schema(), Arc::new(graph));
    }
    registry.insert("reply", ReplyGraph::schema(), Arc::new(ReplyGraph::new()));
    Ok(registry)
}
