// The JS SDK's React hook `useStream` (@langchain/langgraph-sdk/react) against the
// server, rendered with react-dom in a jsdom window under node:test: a chat turn, an
// interrupt and its resumption, rejoining a run after a "reload" (reconnectOnMount),
// and stop() cancelling the run.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { BASE_URL, contents, marker, specOnly, waitRun } from "./helpers.mjs";

// A browser window for react-dom and for the hook (which reads `window` to decide
// whether it can keep run ids for reconnectOnMount). Set before React is loaded.
const dom = new JSDOM("<!doctype html><html><body></body></html>", { url: "http://localhost/" });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
// Node 20 has no global navigator (react-dom reads its userAgent); Node 21+ has one.
if (globalThis.navigator === undefined) globalThis.navigator = dom.window.navigator;
globalThis.IS_REACT_ACT_ENVIRONMENT = true;

const { act, createElement } = await import("react");
const { createRoot } = await import("react-dom/client");
const { Client, loadReact } = await import("./sdk.mjs");
const { useStream } = await loadReact();

after(() => dom.window.close());

/**
 * A browser "page": a client whose requests are recorded and whose connections all end
 * when the page is closed (as a reload ends them), so nothing of it lives on.
 */
function openPage() {
  const closing = new AbortController();
  const requests = [];
  const client = new Client({
    apiUrl: BASE_URL,
    apiKey: null,
    callerOptions: {
      maxRetries: 0,
      fetch: (url, init = {}) => {
        // What a request of a closed page fails with: an abort, which the SDK neither
        // retries nor reports (its stream reconnects after a dropped connection).
        if (closing.signal.aborted) return Promise.reject(new DOMException("AbortError: the page is closed", "AbortError"));
        const signal = init.signal ? AbortSignal.any([init.signal, closing.signal]) : closing.signal;
        return fetch(url, { ...init, signal });
      },
    },
    onRequest: (url, init) => {
      requests.push({ url: new URL(url), method: init.method ?? "GET", headers: new Headers(init.headers), body: init.body });
      return init;
    },
  });
  return { client, requests, close: () => closing.abort() };
}

/**
 * Render a component calling useStream(options) and keep what each render saw.
 * `hook.current` is the hook's latest return value; `hook.renders` the snapshots
 * (values, messages, interrupt, isLoading, error) of every render.
 */
async function mountHook(options) {
  const container = document.createElement("div");
  document.body.append(container);
  const root = createRoot(container);
  const hook = { current: null, renders: [] };
  function Probe() {
    const stream = useStream(options);
    hook.current = stream;
    // Reading `messages` and `values` during render is what makes the hook ask for
    // the `messages-tuple` and `values` stream modes, as an app rendering them would.
    hook.renders.push({
      values: stream.values,
      messages: stream.messages,
      interrupt: stream.interrupt,
      isLoading: stream.isLoading,
      error: stream.error,
    });
    return null;
  }
  await act(async () => root.render(createElement(Probe)));
  hook.unmount = async () => {
    await act(async () => root.unmount());
    container.remove();
  };
  return hook;
}

/** Let React render until `predicate(hook.current)` holds (bounded, default 20 s). */
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

/**
 * Start `hook.current.submit(...args)` without waiting for its run: SDK 1.15's submit
 * resolves only when the run's stream ends. Its outcome is the stream's, which the
 * renders show (a page closed mid-run ends it with an abort).
 */
async function startSubmit(hook, ...args) {
  await act(async () => {
    hook.current.submit(...args).catch(() => {});
  });
}

const streamRequests = (requests) => requests.filter((r) => r.method === "POST" && r.url.pathname.endsWith("/runs/stream"));

