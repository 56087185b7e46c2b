#!/usr/bin/env bash
# Schemathesis against a running server's own document, $E2E_BASE_URL/openapi.json:
# generated requests (valid and invalid) to every operation, failing on any answer
# >= 500 and any answer whose status, content type or body the document does not
# describe. Bounded (SCHEMATHESIS_MAX_EXAMPLES per operation, 5 by default) so a
# pass takes a minute or two.
#
#   E2E_BASE_URL=http://127.0.0.1:2024 e2e/schemathesis/run.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ST="$HERE/../.venv-schemathesis/bin/st"
BASE="${E2E_BASE_URL:?set E2E_BASE_URL to a running server}"
# Schemathesis keeps a cache of what it found under the working directory: a scratch
# one, so nothing lands in the checkout.
work="$(mktemp -d -t schemathesis.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# Left out, each for a reason schemathesis cannot work around: these answers are
# streams that end only when the client leaves (the thread's live stream, protocol
# v2's event stream), or that wait for a run which a generated `after_seconds` or
# interrupt can hold for as long as it likes (wait, join, join-stream, cancel with
# `wait`); their non-streaming refusals are covered by the e2e/hostile suite and the
# SDK suites.
exclude=(
  --exclude-path '/threads/{thread_id}/stream'
  --exclude-path '/threads/{thread_id}/stream/events'
  --exclude-path '/threads/{thread_id}/runs/stream'
  --exclude-path '/threads/{thread_id}/runs/wait'
  --exclude-path '/threads/{thread_id}/runs/{run_id}/join'
  --exclude-path '/threads/{thread_id}/runs/{run_id}/stream'
  --exclude-path '/threads/{thread_id}/runs/{run_id}/cancel'
  --exclude-path '/runs/stream'
  --exclude-path '/runs/wait'
  --exclude-path '/runs/{run_id}/stream'
)

# One worker: hypothesis's lambda-source cache is not thread-safe (with two, a run
# can end on its internal error instead of a finding). `too_slow` is hypothesis's
# check on its own generation speed, which on a loaded machine trips on the larger
# bodies (a batch of runs); it says nothing about the server.
#
# The coverage phase (every boundary and wrong-type value of every parameter, unbounded
# by --max-examples) is most of a pass's time, and on PostgreSQL several minutes: the
# request parsing it probes is the same code in both modes, so `start` runs the
# bounded phases only (fuzzing and stateful still reach the store with every
# operation).
phases=examples,coverage,fuzzing,stateful
[[ "${E2E_SERVER_MODE:-dev}" == start ]] && phases=examples,fuzzing,stateful

"$ST" run "$BASE/openapi.json" \
  --phases "${SCHEMATHESIS_PHASES:-$phases}" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-5}" \
  --seed "${SCHEMATHESIS_SEED:-1}" \
  --request-timeout 30 \
  --workers 1 \
  --suppress-health-check too_slow \
  --generation-database none \
  --no-color \
  "${exclude[@]}"
