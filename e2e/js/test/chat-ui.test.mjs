// Agent Chat UI (langchain-ai/agent-chat-ui) against the built-in example graphs: the
// calls it makes, made the way it makes them. Its `useStream` options (a thread id
// kept by the page, `fetchStateHistory: true`), its submits (content-block messages,
// stream mode `values`, subgraphs, resumable), the thread list (threads.search by
// `graph_id` metadata), edit and regenerate from a message's parent checkpoint with
// the branch switcher, and the human-in-the-loop answer `{decisions: [...]}`.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { JSDOM } from "jsdom";
import { BASE_URL } from "./helpers.mjs";

// A browser window for react-dom and the hook, set before React is loaded.
const dom = new JSDOM("<!doctype html><html><body></body></html>", { url: "http://localhost/" });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
if (globalThis.navigator === undefined) globalThis.navigator = dom.window.navigator;
globalThis.IS_REACT_ACT_ENVIRONMENT = true;

const { act, createElement, useState } = await import("react");
const { createRoot } = await import("react-dom/client");
const { Client, loadReact } = await import("./sdk.mjs");
const { useStream } = await loadReact();

after(() => dom.window.close());

/** A page of the UI: a client whose requests are recorded; closing it ends them all. */
function openPage() {
  const closing = new AbortController();
  const requests = [];
  const client = new Client({
    apiUrl: BASE_URL,
    apiKey: null,
    callerOptions: {
      maxRetries: 0,
      fetch: (url, init = {}) => {
        if (closing.signal.aborted) return Promise.reject(new DOMException("the page is closed", "AbortError"));
        const signal = init.signal ? AbortSignal.any([init.signal, closing.signal]) : closing.signal;
        return fetch(url, { ...init, signal });
      },
    },
    onRequest: (url, init) => {
      requests.push({ url: new URL(url), method: init.method ?? "GET", body: init.body });
      return init;
    },
  });
  return { client, requests, close: () => closing.abort() };
}

/**
 * The UI's StreamSession: useStream with the page's thread id (the `threadId` query
 * parameter, set from onThreadId) and fetchStateHistory. `hook.current` is the
 * hook's latest value, `hook.threadId` the page's thread id.
 */
async function mountChat(client, assistantId, threadId = null) {
  const container = document.createElement("div");
  document.body.append(container);
  const root = createRoot(container);
  const hook = { current: null, threadId };
  function Chat() {
    const [pageThreadId, setPageThreadId] = useState(threadId);
    const stream = useStream({
      client,
      assistantId,
      threadId: pageThreadId,
      fetchStateHistory: true,
      onCustomEvent: () => {},
      onThreadId: (id) => {
        hook.threadId = id;
        setPageThreadId(id);
      },
    });
    // What the page renders: messages, values, the interrupt, the loading state.
    void stream.messages;
    void stream.values;
    void stream.interrupt;
    hook.current = stream;
    return null;
  }
  await act(async () => root.render(createElement(Chat)));
  hook.unmount = async () => {
    await act(async () => root.unmount());
    container.remove();
  };
  return hook;
}

/** Let React render until `predicate(hook.current)` holds (bounded, 20 s). */
async function until(hook, predicate, what, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (predicate(hook.current)) return hook.current;
    if (Date.now() > deadline) {
      const { values, isLoading, error, interrupt } = hook.current;
      throw new Error(
        `${what}: not reached within ${timeoutMs} ms; last render: ${JSON.stringify({ values, isLoading, interrupt, error: error?.message ?? error })}`,
      );
    }
    await act(() => new Promise((r) => setTimeout(r, 25)));
  }
}

/** The options of every submit the UI makes. */
const SUBMIT = { streamMode: ["values"], streamSubgraphs: true, streamResumable: true };

/** The UI's new human message: an id and a list of content blocks. */
const humanMessage = (text) => ({ id: randomUUID(), type: "human", content: [{ type: "text", text }] });

const texts = (messages) =>
  messages.map((m) => [m.type, typeof m.content === "string" ? m.content : m.content.map((b) => b.text).join("")]);

