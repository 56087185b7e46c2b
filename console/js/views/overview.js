// Overview: threads by status, the most recent runs, and the queue (pending runs).

import { recentRuns } from "./runs.js";
import { badge, h, link, pageHead, section, short, table, time } from "../ui.js";
import { post, get, CAPS } from "../api.js";

const STATUSES = ["idle", "busy", "interrupted", "error"];

export async function render() {
  const refresh = h("button.ghost", { type: "button", onclick: () => parts.forEach((p) => p.reload()) }, "Refresh");
  const counts = section(
    "Threads by status",
    async () => {
      const [total, ...each] = await Promise.all([
        post("/threads/count", {}),
        ...STATUSES.map((status) => post("/threads/count", { status })),
      ]);
      return { total, each };
    },
    ({ total, each }) =>
      h(
        "div.tiles",
        h("a.tile", { href: "#/threads" }, h("span.tile-n", total), h("span.tile-label", "all")),
        STATUSES.map((status, i) =>
          h("a.tile", { href: `#/threads?status=${status}` }, h("span.tile-n", each[i]), badge(status)),
        ),
      ),
  );
  const queue = section(
    "Queue",
    async () => {
      // Pending runs wait on busy threads; a thread's runs are listed per thread.
      const busy = await post("/threads/search", { status: "busy", limit: CAPS.threads });
      const pending = await Promise.all(
        busy.map((t) => get(`/threads/${t.thread_id}/runs?status=pending&limit=${CAPS.runs}`)),
      );
      return { busy: busy.length, pending: pending.flat().length };
    },
    ({ busy, pending }) =>
      h(
        "div.tiles",
        h("div.tile", h("span.tile-n", { id: "queue-depth" }, pending), h("span.tile-label", "pending runs")),
        h("div.tile", h("span.tile-n", busy), h("span.tile-label", "busy threads")),
      ),
  );
  const recent = section(
    "Recent runs",
    () => recentRuns(10),
    (runs) =>
      table(runs, [
        ["Run", (r) => link(`/runs/${r.thread_id}/${r.run_id}`, short(r.run_id))],
        ["Status", (r) => badge(r.status)],
        ["Thread", (r) => link(`/threads/${r.thread_id}`, short(r.thread_id))],
        ["Created", (r) => time(r.created_at)],
      ], "No runs yet."),
  );
  const parts = [counts, queue, recent];
  return h("div.view", pageHead("Overview", "What the server holds now. Refresh to look again.", refresh), h("div.grid", parts));
}
