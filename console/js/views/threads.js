// Threads: the list, filtered by a status kept in the URL hash
// (#/threads?status=interrupted; an unknown value means all), and one thread: its
// state with values as a collapsible tree, its runs and its history.

import { CAPS, get, post } from "../api.js";
import { badge, h, jsonBox, link, pageHead, section, short, table, time } from "../ui.js";

const STATUSES = ["idle", "busy", "interrupted", "error"];

export async function render({ parts, query }) {
  if (parts.length) return detail(parts[0]);
  const asked = query.get("status");
  const status = STATUSES.includes(asked) ? asked : "all";
  const filter = h(
    "select",
    {
      id: "thread-status",
      onchange: () => (location.hash = filter.value === "all" ? "#/threads" : `#/threads?status=${filter.value}`),
    },
    ["all", ...STATUSES].map((s) => h("option", { value: s, selected: s === status }, s)),
  );
  const body = { limit: CAPS.threads, sort_by: "updated_at", sort_order: "desc" };
  if (status !== "all") body.status = status;
  return h(
    "div.view",
    pageHead("Threads", `The ${CAPS.threads} most recently updated threads.`, h("label", { for: "thread-status" }, "Status "), filter),
    section("Threads", () => post("/threads/search", body), (threads) =>
      table(threads, [
        ["Thread", (t) => link(`/threads/${t.thread_id}`, short(t.thread_id))],
        ["Status", (t) => badge(t.status)],
        ["Graph", (t) => t.metadata?.graph_id ?? "—"],
        ["Source", (t) => t.metadata?.source ?? "—"],
        ["Updated", (t) => time(t.updated_at)],
      ], status === "all" ? "No threads yet." : `No ${status} threads.`),
    ),
  );
}

async function detail(threadId) {
  const thread = await get(`/threads/${threadId}`);
  return h(
    "div.view",
    pageHead(`Thread ${short(threadId)}`, null, link(`/timetravel/${threadId}`, "Time travel", { class: "button ghost" })),
    h(
      "div.grid",
      h(
        "section.card",
        h("header.card-head", h("h2", "Thread")),
        h(
          "dl.facts",
          h("dt", "Id"), h("dd.mono", threadId),
          h("dt", "Status"), h("dd", { id: "thread-status-value" }, badge(thread.status)),
          thread.error ? [h("dt", "Error"), h("dd.error-text", typeof thread.error === "string" ? thread.error : JSON.stringify(thread.error))] : null,
          h("dt", "Created"), h("dd", time(thread.created_at)),
          h("dt", "Updated"), h("dd", time(thread.updated_at)),
        ),
        h("h3", "Metadata"),
        jsonBox(thread.metadata, 1),
      ),
      section("State", () => get(`/threads/${threadId}/state`), (state) => [
        h("h3", "Values"),
        h("div", { id: "thread-values" }, jsonBox(state.values, 2)),
        h("h3", "Next"),
        h("p", state.next?.length ? state.next.join(", ") : "nothing (the thread is not paused)"),
        state.interrupts?.length ? [h("h3", "Pending interrupts"), jsonBox(state.interrupts, 2)] : null,
        state.tasks?.length ? [h("h3", "Tasks"), jsonBox(state.tasks, 1)] : null,
      ]),
      section("Runs", () => get(`/threads/${threadId}/runs?limit=${CAPS.runs}`), (runs) =>
        table(runs, [
          ["Run", (r) => link(`/runs/${threadId}/${r.run_id}`, short(r.run_id))],
          ["Status", (r) => badge(r.status)],
          ["Created", (r) => time(r.created_at)],
        ], "No runs on this thread."),
      ),
      section("History", () => post(`/threads/${threadId}/history`, { limit: CAPS.checkpoints }), (states) =>
        table(states, [
          ["Checkpoint", (s) => short(s.checkpoint?.checkpoint_id)],
          ["Step", (s) => s.metadata?.step ?? "—"],
          ["Source", (s) => s.metadata?.source ?? "—"],
          ["Next", (s) => s.next?.join(", ") || "—"],
          ["Created", (s) => time(s.created_at)],
        ], "No checkpoints."),
      ),
    ),
  );
}