test("useStream: a chat turn streams the messages into the hook", async () => {
  const page = openPage();
  const threadIds = [];
  const hook = await mountHook({ client: page.client, assistantId: "echo", onThreadId: (id) => threadIds.push(id) });
  try {
    assert.deepEqual(hook.current.messages, []);
    assert.equal(hook.current.isLoading, false);

    await act(() => hook.current.submit({ messages: [{ type: "human", content: "hi" }] }, { metadata: { e2e: marker() } }));
    const done = await until(hook, (s) => !s.isLoading && s.messages.length === 2, "the AI's answer");

    assert.equal(done.error, undefined);
    assert.deepEqual(
      done.messages.map((m) => [m.type, m.content]),
      [
        ["human", "hi"],
        ["ai", "echo: hi"],
      ],
    );
    // The hook made the thread, then streamed the run there with the modes its render read.
    assert.equal(threadIds.length, 1);
    const [post] = streamRequests(page.requests);
    assert.equal(post.url.pathname, `/threads/${threadIds[0]}/runs/stream`);
    const body = JSON.parse(post.body);
    assert.deepEqual([...body.stream_mode].sort(), ["messages-tuple", "values"]);
    assert.equal(body.on_disconnect, "cancel");
    // The answer came over the stream while loading: the hook fetches no state
    // (fetchStateHistory is off), so the stream is its only source.
    assert.ok(!page.requests.some((r) => r.url.pathname.endsWith("/state") || r.url.pathname.endsWith("/history")));
    assert.ok(hook.renders.some((r) => r.isLoading && r.messages.some((m) => m.content === "echo: hi")));
    // And it is what the thread holds.
    const state = await page.client.threads.getState(threadIds[0]);
    assert.deepEqual(contents(state.values), ["hi", "echo: hi"]);
  } finally {
    await hook.unmount();
    page.close();
  }
});

test("useStream: an interrupt is shown, and submit with a resume command resumes it", async () => {
  const page = openPage();
  const hook = await mountHook({ client: page.client, assistantId: "approval" });
  try {
    await act(() => hook.current.submit({ topic: "react" }, { metadata: { e2e: marker() } }));
    const paused = await until(hook, (s) => !s.isLoading && s.interrupt != null, "the interrupt");

    assert.equal(paused.error, undefined);
    assert.ok(!Array.isArray(paused.interrupt), "one interrupt");
    assert.equal(paused.interrupt.value.question, "approve?");
    assert.equal(paused.interrupt.value.draft, "draft for react");
    assert.equal(paused.values.draft, "draft for react");
    assert.equal(paused.values.status, undefined);

    await act(() => paused.submit(undefined, { command: { resume: true } }));
    const resumed = await until(hook, (s) => !s.isLoading && s.values.status != null, "the resumed run's end");

    assert.equal(resumed.error, undefined);
    assert.equal(resumed.values.status, "approved");
    assert.equal(resumed.interrupt, undefined);
    // Both runs went to one thread; the second carried the command and no input.
    const posts = streamRequests(page.requests);
    assert.equal(posts.length, 2);
    assert.equal(posts[1].url.pathname, posts[0].url.pathname);
    const second = JSON.parse(posts[1].body);
    assert.deepEqual(second.command, { resume: true });
    assert.equal(second.input, undefined);
    const threadId = posts[0].url.pathname.split("/")[2];
    const thread = await page.client.threads.get(threadId);
    assert.equal(thread.status, "idle");
    assert.equal(thread.values.status, "approved");
  } finally {
    await hook.unmount();
    page.close();
  }
});

/** A sessionStorage stand-in that outlives the pages (as the tab's storage outlives a reload). */
function tabStorage() {
  const items = new Map();
  return {
    items,
    getItem: (key) => items.get(key) ?? null,
    setItem: (key, value) => items.set(key, String(value)),
    removeItem: (key) => items.delete(key),
  };
}

