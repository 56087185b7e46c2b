// Playground (the landing view): pick an assistant, chat or send JSON input, watch
// the run stream live by mode; Stop closes the stream, which cancels the run (it is
// started with on_disconnect=cancel). The thread is created on the first send.

import { CAPS, CONSOLE_SOURCE, assistants, get, post, stream } from "../api.js";
import { badge, errorBox, fill, h, jsonBox, link, pageHead, parseJson, pushCapped, short } from "../ui.js";

const MODES = ["values", "updates", "custom", "events"];
const LAST_ASSISTANT = "console.assistant";

/** Chat mode needs a `messages` channel in the input schema (SPEC, assistants). */
export function hasMessages(schemas) {
  return Boolean(schemas?.input_schema?.properties?.messages);
}

export async function render({ signal }) {
  const list = await assistants();
  const state = { thread: null, run: null, controller: null, frames: [], filter: "all", schemas: null };

  const select = h(
    "select",
    { id: "pg-assistant" },
    list.map((a) => h("option", { value: a.assistant_id }, a.name === a.graph_id ? a.name : `${a.name} (${a.graph_id})`)),
  );
  // The assistant picked last time, when it still exists.
  const remembered = localStorage.getItem(LAST_ASSISTANT);
  if (list.some((a) => a.assistant_id === remembered)) select.value = remembered;
  const modeBoxes = MODES.map((mode) =>
    h("label.check", h("input", { type: "checkbox", value: mode, checked: mode !== "events" }), mode),
  );
  const threadLine = h("p.muted", { id: "pg-thread" });
  const runLine = h("div.run-line", { "aria-live": "polite" });
  const chatLog = h("div.chat", { id: "pg-chat", "aria-live": "polite" });
  const input = h("textarea", { id: "pg-input", rows: 3 });
  const inputLabel = h("label", { for: "pg-input" });
  const send = h("button.primary", { type: "submit", id: "pg-send" }, "Send");
  const stop = h("button.danger", { type: "button", id: "pg-stop", disabled: true, onclick: () => stopRun() }, "Stop");
  const filter = h(
    "select",
    { id: "pg-filter", "aria-label": "Show frames of mode", onchange: () => ((state.filter = filter.value), drawFrames()) },
    h("option", { value: "all" }, "all modes"),
    ["metadata", ...MODES, "error"].map((mode) => h("option", { value: mode }, mode)),
  );
  const frames = h("ol.frames", { id: "pg-frames" });
  const status = h("div");

  const chat = () => hasMessages(state.schemas);

  function showThread() {
    fill(
      threadLine,
      state.thread
        ? ["Thread ", link(`/threads/${state.thread}`, short(state.thread)), " (created by the first send)"]
        : "A new thread is created on the first send.",
    );
  }

  async function pickAssistant() {
    fill(status);
    // Nothing is sent until the schemas say whether this is a chat.
    send.disabled = true;
    try {
      state.schemas = await get(`/assistants/${select.value}/schemas`);
    } catch (error) {
      state.schemas = null;
      fill(status, errorBox(error));
    } finally {
      send.disabled = false;
    }
    fill(inputLabel, chat() ? "Message" : "Input (JSON)");
    input.value = chat() ? "" : "{}";
    input.placeholder = chat() ? "Say something…" : '{"key": "value"}';
    input.classList.toggle("mono", !chat());
    chatLog.hidden = !chat();
    fill(runLine);
  }

  function drawFrames() {
    const shown = state.frames.filter((f) => state.filter === "all" || f.event === state.filter);
    fill(
      frames,
      shown.map((f) => h("li.frame", h(`span.mode.mode-${f.event}`, f.event), jsonBox(f.data, 1))),
    );
  }

  function drawChat(values) {
    const messages = values?.messages;
    if (!Array.isArray(messages)) return;
    fill(
      chatLog,
      messages.map((m) => {
        const who = m.type ?? m.role ?? "message";
        const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
        return h(`div.msg.msg-${who}`, h("span.who", who), h("p", text));
      }),
    );
  }

  function stopRun() {
    state.controller?.abort();
  }

  async function submit(event) {
    event.preventDefault();
    fill(status);
    let runInput;
    try {
      runInput = chat()
        ? { messages: [{ type: "human", content: input.value }] }
        : parseJson(input.value || "{}", "Input");
    } catch (error) {
      fill(status, errorBox(error));
      return;
    }
    const modes = modeBoxes.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
    send.disabled = true;
    try {
      if (!state.thread) {
        const thread = await post("/threads", { metadata: { source: CONSOLE_SOURCE } });
        state.thread = thread.thread_id;
        showThread();
      }
      state.frames = [];
      state.run = null;
      drawFrames();
      state.controller = new AbortController();
      stop.disabled = false;
      fill(runLine, h("span.loading", { role: "status" }, "Running…"));
      await stream(
        "POST",
        `/threads/${state.thread}/runs/stream`,
        { assistant_id: select.value, input: runInput, stream_mode: modes, on_disconnect: "cancel" },
        {
          signal: state.controller.signal,
          onFrame(frame) {
            if (frame.event === "metadata" && frame.data?.run_id) state.run = frame.data.run_id;
            pushCapped(state.frames, frame, CAPS.frames);
            if (frame.event === "values" && chat()) drawChat(frame.data);
            drawFrames();
          },
        },
      );
      if (chat()) input.value = "";
    } catch (error) {
      if (error.name !== "AbortError") fill(status, errorBox(error));
    } finally {
      stop.disabled = true;
      send.disabled = false;
      await showRun();
    }
  }

  /** The run's status once its stream has ended. A stopped run settles just after
   *  its stream closes, so an active status is read again for a few seconds. */
  async function showRun() {
    if (!state.run) return fill(runLine);
    try {
      let run;
      for (let tries = 0; tries < 20; tries++) {
        run = await get(`/threads/${state.thread}/runs/${state.run}`);
        if (!["pending", "running"].includes(run.status)) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      fill(runLine, "Run ", link(`/runs/${state.thread}/${state.run}`, short(state.run), { id: "pg-run" }), " ", badge(run.status));
    } catch (error) {
      fill(runLine, errorBox(error));
    }
  }

  select.addEventListener("change", () => {
    localStorage.setItem(LAST_ASSISTANT, select.value);
    state.thread = null;
    showThread();
    fill(chatLog);
    pickAssistant();
  });
  const newThread = h(
    "button.ghost",
    {
      type: "button",
      onclick: () => {
        state.thread = null;
        state.frames = [];
        showThread();
        fill(chatLog);
        drawFrames();
        fill(runLine);
      },
    },
    "New thread",
  );
  // Leaving the view closes the stream, which cancels the run like Stop.
  signal.addEventListener("abort", () => state.controller?.abort(), { once: true });
  showThread();
  await pickAssistant();

  return h(
    "div.view.playground",
    pageHead("Playground", "Run an assistant and watch its stream.", newThread),
    h(
      "div.split",
      h(
        "form.card.stack",
        { onsubmit: submit },
        h("label", { for: "pg-assistant" }, "Assistant"),
        select,
        threadLine,
        chatLog,
        inputLabel,
        input,
        h("fieldset.modes", h("legend", "Stream modes"), modeBoxes),
        h("div.row", send, stop),
        runLine,
        status,
      ),
      h("section.card", h("header.card-head", h("h2", "Stream"), filter), frames),
    ),
  );
}
