// Crons: the schedules, creating one (assistant, 5-field expression, input), pausing
// and resuming; the next occurrence as a relative time (SPEC console item 10).

import { CAPS, assistants, patch, post } from "../api.js";
import { actionButton, badge, fill, h, jsonBox, pageHead, parseJson, relTime, section, short, table } from "../ui.js";

/** Five space-separated fields; sub-minute schedules are unsupported. */
export const isFiveFields = (text) => text.trim().split(/\s+/).length === 5;

/** Paused, no upcoming run, or the next occurrence ("in 3 minutes"; a past-due
 *  unfired one reads as ago). */
export function nextText(cron) {
  if (!cron.enabled) return "paused";
  if (!cron.next_run_date) return "no upcoming run";
  return relTime(cron.next_run_date);
}

export async function render() {
  const list = await assistants();
  const status = h("div", { "aria-live": "polite" });
  const crons = section(
    "Schedules",
    () => post("/runs/crons/search", { limit: CAPS.crons, sort_by: "created_at", sort_order: "desc" }),
    (rows) =>
      table(rows, [
        ["Cron", (c) => short(c.cron_id)],
        ["Assistant", (c) => list.find((a) => a.assistant_id === c.assistant_id)?.name ?? short(c.assistant_id)],
        ["Schedule", (c) => h("code", c.schedule)],
        ["Timezone", (c) => c.timezone ?? "UTC"],
        ["Target", (c) => (c.thread_id ? `thread ${short(c.thread_id)}` : "stateless")],
        ["State", (c) => badge(c.enabled ? "enabled" : "paused")],
        ["Next", (c) => h("span", { title: c.next_run_date ?? "" }, nextText(c))],
        ["Input", (c) => jsonBox(c.payload?.input ?? null, 0)],
        ["", (c) =>
          actionButton(c.enabled ? "Pause" : "Resume", async () => {
            await patch(`/runs/crons/${c.cron_id}`, { enabled: !c.enabled });
            crons.reload();
          }, { status })],
      ], "No schedules yet."),
  );

  const assistant = h("select", { id: "cron-assistant" }, list.map((a) => h("option", { value: a.assistant_id }, a.name)));
  const schedule = h("input.mono", { id: "cron-schedule", type: "text", value: "*/5 * * * *", autocomplete: "off" });
  const input = h("textarea.mono", { id: "cron-input", rows: 3 });
  input.value = "{}";
  const formStatus = h("div", { "aria-live": "polite" });
  async function create(event) {
    event.preventDefault();
    fill(formStatus);
    try {
      if (!isFiveFields(schedule.value)) throw new Error("The schedule needs five fields: minute hour day month weekday.");
      const cron = await post("/runs/crons", {
        assistant_id: assistant.value,
        schedule: schedule.value.trim(),
        input: parseJson(input.value, "Input"),
      });
      fill(formStatus, h("span.ok", { role: "status" }, `Created cron ${short(cron.cron_id)}, next ${nextText(cron)}.`));
      crons.reload();
    } catch (error) {
      fill(formStatus, h("p.error", { role: "alert" }, error.message));
    }
  }
  return h(
    "div.view",
    pageHead("Crons", `Up to ${CAPS.crons} schedules.`),
    h(
      "div.grid",
      h(
        "form.card.stack",
        { onsubmit: create, id: "cron-form" },
        h("header.card-head", h("h2", "New schedule")),
        h("label", { for: "cron-assistant" }, "Assistant"),
        assistant,
        h("label", { for: "cron-schedule" }, "Schedule (5 fields, UTC)"),
        schedule,
        h("label", { for: "cron-input" }, "Input (JSON)"),
        input,
        h("div.row", h("button.primary", { type: "submit" }, "Create")),
        formStatus,
      ),
    ),
    status,
    crons,
  );
}