test("useStream: reconnectOnMount rejoins the run after a reload", async () => {
  const storage = tabStorage();
  const setup = openPage();
  const thread = await setup.client.threads.create({ metadata: { e2e: marker() } });
  const threadId = thread.thread_id;
  const key = `lg:stream:${threadId}`;

  // Page 1 starts a slow run; the hook keeps its id in the storage.
  const page1 = openPage();
  const first = await mountHook({
    client: page1.client,
    assistantId: "slow",
    threadId,
    reconnectOnMount: () => storage,
    // A listener for updates makes the run stream them too (the join reads them below).
    onUpdateEvent: () => {},
  });
  let runId;
  try {
    await startSubmit(first, { delay_ms: 3000 });
    await until(first, (s) => s.isLoading && storage.getItem(key) != null && s.values.delay_ms === 3000, "the run's start");
    runId = storage.getItem(key);
    const body = JSON.parse(streamRequests(page1.requests)[0].body);
    assert.equal(body.stream_resumable, true);
    assert.equal(body.on_disconnect, "continue");
    assert.ok(body.stream_mode.includes("updates"));
  } finally {
    // The reload: page 1's connections end and its component goes away.
    page1.close();
    await first.unmount();
  }
  // The run outlives the page (on_disconnect "continue") and is still going.
  const during = await setup.client.runs.get(threadId, runId);
  assert.ok(["pending", "running"].includes(during.status), `run still in flight at the reload, got ${during.status}`);

  // Page 2 mounts the hook on the same thread with the same storage: it rejoins.
  const page2 = openPage();
  const metadata = [];
  const updates = [];
  const second = await mountHook({
    client: page2.client,
    assistantId: "slow",
    threadId,
    reconnectOnMount: () => storage,
    onMetadataEvent: (data) => metadata.push(data),
    onUpdateEvent: (data) => updates.push(data),
  });
  try {
    const done = await until(second, (s) => !s.isLoading && s.values.done === true, "the rejoined run's end");
    assert.equal(done.error, undefined);

    const joins = page2.requests.filter((r) => r.method === "GET" && r.url.pathname === `/threads/${threadId}/runs/${runId}/stream`);
    assert.equal(joins.length, 1, "one join request");
    assert.equal(joins[0].headers.get("last-event-id"), "-1");
    assert.ok(second.renders.some((r) => r.isLoading), "the hook streamed the joined run");
    // The join replayed the run from its start (its metadata frame) and carried its
    // node's update, which only the stream holds.
    assert.deepEqual(
      metadata.map((m) => m.run_id),
      [runId],
    );
    assert.deepEqual(updates, [{ sleep: { done: true } }]);
    // Finished, the hook forgets the run, and the run succeeded.
    assert.equal(storage.getItem(key), null);
    assert.equal((await waitRun(setup.client, threadId, runId)).status, "success");
    assert.ok(!page2.requests.some((r) => r.method === "POST"), "page 2 started no run");
  } finally {
    await second.unmount();
    page2.close();
    setup.close();
  }
});

async function stopSlowRun(t, { reconnect }) {
  const storage = tabStorage();
  const page = openPage();
  const created = [];
  const hook = await mountHook({
    client: page.client,
    assistantId: "slow",
    onCreated: (meta) => created.push(meta),
    ...(reconnect ? { reconnectOnMount: () => storage } : {}),
  });
  try {
    await startSubmit(hook, { delay_ms: 3000 }, { metadata: { e2e: marker() } });
    await until(hook, (s) => s.isLoading && created.length === 1 && s.values.delay_ms === 3000, "the run's start");
    const { thread_id: threadId, run_id: runId } = created[0];
    const body = JSON.parse(streamRequests(page.requests)[0].body);
    assert.equal(body.on_disconnect, reconnect ? "continue" : "cancel");

    await act(() => hook.current.stop());
    const stopped = await until(hook, (s) => !s.isLoading, "the hook's stop");
    assert.equal(stopped.error, undefined);
    assert.notEqual(stopped.values.done, true);

    const run = await waitRun(page.client, threadId, runId);
    assert.ok(["cancelled", "interrupted"].includes(run.status), `run status ${run.status}`);
    await specOnly(t, "SPEC A2: a cancelled run's status is `cancelled`", () => {
      assert.equal(run.status, "cancelled");
    });
    const state = await page.client.threads.getState(threadId);
    assert.notEqual(state.values.done, true, "the node never finished");
    if (reconnect) {
      // With run ids kept, stop() cancels the run by id and forgets it.
      const cancels = page.requests.filter((r) => r.method === "POST" && r.url.pathname === `/threads/${threadId}/runs/${runId}/cancel`);
      assert.equal(cancels.length, 1);
      assert.equal(storage.getItem(`lg:stream:${threadId}`), null);
    } else {
      // Without, stop() only drops the stream; on_disconnect "cancel" does the rest.
      assert.ok(!page.requests.some((r) => r.url.pathname.endsWith("/cancel")));
    }
    return run;
  } finally {
    await hook.unmount();
    page.close();
  }
}

test("useStream: stop() ends the stream and the run is cancelled (on_disconnect cancel)", async (t) => {
  await stopSlowRun(t, { reconnect: false });
});

test("useStream: stop() cancels the run by id when reconnectOnMount keeps it", async (t) => {
  await stopSlowRun(t, { reconnect: true });
});
