//! The language side a bridge runs: how to start one worker, and what to tell the
//! user when that fails. The Python side is this crate's own; service-node supplies
//! the Node one, which speaks the same worker protocol.

use std::ffi::OsString;

/// One language side of the bridge.
#[derive(Clone, Debug)]
pub struct Runtime {
    /// Names the workers in logs and errors ("Python", "Node").
    pub language: &'static str,
    /// The interpreter.
    pub program: OsString,
    /// The environment variable that chooses the interpreter, named in boot errors.
    pub program_variable: &'static str,
    /// Arguments that make the interpreter run the embedded bridge.
    pub args: Vec<OsString>,
    /// Environment the bridge itself needs, over the graphs' own.
    pub env: Vec<(String, String)>,
    /// The hello field that carries the interpreter's version.
    pub version_field: &'static str,
    /// LangGraph's package name for this interpreter, and how to install it, in boot
    /// errors.
    pub package: &'static str,
    pub install: &'static str,
}

impl Runtime {
    /// Python running the embedded `bridge.py`.
    pub(crate) fn python(program: OsString) -> Self {
        Self {
            language: "Python",
            program,
            program_variable: "SERVICE_PYTHON",
            args: vec!["-u".into(), "-c".into(), crate::worker::BRIDGE_PY.into()],
            env: vec![("PYTHONUNBUFFERED".into(), "1".into())],
            version_field: "python",
            package: "langgraph",
            install: "pip install -U langgraph",
        }
    }
}
