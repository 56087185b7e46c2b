// Runs: the latest runs across the most recent threads, and one run: its status,
// error with its cause chain, webhook deliveries (destination redacted), and a live
// tail of an active run's frames, joined with cancel_on_disconnect off.

import { CAPS, assistants, get, post, stream } from "../api.js";
import {
  actionButton,
  badge,
  empty,
  errorBox,
  fill,
  h,
  jsonBox,
  link,
  pageHead,
  pushCapped,
  rerender,
  section,
  short,
  table,
  time,
} from "../ui.js";

const ACTIVE = new Set(["pending", "running"]);

/** Up to `limit` runs, newest first, from the threads most recently updated. */
export async function recentRuns(limit) {
  const threads = await post("/threads/search", { limit: 20, sort_by: "updated_at", sort_order: "desc" });
  const lists = await Promise.all(threads.map((t) => get(`/threads/${t.thread_id}/runs?limit=${Math.min(limit, CAPS.runs)}`)));
  return lists
    .flat()
    .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0))
    .slice(0, Math.min(limit, CAPS.runs));
}

/** Where a webhook goes, redacted (SPEC console item 9): the host, and whether a
 *  path beyond the root exists; a channel reply (`channel://<route>/...`) by its
 *  channel name only. */
export function redactWebhook(url) {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "channel:") return `channel ${parsed.host}`;
    const hasPath = parsed.pathname !== "/" && parsed.pathname !== "";
    return `${parsed.host}${hasPath ? " (with a path)" : ""}`;
  } catch {
    return "(not a URL)";
  }
}

export async function render({ parts, signal }) {
  if (parts.length >= 2) return detail(parts[0], parts[1], signal);
  return h(
    "div.view",
    pageHead("Runs", `The latest ${CAPS.runs} runs of the most recently updated threads.`),
    section("Runs", () => Promise.all([recentRuns(CAPS.runs), assistants()]), ([runs, list]) =>
      table(runs, [
        ["Run", (r) => link(`/runs/${r.thread_id}/${r.run_id}`, short(r.run_id))],
        ["Status", (r) => badge(r.status)],
        ["Thread", (r) => link(`/threads/${r.thread_id}`, short(r.thread_id))],
        ["Assistant", (r) => list.find((a) => a.assistant_id === r.assistant_id)?.name ?? short(r.assistant_id)],
        ["Created", (r) => time(r.created_at)],
      ], "No runs yet."),
    ),
  );
}

/** A RunError and its causes, one block per link. */
export function errorChain(error) {
  const links = [];
  for (let e = error, depth = 0; e && depth < 6; e = e.cause, depth++) {
    links.push(
      h(
        "li",
        h("strong", e.name ?? e.error ?? "Error"),
        ": ",
        e.message ?? "",
        e.errors?.length ? jsonBox(e.errors, 0) : null,
        e.stack ? h("pre.trace", e.stack) : null,
      ),
    );
  }
  return h("ol.cause-chain", { id: "run-error" }, links);
}

async function detail(threadId, runId, signal) {
  const base = `/threads/${threadId}/runs/${runId}`;
  const run = await get(base);
  const assistant = await get(`/assistants/${run.assistant_id}`).catch(() => null);
  const status = h("div");
  const tail = h("ol.frames", { id: "run-tail" });
  const tailNote = h("p.muted", { "aria-live": "polite" });
  const frames = [];
  let seen = 0;

  const drawTail = () => {
    fill(tail, frames.map((f) => h("li.frame", h(`span.mode.mode-${f.event}`, f.event), jsonBox(f.data, 1))));
    fill(tailNote, seen > frames.length ? `Showing the latest ${frames.length} of ${seen} frames.` : `${seen} frames.`);
  };

  async function follow() {
    fill(tailNote, h("span.loading", { role: "status" }, "Following the run…"));
    try {
      await stream("GET", `${base}/stream?cancel_on_disconnect=false`, undefined, {
        signal,
        lastEventId: -1,
        onFrame(frame) {
          seen++;
          pushCapped(frames, frame, CAPS.frames);
          drawTail();
        },
      });
      drawTail();
      tailNote.append(" The run has ended; reload to see its final status.");
    } catch (error) {
      if (error.name !== "AbortError") fill(tailNote, errorBox(error));
    }
  }

  const cancel = ACTIVE.has(run.status)
    ? actionButton(
        "Cancel run",
        async () => {
          await post(`${base}/cancel`);
          return "Cancel requested.";
        },
        { status, className: "danger" },
      )
    : null;
  const webhook = run.kwargs?.webhook;
  const view = h(
    "div.view",
    pageHead(`Run ${short(runId)}`, null, cancel, h("button.ghost", { type: "button", onclick: rerender }, "Reload")),
    status,
    h(
      "div.grid",
      h(
        "section.card",
        h("header.card-head", h("h2", "Run")),
        h(
          "dl.facts",
          h("dt", "Status"), h("dd", { id: "run-status" }, badge(run.status)),
          h("dt", "Thread"), h("dd", link(`/threads/${threadId}`, short(threadId))),
          h("dt", "Assistant"), h("dd", assistant ? link(`/assistants/${run.assistant_id}`, assistant.name) : short(run.assistant_id)),
          h("dt", "Created"), h("dd", time(run.created_at)),
          h("dt", "Updated"), h("dd", time(run.updated_at)),
          h("dt", "Webhook"), h("dd", webhook ? redactWebhook(webhook) : "none"),
        ),
      ),
      run.error ? h("section.card", h("header.card-head", h("h2", "Error")), errorChain(run.error)) : null,
      h("section.card", h("header.card-head", h("h2", "Input")), jsonBox(run.kwargs?.input ?? run.kwargs?.command ?? null, 2)),
      h("section.card", h("header.card-head", h("h2", "Metadata")), jsonBox(run.metadata, 1)),
      section("Deliveries", () => get(`${base}/deliveries?limit=${CAPS.runs}`), (rows) =>
        table(rows, [
          ["Delivery", (d) => short(d.delivery_id)],
          // Redacted by the server: a host, or a channel's name.
          ["Destination", (d) => d.destination ?? "—"],
          ["Status", (d) => badge(d.status)],
          ["Attempt", (d) => d.attempt],
          ["Last error", (d) => d.last_error ?? "—"],
          ["Next attempt", (d) => time(d.next_attempt_at)],
        ], webhook ? "No delivery yet." : "This run has no webhook."),
      ),
    ),
    h("section.card", h("header.card-head", h("h2", "Frames")), tailNote, tail),
  );
  if (ACTIVE.has(run.status)) follow();
  else fill(tailNote, empty("The run has ended; frames are shown while a run is active."));
  return view;
}
