# Short names for what README.md and scripts/ already do; `just` is never required:
# each recipe is the plain command it runs.

# Extra arguments reach the command as "$@", quoting kept.
set positional-arguments

# Serve the example graphs in memory on http://127.0.0.1:8123 (extra flags pass on)
dev *args:
    cargo run --release -p service-server -- dev "$@"

# Every test: the Rust suites, the SDK end-to-end suites in both modes, the console in a browser
test:
    scripts/test

# The load benchmark; writes its figures into docs/performance.md
bench:
    scripts/bench

# Format the workspace
fmt:
    cargo fmt --all

# What CI checks before the tests: formatting and clippy
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# The SDK end-to-end suites against a fresh debug build, in dev mode (extra args go to pytest)
e2e *args:
    cargo build -p service-server
    E2E_SERVER_BIN="${CARGO_TARGET_DIR:-target}/debug/service-server" e2e/run.sh "$@"

# The web console's browser tests (Debian's chromium) against a fresh debug build;
# they refresh the screenshots in docs/console/
console-test:
    cargo build -p service-server
    E2E_SUITES=console E2E_SERVER_BIN="${CARGO_TARGET_DIR:-target}/debug/service-server" e2e/run.sh
