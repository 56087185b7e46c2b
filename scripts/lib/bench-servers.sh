# Shared by scripts/bench-python and scripts/bench-js (sourced): start servers, wait
# for them, and measure S2 with the CPU time of a server's whole process tree.
# Expects $target (the cargo target dir) to be set by the caller.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# CPU seconds (user + system) of a process and its live descendants.
tree_cpu() {
  python3 - "$1" <<'EOF'
import os, sys
root = int(sys.argv[1]); tick = os.sysconf("SC_CLK_TCK")
stats = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    stats[int(pid)] = (int(fields[1]), int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14]))
tree, frontier = {root}, [root]
while frontier:
    parent = frontier.pop()
    for pid, (ppid, _) in stats.items():
        if ppid == parent and pid not in tree:
            tree.add(pid); frontier.append(pid)
print(sum(stats[p][1] for p in tree if p in stats) / tick)
EOF
}

wait_ok() {
  for _ in $(seq 1 600); do curl -fsS "$1/ok" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "no answer from $1" >&2; exit 1
}

# One load: warm-up, then exactly $5 runs at concurrency $4, CPU measured around it.
measure() {
  local label="$1" url="$2" pid="$3" concurrency="$4" count="$5"
  "$target/release/bench" run --url "$url" --scenarios s2 --concurrency "$concurrency" \
    --count "$(( count / 10 + 1 ))" --warmup 0 >/dev/null 2>&1
  local before after
  before="$(tree_cpu "$pid")"
  local out
  out="$("$target/release/bench" run --url "$url" --scenarios s2 --concurrency "$concurrency" \
    --count "$count" --warmup 0 --label "$label" 2>/dev/null)"
  line="${out%%$'\n'*}"  # the load's own line; the rest is the run's metadata
  after="$(tree_cpu "$pid")"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["cpu_ms_per_op"]=round((float(sys.argv[3])-float(sys.argv[2]))*1000/int(sys.argv[4]),3); print(json.dumps(d))' \
    "$line" "$before" "$after" "$count"
}

pids=()
cleanup() { for pid in "${pids[@]}"; do pkill -P "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
