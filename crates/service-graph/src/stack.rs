//! Stacks for errors raised in Rust: a backtrace captured where the error is made,
//! written the way JS and Python stacks read (the error line, then one `at` line per
//! frame), so logs and clients get one shape whatever the runtime.

use std::backtrace::Backtrace;

use service_types::RunError;

/// Frames kept: the innermost ones past the runtime's own, enough to reach the node.
const MAX_FRAMES: usize = 24;

/// Source paths of code that is never where a graph failed: the standard library,
/// crates from a registry or git (the async runtime among them), the graph runtime and
/// the engine driving it.
const SKIPPED_PATHS: [&str; 5] = [
    "/rustc/",
    "/.cargo/registry/",
    "/.cargo/git/",
    "service-stategraph/src/",
    "service-engine/src/",
];

/// Symbol prefixes of the same code, for frames without a location (a build without
/// line tables).
const SKIPPED: [&str; 8] = [
    "std::",
    "core::",
    "alloc::",
    "tokio::",
    "futures_util::",
    "futures_core::",
    "__rust",
    "service_stategraph::",
];

/// The stack of `error` as of here: `Name: message`, then `    at symbol (file:line)`
/// for each frame of the caller's code (the standard library's and the runtime's
/// frames left out). Always captured, whatever `RUST_BACKTRACE` says: a failure is
/// rare, and its log needs the stack.
pub fn capture_stack(error: &RunError) -> String {
    let backtrace = Backtrace::force_capture().to_string();
    let mut stack = format!("{}: {}", error.error, error.message);
    for (symbol, location) in frames(&backtrace).into_iter().take(MAX_FRAMES) {
        stack.push_str("\n    at ");
        stack.push_str(symbol);
        if let Some(location) = location {
            stack.push_str(" (");
            stack.push_str(location);
            stack.push(')');
        }
    }
    stack
}

/// `error` with a captured stack, unless it has one already (a runtime's own).
pub fn with_captured_stack(error: RunError) -> RunError {
    if error.stack.is_some() {
        return error;
    }
    let stack = capture_stack(&error);
    error.with_stack(stack)
}

/// The frames of `std::backtrace::Backtrace`'s text (`  N: symbol` lines, each
/// optionally followed by `at file:line:col`) that are the caller's own: those with a
/// location outside the skipped paths or, when no frame has one, those whose symbol
/// is not the runtime's. The capture's own frames are left out.
fn frames(backtrace: &str) -> Vec<(&str, Option<&str>)> {
    let mut all = Vec::new();
    let mut lines = backtrace.lines().map(str::trim).peekable();
    while let Some(line) = lines.next() {
        let Some((number, symbol)) = line.split_once(": ") else {
            continue;
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let location = lines
            .next_if(|next| next.starts_with("at "))
            .map(|at| &at[3..]);
        if !is_capture(symbol) {
            all.push((symbol, location));
        }
    }
    let located: Vec<_> = all
        .iter()
        .filter(|(_, location)| {
            location.is_some_and(|at| !SKIPPED_PATHS.iter().any(|path| at.contains(path)))
        })
        .copied()
        .collect();
    if !located.is_empty() {
        return located;
    }
    all.retain(|(symbol, _)| !skipped(symbol));
    all
}

/// Whether a frame is this capture's own (inlined frames are named without a path).
fn is_capture(symbol: &str) -> bool {
    let name = symbol.split('<').next().unwrap_or(symbol);
    let name = name.rsplit("::").next().unwrap_or(name);
    matches!(name, "capture_stack" | "with_captured_stack")
}

/// Whether a frame is the runtime's: its path starts with a skipped crate, or it is
/// a trait method of one (`<core::pin::Pin<P> as ...>`) or of a bare type parameter
/// (`<F as core::future::Future>::poll`).
fn skipped(symbol: &str) -> bool {
    let Some(implementor) = symbol.strip_prefix('<') else {
        return SKIPPED.iter().any(|prefix| symbol.starts_with(prefix));
    };
    let own_type = implementor.split(" as ").next().unwrap_or(implementor);
    !own_type.contains("::") || SKIPPED.iter().any(|prefix| own_type.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn failing_node() -> RunError {
        with_captured_stack(RunError::new("ValueError", "boom"))
    }

    #[test]
    fn a_captured_stack_starts_with_the_error_and_names_the_caller() {
        let error = failing_node();
        let stack = error.stack.expect("a stack");
        assert!(stack.starts_with("ValueError: boom\n    at "), "{stack}");
        assert!(stack.contains("failing_node"), "{stack}");
        assert!(!stack.contains("std::backtrace"), "{stack}");
    }

    #[test]
    fn a_runtime_stack_is_kept() {
        let error = with_captured_stack(RunError::new("E", "m").with_stack("Traceback ..."));
        assert_eq!(error.stack.as_deref(), Some("Traceback ..."));
    }

    #[test]
    fn the_callers_located_frames_are_kept() {
        let text = "   0: std::backtrace::Backtrace::force_capture\n             at /rustc/x/library/std/src/backtrace.rs:312:9\n   1: capture_stack\n             at ./crates/service-graph/src/stack.rs:32:21\n   2: my_graph::nodes::explode::{{closure}}\n             at ./src/nodes.rs:12:5\n   3: {async_block#0}\n             at ./crates/service-stategraph/src/graph.rs:146:42\n   4: poll<F>\n             at /home/me/.cargo/registry/src/index/tokio-1/src/task.rs:1:1\n   5: main\n";
        assert_eq!(
            frames(text),
            [(
                "my_graph::nodes::explode::{{closure}}",
                Some("./src/nodes.rs:12:5")
            )]
        );
    }

    #[test]
    fn without_locations_the_runtimes_symbols_are_skipped() {
        let text = "   0: std::backtrace::Backtrace::force_capture\n   1: service_graph::stack::capture_stack\n   2: my_graph::explode\n   3: tokio::runtime::task::poll\n   4: <F as core::future::future::Future>::poll\n   5: <my_graph::Agent as service_graph::AgentGraph>::stream\n";
        assert_eq!(
            frames(text),
            [
                ("my_graph::explode", None),
                (
                    "<my_graph::Agent as service_graph::AgentGraph>::stream",
                    None
                )
            ]
        );
    }
}