/** A chat turn as the UI's handleSubmit makes it; resolves once the answer is shown. */
async function sendMessage(hook, text, expectedCount) {
  const message = humanMessage(text);
  await act(() =>
    hook.current.submit(
      { messages: [message] },
      { ...SUBMIT, optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }) },
    ),
  );
  await until(hook, (s) => !s.isLoading && s.messages.length === expectedCount, `the answer to ${text}`);
  return message;
}

const isHitlRequest = (value) =>
  Array.isArray(value?.action_requests) &&
  value.action_requests.length > 0 &&
  value.action_requests.every((r) => typeof r.name === "string" && r.args !== null && typeof r.args === "object") &&
  Array.isArray(value?.review_configs) &&
  value.review_configs.length > 0 &&
  value.review_configs.every((c) => typeof c.action_name === "string" && Array.isArray(c.allowed_decisions));

test("Agent Chat UI: a content-block message is answered `echo: hello`, every message with an id", async () => {
  const page = openPage();
  assert.ok((await fetch(`${BASE_URL}/info`)).ok, "the UI's connection check");
  const chat = await mountChat(page.client, "echo");
  try {
    const sent = await sendMessage(chat, "hello", 2);
    const done = chat.current;
    assert.equal(done.error, undefined);
    assert.deepEqual(texts(done.messages), [
      ["human", "hello"],
      ["ai", "echo: hello"],
    ]);
    assert.equal(done.messages[0].id, sent.id, "the UI's own id is kept");
    assert.ok(done.messages[1].id, "the answer has an id");
    // The run was streamed with the UI's options, from the new thread.
    const post = page.requests.find((r) => r.method === "POST" && r.url.pathname.endsWith("/runs/stream"));
    assert.equal(post.url.pathname, `/threads/${chat.threadId}/runs/stream`);
    const body = JSON.parse(post.body);
    assert.ok(body.stream_mode.includes("values"));
    assert.equal(body.stream_subgraphs, true);
    assert.equal(body.stream_resumable, true);
    // After the run the hook read the thread's history for its branches.
    assert.ok(page.requests.some((r) => r.method === "POST" && r.url.pathname === `/threads/${chat.threadId}/history`));
    const state = await page.client.threads.getState(chat.threadId);
    assert.deepEqual(
      state.values.messages.map((m) => m.id),
      done.messages.map((m) => m.id),
    );
  } finally {
    await chat.unmount();
    page.close();
  }
});

test("Agent Chat UI: after a reload the thread is listed by graph_id and reopens with its messages", async () => {
  const first = openPage();
  const chat = await mountChat(first.client, "echo");
  let threadId;
  try {
    await sendMessage(chat, "remember me", 2);
    threadId = chat.threadId;
  } finally {
    await chat.unmount();
    first.close();
  }

  // The reloaded page lists the threads of the graph as its sidebar does.
  const page = openPage();
  const threads = await page.client.threads.search({ metadata: { graph_id: "echo" }, limit: 100 });
  const listed = threads.find((t) => t.thread_id === threadId);
  assert.ok(listed, "the thread is in the graph's list");
  assert.equal(listed.metadata.graph_id, "echo");
  assert.deepEqual(texts(listed.values.messages), [
    ["human", "remember me"],
    ["ai", "echo: remember me"],
  ]);

  // Opening it mounts the hook on its id: the messages come from the history.
  const reopened = await mountChat(page.client, "echo", threadId);
  try {
    const shown = await until(reopened, (s) => !s.isLoading && s.messages.length === 2, "the reopened thread's messages");
    assert.equal(shown.error, undefined);
    assert.deepEqual(texts(shown.messages), [
      ["human", "remember me"],
      ["ai", "echo: remember me"],
    ]);
    const historyCall = page.requests.find((r) => r.url.pathname === `/threads/${threadId}/history`);
    assert.equal(historyCall.method, "POST");
    assert.equal(JSON.parse(historyCall.body).limit, 10);
    // Nothing was run by opening it.
    assert.ok(!page.requests.some((r) => r.url.pathname.includes("/runs")));
  } finally {
    await reopened.unmount();
    page.close();
  }
});

