// `client.threads.stream()` of the JS SDK 1.15 (protocol v2: commands on a thread and
// its events over SSE or a WebSocket): a run's values and output, the custom, named
// custom and checkpoints channels, namespace prefixes, and how a socket to a thread it
// may not stream is closed. SDK 2.0.0 has no `threads.stream`: these are skipped there.
import { test } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { BASE_URL } from "./helpers.mjs";
import { Client, SDK_VERSION } from "./sdk.mjs";

const skip = SDK_VERSION === "2.0.0" && "the JS SDK 2.0.0 has no client.threads.stream";
const RUST_GRAPHS = (process.env.E2E_GRAPHS ?? "rust") === "rust";
// No onRequest hook: the WebSocket transport refuses one (a browser socket sends no headers).
const client = new Client({ apiUrl: BASE_URL, apiKey: null });
const webSocketFactory = (url) => new WebSocket(url);

/** Reads a subscription until `stop(event)` holds (bounded, 20 s); the events read. */
async function readUntil(subscription, stop) {
  const events = [];
  const read = (async () => {
    for await (const event of subscription) {
      events.push(event);
      if (stop(event)) return;
    }
  })();
  let timer;
  const bound = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not reached in 20 s; read ${JSON.stringify(events)}`)), 20_000);
  });
  try {
    await Promise.race([read, bound]);
  } finally {
    clearTimeout(timer);
  }
  return events;
}

for (const transport of ["sse", "websocket"]) {
  test(`threads.stream (${transport}): a run on a new thread gives its values and output`, { skip }, async () => {
    const thread = client.threads.stream({ assistantId: "echo", transport, webSocketFactory });
    try {
      await thread.run.start({ input: { messages: [{ type: "human", content: "hi" }] } });
      const output = await thread.output;
      assert.deepEqual(
        output.messages.map((m) => [m.type ?? m.getType?.(), m.content]),
        [
          ["human", "hi"],
          ["ai", "echo: hi"],
        ],
      );
      assert.equal(thread.interrupted, false);
      const state = await client.threads.getState(thread.threadId);
      assert.equal(state.values.messages.at(-1).content, "echo: hi");
    } finally {
      await thread.close();
    }
  });
}

test("threads.stream: the custom and checkpoints channels", { skip }, async () => {
  const thread = client.threads.stream({ assistantId: "steps" });
  try {
    await thread.run.start({ input: { n: 3 } });
    // A subscription made after the run replays the thread's events from the start.
    // "After": once the SDK saw the run end. One registered while the run ends is
    // paused by the SDK at the run's terminal event, which may reach it on the open
    // stream before the replay of the new one does, leaving it empty.
    await thread.output;
    const custom = await readUntil(await thread.subscribe(["custom"]), (e) => e.params.data.payload?.step === 3);
    assert.deepEqual(
      custom.map((e) => e.params.data.payload),
      [{ step: 1 }, { step: 2 }, { step: 3 }],
    );
    const state = await client.threads.getState(thread.threadId);
    const current = state.checkpoint.checkpoint_id;
    const checkpoints = (await readUntil(await thread.subscribe(["checkpoints"]), (e) => e.params.data.id === current)).map(
      (e) => e.params.data,
    );
    // The input, the input applied, then one per step: each names the one before as
    // its parent.
    assert.deepEqual(
      checkpoints.map((c) => [c.source, c.step]),
      [
        ["input", -1],
        ["loop", 0],
        ["loop", 1],
        ["loop", 2],
        ["loop", 3],
      ],
    );
    for (let i = 1; i < checkpoints.length; i += 1) {
      assert.equal(checkpoints[i].parent_id, checkpoints[i - 1].id);
    }
    // A named custom channel is one the server takes (an unknown channel is a 400,
    // which would reject the subscription).
    const named = await thread.subscribe({ channels: ["custom:progress"] });
    await named.unsubscribe();
  } finally {
    await thread.close();
  }
});

test("threads.stream: a namespace prefix without a task id selects a subgraph's events", { skip: skip || (!RUST_GRAPHS && "the nested graph is a built-in one") }, async () => {
  const thread = client.threads.stream({ assistantId: "nested" });
  try {
    await thread.run.start({ input: { topic: "cats" } });
    const drafted = (e) => e.method === "values" && e.params.data.draft === "draft for cats";
    const events = await readUntil(await thread.subscribe({ channels: ["values"], namespaces: [["review"]] }), drafted);
    for (const event of events) {
      assert.equal(event.params.namespace.length, 1, JSON.stringify(event));
      assert.match(event.params.namespace[0], /^review:/);
    }
    // The root alone: depth 0 under the empty prefix.
    const paused = (e) => e.method === "lifecycle" && e.params.data.event === "interrupted";
    const root = await readUntil(await thread.subscribe({ channels: ["lifecycle"], namespaces: [[]], depth: 0 }), paused);
    assert.ok(root.every((e) => e.params.namespace.length === 0), JSON.stringify(root));
  } finally {
    await thread.close();
  }
});

test("threads.stream (websocket): a malformed thread id fails the stream with the 422 the socket closes with", { skip }, async () => {
  const thread = client.threads.stream("not-a-uuid", { assistantId: "echo", transport: "websocket", webSocketFactory });
  const failed = new Promise((resolve) => thread.onError(resolve));
  try {
    // The socket opens, then the server closes it with 4422: no command gets through.
    await assert.rejects(thread.run.start({ input: {} }));
    const error = await failed;
    assert.equal(error.status, 422, String(error));
    assert.match(error.message, /4422/);
  } finally {
    await thread.close();
  }
});
