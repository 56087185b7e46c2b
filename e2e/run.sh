#!/usr/bin/env bash
# Run the end-to-end suites (Python SDK + JS SDK) against a server.
#
#   E2E_BASE_URL=http://127.0.0.1:8123 e2e/run.sh      # a server that is already running
#   E2E_SERVER_BIN=target/debug/service-server e2e/run.sh   # start `$E2E_SERVER_BIN dev --port <free>`
#   E2E_SERVER_MODE=start DATABASE_URL=... e2e/run.sh        # the same in production mode (here on PostgreSQL)
#   E2E_SERVER_CONFIG=examples/python-graphs/langgraph.json E2E_GRAPHS=python ...
#       # the started server serves that config's (Python) graphs through the bridge
#
# E2E_WEBHOOK_SECRET (default e2e-webhook-secret) is the started server's
# SERVICE_WEBHOOK_SECRET; against a running server, set it to that server's secret.
# E2E_SERVER_BIN and E2E_SERVER_MODE are exported (the binary as an absolute path):
# the auth tests start servers of their own with it, the same way (DATABASE_URL
# passed through in start mode); without E2E_SERVER_BIN they are skipped.
# E2E_JS_SDK=2.0.0 runs the js suite on the stale @langchain/langgraph-sdk 2.0.0
# (installed under an npm alias) instead of the current 1.15.0.
# E2E_SUITES=console runs the web console's browser tests (a `dev` server: the console
# is on there; it writes screenshots of every view to docs/console/).
# E2E_SUITES=schemathesis fuzzes every operation of the server's /openapi.json
# (e2e/schemathesis/run.sh): no answer >= 500, none outside the document.
# Optional: E2E_REFERENCE=1 when the server is the reference server (SPEC-only
# assertions then xfail/skip instead of failing), E2E_SUITES="python js" to
# choose suites, extra arguments are passed to pytest. The started server's log is
# removed when every suite passes, and kept (its path and tail printed) otherwise.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUITES="${E2E_SUITES:-python js hostile schemathesis}"
SERVER_PID=""
SERVER_LOG=""
export E2E_WEBHOOK_SECRET="${E2E_WEBHOOK_SECRET:-e2e-webhook-secret}"

log() { printf '[e2e] %s\n' "$*" >&2; }

cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    log "stopping server (pid $SERVER_PID)"
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

setup_python() {
  local venv="$HERE/.venv"
  if [[ ! -x "$venv/bin/python" ]]; then
    log "creating $venv"
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$HERE/python/requirements.txt"
}

# Schemathesis in a virtual environment of its own: its pytest and hypothesis pins
# are not the SDK suite's.
setup_schemathesis() {
  local venv="$HERE/.venv-schemathesis"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$HERE/schemathesis/requirements.txt"
}

# The console suite drives Debian's chromium through playwright-core; no browser is
# ever downloaded (.ci/run installs the chromium package).
setup_console() {
  [[ -x "${CHROMIUM:-/usr/bin/chromium}" ]] || { log "the console suite needs chromium at ${CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)"; exit 2; }
  (cd "$HERE/console" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
}

setup_js() {
  (cd "$HERE/js" && { npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error; })
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start_server() {
  local port
  port="$(free_port)"
  SERVER_LOG="$(mktemp -t e2e-server.XXXXXX.log)"
  local mode="$E2E_SERVER_MODE"
  log "starting $E2E_SERVER_BIN $mode --port $port (log: $SERVER_LOG)"
  # Webhooks are signed with the secret the suites verify with.
  local config=()
  [[ -n "${E2E_SERVER_CONFIG:-}" ]] && config=(--config "$E2E_SERVER_CONFIG")
  SERVICE_WEBHOOK_SECRET="$E2E_WEBHOOK_SECRET" "$E2E_SERVER_BIN" "$mode" --port "$port" "${config[@]}" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  E2E_BASE_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 300); do  # up to 30 s
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      log "server exited during startup (log kept at $SERVER_LOG):"; tail -n 50 "$SERVER_LOG" >&2; exit 1
    fi
    if curl -fsS "$E2E_BASE_URL/ok" >/dev/null 2>&1; then
      log "server ready at $E2E_BASE_URL"; return 0
    fi
    sleep 0.1
  done
  log "server did not answer GET /ok within 30 s (log kept at $SERVER_LOG):"; tail -n 50 "$SERVER_LOG" >&2; exit 1
}

if [[ -n "${E2E_SERVER_BIN:-}" ]]; then
  # Absolute, since the suites run from their own directories.
  if [[ "$E2E_SERVER_BIN" == */* ]]; then
    dir="$(cd "$(dirname "$E2E_SERVER_BIN")" && pwd)" || { log "no directory for $E2E_SERVER_BIN"; exit 2; }
    E2E_SERVER_BIN="$dir/$(basename "$E2E_SERVER_BIN")"
  else
    E2E_SERVER_BIN="$(command -v "$E2E_SERVER_BIN")" || { log "$E2E_SERVER_BIN not found on PATH"; exit 2; }
  fi
  export E2E_SERVER_BIN
fi
export E2E_SERVER_MODE="${E2E_SERVER_MODE:-dev}"

if [[ -z "${E2E_BASE_URL:-}" ]]; then
  if [[ -z "${E2E_SERVER_BIN:-}" ]]; then
    log "set E2E_BASE_URL (a running server) or E2E_SERVER_BIN (a server binary to start)"; exit 2
  fi
  start_server
fi
export E2E_BASE_URL

status=0
for suite in $SUITES; do
  case "$suite" in
    python)
      setup_python
      log "python suite against $E2E_BASE_URL"
      (cd "$HERE/python" && "$HERE/.venv/bin/python" -m pytest "$@") || status=1
      ;;
    js)
      setup_js
      log "js suite (@langchain/langgraph-sdk ${E2E_JS_SDK:-1.15.0}) against $E2E_BASE_URL"
      (cd "$HERE/js" && node --test --test-concurrency=1 --test-timeout=60000 test/*.test.mjs) || status=1
      ;;
    console)
      setup_console
      log "console suite against $E2E_BASE_URL"
      (cd "$HERE/console" && node --test --test-concurrency=1 --test-timeout=120000 test/*.test.mjs) || status=1
      ;;
    hostile)
      log "hostile-input suite against $E2E_BASE_URL"
      python3 "$HERE/hostile/run.py" || status=1
      ;;
    schemathesis)
      setup_schemathesis
      log "schemathesis against $E2E_BASE_URL/openapi.json"
      "$HERE/schemathesis/run.sh" || status=1
      ;;
    *) log "unknown suite '$suite'"; exit 2 ;;
  esac
done

if [[ -n "$SERVER_LOG" ]]; then
  if [[ $status -eq 0 ]]; then
    cleanup
    rm -f "$SERVER_LOG"
  else
    log "server log kept at $SERVER_LOG; its tail:"; tail -n 40 "$SERVER_LOG" >&2
  fi
fi
exit $status