test("Agent Chat UI: editing a message and regenerating an answer fork branches the switcher shows", async () => {
  const page = openPage();
  const chat = await mountChat(page.client, "echo");
  try {
    await sendMessage(chat, "hello", 2);
    const original = chat.current.messages;

    // Edit: the human message's parent checkpoint, a new message without an id.
    const humanMeta = chat.current.getMessagesMetadata(original[0]);
    const editFrom = humanMeta.firstSeenState.parent_checkpoint;
    assert.ok(editFrom?.checkpoint_id, "the human message has a parent checkpoint");
    await act(() =>
      chat.current.submit({ messages: [{ type: "human", content: "hello again" }] }, { ...SUBMIT, checkpoint: editFrom }),
    );
    const edited = await until(
      chat,
      (s) => !s.isLoading && s.messages.some((m) => m.content === "echo: hello again"),
      "the edited message's answer",
    );
    assert.deepEqual(texts(edited.messages), [
      ["human", "hello again"],
      ["ai", "echo: hello again"],
    ]);
    const editedMeta = edited.getMessagesMetadata(edited.messages[0]);
    assert.equal(editedMeta.branchOptions?.length, 2, "two versions of the first message");
    const otherBranch = editedMeta.branchOptions.find((b) => b !== editedMeta.branch);

    // The switcher's other branch shows the original exchange again.
    await act(() => edited.setBranch(otherBranch));
    const back = await until(chat, (s) => s.messages[0]?.id === original[0].id, "the original branch");
    assert.deepEqual(texts(back.messages), [
      ["human", "hello"],
      ["ai", "echo: hello"],
    ]);

    // Regenerate the answer: no input, from the answer's parent checkpoint.
    const answerMeta = back.getMessagesMetadata(back.messages[1]);
    const regenerateFrom = answerMeta.firstSeenState.parent_checkpoint;
    await act(() => back.submit(undefined, { ...SUBMIT, checkpoint: regenerateFrom }));
    const regenerated = await until(
      chat,
      (s) => !s.isLoading && s.messages.length === 2 && s.messages[1].id !== original[1].id,
      "the regenerated answer",
    );
    assert.equal(regenerated.error, undefined);
    assert.deepEqual(texts(regenerated.messages), [
      ["human", "hello"],
      ["ai", "echo: hello"],
    ]);
    assert.equal(regenerated.messages[0].id, original[0].id, "the question is the same message");
    const regeneratedMeta = regenerated.getMessagesMetadata(regenerated.messages[1]);
    assert.equal(regeneratedMeta.branchOptions?.length, 2, "two versions of the answer");
  } finally {
    await chat.unmount();
    page.close();
  }
});

test("Agent Chat UI: the approval interrupt is shown in the HITL shape and approved with decisions", async () => {
  const page = openPage();
  const chat = await mountChat(page.client, "approval");
  try {
    const message = humanMessage("cats");
    await act(() => chat.current.submit({ messages: [message] }, SUBMIT));
    const paused = await until(chat, (s) => !s.isLoading && s.interrupt != null, "the interrupt");
    assert.equal(paused.error, undefined);
    assert.ok(isHitlRequest(paused.interrupt.value), `an interrupt the UI renders: ${JSON.stringify(paused.interrupt.value)}`);
    assert.deepEqual(paused.interrupt.value.action_requests[0].args, { draft: "draft for cats" });
    assert.deepEqual(texts(paused.messages), [["human", "cats"]]);

    // The UI's approve button: an empty input and a resume command of decisions.
    await act(() => paused.submit({}, { command: { resume: { decisions: [{ type: "approve" }] } } }));
    const approved = await until(chat, (s) => !s.isLoading && s.values.status != null, "the approved run's end");
    assert.equal(approved.error, undefined);
    assert.equal(approved.values.status, "approved");
    assert.equal(approved.interrupt, undefined);
    assert.deepEqual(texts(approved.messages), [
      ["human", "cats"],
      ["ai", "approved: draft for cats"],
    ]);
    const thread = await page.client.threads.get(chat.threadId);
    assert.equal(thread.status, "idle");
  } finally {
    await chat.unmount();
    page.close();
  }
});
