// Interrupts: pending interrupts across interrupted threads. Approve resumes with
// true, Reject with false, free text with its JSON when it parses, else the text;
// the assistant is the one of the thread's most recent run (SPEC console item 6).

import { CAPS, latestRun, post } from "../api.js";
import { actionButton, fill, h, jsonBox, link, pageHead, section, short, time } from "../ui.js";

/** What free text resumes with. */
export function resumeValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The thread's pending interrupts, across its tasks. */
const pendingOf = (thread) => Object.values(thread.interrupts ?? {}).flat();

export async function render() {
  return h(
    "div.view",
    pageHead("Interrupts", `Pending interrupts of the ${CAPS.threads} most recently updated interrupted threads.`),
    section(
      null,
      async () => {
        const threads = await post("/threads/search", { status: "interrupted", limit: CAPS.threads, sort_by: "updated_at", sort_order: "desc" });
        // A thread paused without an interrupt (a cancelled run, interrupt_before) has
        // nothing to answer.
        const waiting = threads.filter((thread) => pendingOf(thread).length);
        return Promise.all(waiting.map(async (thread) => ({ thread, run: await latestRun(thread.thread_id) })));
      },
      (rows) => (rows.length ? h("ul.cards", rows.map(card)) : h("p.empty", "No thread is waiting on an interrupt.")),
    ),
  );
}

function card({ thread, run }) {
  const status = h("div", { "aria-live": "polite" });
  const id = thread.thread_id;
  const pending = pendingOf(thread);
  const resume = async (value) => {
    const started = await post(`/threads/${id}/runs`, { assistant_id: run.assistant_id, command: { resume: value } });
    // Answered: the interrupt is no longer pending, so its controls go.
    fill(actions);
    return ["Resumed: run ", link(`/runs/${id}/${started.run_id}`, short(started.run_id)), " started."];
  };
  const text = h("input", { type: "text", "aria-label": "Free-text answer", placeholder: "Answer (JSON or text)" });
  const actions = run
    ? h(
        "div.row",
        actionButton("Approve", () => resume(true), { status, className: "primary" }),
        actionButton("Reject", () => resume(false), { status, className: "danger" }),
        text,
        actionButton("Send answer", () => resume(resumeValue(text.value)), { status }),
      )
    : h("p.muted", "This thread has no runs, so no assistant to resume it with.");
  return h(
    "li.card.interrupt",
    { "data-thread": id },
    h(
      "header.card-head",
      h("h2", "Thread ", link(`/threads/${id}`, short(id))),
      h("span.muted", thread.metadata?.graph_id ?? "", " · ", time(thread.updated_at)),
    ),
    pending.map((i) => jsonBox(i.value, 2)),
    actions,
    status,
  );
}
