//! Stacks for errors raised in Rust: a backtrace captured where the error is made,
//! written the way JS and Python stacks read (the error line, then one `at` line per
//! frame), so logs and clients get one shape whatever the runtime.

use std::backtrace::Backtrace;

use service_types::RunError;

/// Frames kept: the innermost ones past the runtime's own, enough to reach the node.
const MAX_FRAMES: usize = 24;

/// Symbol prefixes of the standard library, the async runtime, the graph runtime and
/// this capture: their frames say nothing about where a graph failed.
const SKIPPED: [&str; 10] = [
    "std::",
    "core::",
    "alloc::",
    "tokio::",
    "futures_util::",
    "futures_core::",
    "__rust",
    "service_graph::stack::capture_stack",
    "service_graph::stack::with_captured_stack",
    "service_stategraph::",
];

/// The stack of `error` as of here: `Name: message`, then `    at symbol (file:line)`
/// for each frame of the caller's code (the standard library's and the runtime's
/// frames left out). Always captured, whatever `RUST_BACKTRACE` says: a failure is
/// rare, and its log needs the stack.
pub fn capture_stack(error: &RunError) -> String {
    let backtrace = Backtrace::force_capture().to_string();
    let mut stack = format!("{}: {}", error.error, error.message);
    for (symbol, location) in frames(&backtrace).take(MAX_FRAMES) {
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
/// optionally followed by `at file:line:col`), runtime frames skipped.
fn frames(backtrace: &str) -> impl Iterator<Item = (&str, Option<&str>)> {
    let mut lines = backtrace.lines().map(str::trim).peekable();
    std::iter::from_fn(move || {
        loop {
            let line = lines.next()?;
            let Some((number, symbol)) = line.split_once(": ") else {
                continue;
            };
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let location = lines
                .next_if(|next| next.starts_with("at "))
                .map(|at| &at[3..]);
            if skipped(symbol) {
                continue;
            }
            return Some((symbol, location));
        }
    })
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
    fn runtime_frames_are_skipped_and_locations_kept() {
        let text = "   0: std::backtrace::Backtrace::force_capture\n             at /rustc/x/library/std/src/backtrace.rs:312:9\n   1: my_graph::nodes::explode::{{closure}}\n             at ./src/nodes.rs:12:5\n   2: tokio::runtime::task::poll\n   3: <F as core::future::future::Future>::poll\n   4: <my_graph::Agent as service_graph::AgentGraph>::stream\n   5: main\n";
        let frames: Vec<_> = frames(text).collect();
        assert_eq!(
            frames,
            [
                (
                    "my_graph::nodes::explode::{{closure}}",
                    Some("./src/nodes.rs:12:5")
                ),
                (
                    "<my_graph::Agent as service_graph::AgentGraph>::stream",
                    None
                ),
                ("main", None)
            ]
        );
    }
}
