//! `custom-server dev|start [flags]`: the bundled server over this program's graphs.

use std::process::ExitCode;

fn main() -> ExitCode {
    service_server::Server::new(service_example_custom_server::graphs).main()
}
