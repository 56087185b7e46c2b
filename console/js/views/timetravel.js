// Time travel: a thread's checkpoints, the difference between two, and three
// actions from a checkpoint (SPEC console item 7): fork (write the edited values to
// a new checkpoint; nothing runs), fork and run, and run from it unchanged.

import { CAPS, get, latestRun, post } from "../api.js";
import { actionButton, badge, empty, fill, h, jsonBox, link, pageHead, parseJson, section, short, table, time } from "../ui.js";

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** Paths whose value differs between `a` and `b`, descending into objects. */
export function diff(a, b, path = []) {
  if (same(a, b)) return [];
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => diff(a[k], b[k], [...path, k]));
  }
  const kind = a === undefined ? "added" : b === undefined ? "removed" : "changed";
  return [{ path: path.join(".") || "(root)", kind, before: a, after: b }];
}

export async function render({ parts }) {
  if (parts.length) return travel(parts[0]);
  return h(
    "div.view",
    pageHead("Time travel", "Pick a thread to see its checkpoints."),
    section("Threads", () => post("/threads/search", { limit: CAPS.threads, sort_by: "updated_at", sort_order: "desc" }), (threads) =>
      table(threads, [
        ["Thread", (t) => link(`/timetravel/${t.thread_id}`, short(t.thread_id))],
        ["Status", (t) => badge(t.status)],
        ["Graph", (t) => t.metadata?.graph_id ?? "—"],
        ["Updated", (t) => time(t.updated_at)],
      ], "No threads yet."),
    ),
  );
}

async function travel(threadId) {
  const readHistory = () => post(`/threads/${threadId}/history`, { limit: CAPS.checkpoints });
  const [first, run, thread] = await Promise.all([
    readHistory(),
    latestRun(threadId),
    get(`/threads/${threadId}`),
  ]);
  let history = first;
  const assistantId = run?.assistant_id ?? thread.metadata?.assistant_id ?? thread.metadata?.graph_id;
  const idOf = (s) => s.checkpoint?.checkpoint_id;
  const selected = h("section.card", { id: "tt-selected" });
  const diffCard = h("section.card", { id: "tt-diff" });
  const status = h("div", { "aria-live": "polite" });
  let current = history[0];

  const rows = () =>
    table(history, [
      ["Checkpoint", (s) =>
        h("button.linklike", { type: "button", "aria-pressed": String(s === current), onclick: () => select(s) }, short(idOf(s)))],
      ["Step", (s) => s.metadata?.step ?? "—"],
      ["Source", (s) => s.metadata?.source ?? "—"],
      ["Next", (s) => s.next?.join(", ") || "—"],
      ["Created", (s) => time(s.created_at)],
    ], "This thread has no checkpoints yet.");
  const list = h("section.card", h("header.card-head", h("h2", `Checkpoints (latest ${CAPS.checkpoints})`)), h("div", { id: "tt-list" }, rows()));

  async function startRun(checkpointId) {
    if (!assistantId) throw new Error("No assistant to run: this thread has no runs and no graph_id.");
    const started = await post(`/threads/${threadId}/runs`, { assistant_id: assistantId, input: null, checkpoint_id: checkpointId });
    return started.run_id;
  }

  async function fork(state, text) {
    const edited = parseJson(text, "Values");
    // Only the keys that changed: the update passes through the graph's reducers, so
    // resending an appending channel would append it again.
    const changed = Object.fromEntries(Object.entries(edited).filter(([k, v]) => !same(v, state.values?.[k])));
    const answer = await post(`/threads/${threadId}/state`, { values: changed, checkpoint_id: idOf(state) });
    return answer.checkpoint?.checkpoint_id ?? answer.checkpoint_id;
  }

  function select(state) {
    current = state;
    fill(list.querySelector("#tt-list"), rows());
    if (!state) return fill(selected, empty("No checkpoint."));
    const editor = h("textarea.mono", { id: "tt-values", rows: 10, "aria-label": "Values of the new checkpoint" });
    editor.value = JSON.stringify(state.values ?? {}, null, 2);
    const runLink = (runId) => ["run ", link(`/runs/${threadId}/${runId}`, short(runId), { class: "tt-run" }), " started."];
    fill(
      selected,
      h("header.card-head", h("h2", `Checkpoint ${short(idOf(state))}`)),
      h(
        "dl.facts",
        h("dt", "Id"), h("dd.mono", idOf(state) ?? "—"),
        h("dt", "Step"), h("dd", state.metadata?.step ?? "—"),
        h("dt", "Next"), h("dd", state.next?.join(", ") || "—"),
      ),
      h("label", { for: "tt-values" }, "Values (edit, then fork)"),
      editor,
      h(
        "div.row",
        actionButton("Fork", async () => {
          const id = await fork(state, editor.value);
          history = await readHistory();
          fill(list.querySelector("#tt-list"), rows());
          fillCompare();
          return `Forked: new checkpoint ${short(id)}; nothing ran.`;
        }, { status }),
        actionButton("Fork and run", async () => {
          const id = await fork(state, editor.value);
          return ["Forked to ", short(id), "; ", runLink(await startRun(id))];
        }, { status, className: "primary" }),
        actionButton("Run unchanged", async () => runLink(await startRun(idOf(state))), { status }),
      ),
      status,
    );
    drawDiff();
  }

  const from = h("select", { id: "tt-from", "aria-label": "Compare from", onchange: () => drawDiff() });
  const to = h("select", { id: "tt-to", "aria-label": "Compare to", onchange: () => drawDiff() });
  /** The compare pickers over the history, newest against the one before. */
  function fillCompare() {
    const option = (s, i, selected) => h("option", { value: i, selected }, `${short(idOf(s))} (step ${s.metadata?.step ?? "?"})`);
    fill(from, history.map((s, i) => option(s, i, i === 1)));
    fill(to, history.map((s, i) => option(s, i, i === 0)));
    drawDiff();
  }
  function drawDiff() {
    const a = history[from.value];
    const b = history[to.value];
    const changes = a && b ? diff(a.values, b.values) : [];
    fill(
      diffCard,
      h("header.card-head", h("h2", "Difference"), h("div.row", from, h("span", "→"), to)),
      changes.length
        ? table(changes, [
            ["Path", (c) => h("code", c.path)],
            ["Change", (c) => h(`span.diff-${c.kind}`, c.kind)],
            ["Before", (c) => (c.before === undefined ? "—" : jsonBox(c.before, 0))],
            ["After", (c) => (c.after === undefined ? "—" : jsonBox(c.after, 0))],
          ])
        : empty(history.length < 2 ? "One checkpoint: nothing to compare." : "The values are the same."),
    );
  }
  fillCompare();
  select(current);
  return h(
    "div.view",
    pageHead(`Time travel · ${short(threadId)}`, assistantId ? `Runs start with assistant ${short(assistantId)}.` : "No assistant known for this thread.", link(`/threads/${threadId}`, "Thread", { class: "button ghost" })),
    h("div.grid", list, selected, diffCard),
  );
}
