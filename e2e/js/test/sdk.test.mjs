// The JS SDK against the server: runs, streams, joins, interrupts, thread state, query encodings.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HI, collect, contents, eventually, makeClient, marker, specOnly, waitRun } from "./helpers.mjs";
import { SDK_VERSION } from "./sdk.mjs";

const { client, requests } = makeClient();
const newThread = () => client.threads.create({ metadata: { e2e: marker() } });

test("runs.create returns a pending run and onRunCreated reads Content-Location", async () => {
  const t = await newThread();
  const seen = [];
  const run = await client.runs.create(t.thread_id, "echo", { input: HI, onRunCreated: (m) => seen.push(m) });
  assert.equal(run.thread_id, t.thread_id);
  assert.deepEqual(seen, [{ run_id: run.run_id, thread_id: t.thread_id }]);
  assert.equal((await waitRun(client, t.thread_id, run.run_id)).status, "success");
});

test("runs.wait returns the final values", async () => {
  const t = await newThread();
  const values = await client.runs.wait(t.thread_id, "echo", { input: HI });
  assert.deepEqual(contents(values), ["hi", "echo: hi"]);
});

test("stateless runs.wait and runs.stream", async () => {
  assert.deepEqual(contents(await client.runs.wait(null, "echo", { input: HI })), ["hi", "echo: hi"]);
  const parts = await collect(client.runs.stream(null, "echo", { input: HI, streamMode: ["updates"] }));
  assert.deepEqual(parts.map((p) => p.event), ["metadata", "updates"]);
  assert.equal(parts[1].data.echo.messages[0].content, "echo: hi");
});

test("runs.stream yields metadata first, then the requested modes", async () => {
  const t = await newThread();
  const parts = await collect(
    client.runs.stream(t.thread_id, "steps", { input: { n: 2 }, streamMode: ["values", "updates", "custom"] }),
  );
  assert.equal(parts[0].event, "metadata");
  assert.ok(parts[0].data.run_id);
  const custom = parts.filter((p) => p.event === "custom").map((p) => p.data);
  assert.deepEqual(custom, [{ step: 1 }, { step: 2 }]);
  assert.equal(parts.at(-1).event, "values");
  assert.equal(parts.at(-1).data.count, 2);
  assert.ok(!parts.some((p) => p.event === "error"));
});

test("runs.join blocks until the run is done", async () => {
  const t = await newThread();
  const run = await client.runs.create(t.thread_id, "slow", { input: { delay_ms: 300 } });
  const values = await client.runs.join(t.thread_id, run.run_id);
  assert.equal(values.done, true);
});

test("runs.joinStream with lastEventId -1 replays a resumable run from the start", async () => {
  const t = await newThread();
  const original = await collect(
    client.runs.stream(t.thread_id, "steps", { input: { n: 2 }, streamMode: ["updates"], streamResumable: true }),
  );
  assert.ok(original.every((p) => p.id));
  const runId = original[0].data.run_id;
  const replay = await collect(client.runs.joinStream(t.thread_id, runId, { lastEventId: "-1" }));
  assert.deepEqual(
    replay.map((p) => [p.event, p.data]),
    original.map((p) => [p.event, p.data]),
  );
});

test("runs.joinStream without a thread joins a stateless run's stream (GET /runs/{run_id}/stream)", async () => {
  const run = await client.runs.create(null, "steps", {
    input: { n: 2 },
    streamMode: ["custom"],
    streamResumable: true,
    onCompletion: "keep",
  });
  requests.length = 0;
  const parts = await collect(client.runs.joinStream(null, run.run_id, { lastEventId: "-1" }));
  assert.equal(requests.at(-1).url.pathname, `/runs/${run.run_id}/stream`);
  assert.equal(parts[0].event, "metadata");
  assert.deepEqual(
    parts.filter((p) => p.event === "custom").map((p) => p.data),
    [{ step: 1 }, { step: 2 }],
  );
});

test("runs.stream takes the tools stream mode (a graph that calls no tool sends no tool events)", async () => {
  const t = await newThread();
  const parts = await collect(client.runs.stream(t.thread_id, "echo", { input: HI, streamMode: ["tools", "values"] }));
  assert.deepEqual([...new Set(parts.map((p) => p.event))], ["metadata", "values"]);
  assert.deepEqual(contents(parts.at(-1).data), ["hi", "echo: hi"]);
});

test("runs.joinStream follows a live run", async () => {
  const t = await newThread();
  const run = await client.runs.create(t.thread_id, "slow", { input: { delay_ms: 1000 }, streamMode: ["values"] });
  const parts = await collect(client.runs.joinStream(t.thread_id, run.run_id));
  assert.equal(parts.at(-1).event, "values");
  assert.equal(parts.at(-1).data.done, true);
});

test("interrupt then resume with a command (approve and reject)", async () => {
  for (const [answer, status] of [[true, "approved"], [false, "rejected"]]) {
    const t = await newThread();
    const paused = await client.runs.wait(t.thread_id, "approval", { input: { topic: "js" } });
    assert.equal(paused.__interrupt__[0].value.question, "approve?");

    const state = await client.threads.getState(t.thread_id);
    assert.deepEqual(state.next, ["review"]);
    const thread = await client.threads.get(t.thread_id);
    assert.equal(thread.status, "interrupted");
    assert.deepEqual(Object.keys(thread.interrupts), [state.tasks[0].id]);

    const done = await client.runs.wait(t.thread_id, "approval", { command: { resume: answer } });
    assert.equal(done.status, status);
    assert.equal((await client.threads.get(t.thread_id)).status, "idle");
  }
});

test("thread state, updateState and history", async () => {
  const t = await newThread();
  await client.runs.wait(t.thread_id, "steps", { input: { n: 2 } });
  const state = await client.threads.getState(t.thread_id);
  assert.equal(state.values.count, 2);
  assert.deepEqual(state.next, []);
  assert.ok(state.checkpoint.checkpoint_id);

  const res = await client.threads.updateState(t.thread_id, { values: { log: ["js"] }, asNode: "step" });
  assert.ok(res.configurable?.checkpoint_id ?? res.checkpoint?.checkpoint_id);
  assert.deepEqual((await client.threads.getState(t.thread_id)).values.log, ["step 1", "step 2", "js"]);

  const history = await client.threads.getHistory(t.thread_id, { limit: 10 });
  assert.ok(history.length >= 3);
  const older = await client.threads.getHistory(t.thread_id, {
    limit: 10,
    before: { configurable: { checkpoint_id: history[0].checkpoint.checkpoint_id } },
  });
  assert.equal(older[0].checkpoint.checkpoint_id, history[1].checkpoint.checkpoint_id);

  const atCheckpoint = await client.threads.getState(t.thread_id, history[1].checkpoint.checkpoint_id);
  assert.equal(atCheckpoint.checkpoint.checkpoint_id, history[1].checkpoint.checkpoint_id);
});

test("threads.patchState merges metadata into the latest checkpoint", async () => {
  const t = await newThread();
  await assert.rejects(client.threads.patchState(t.thread_id, { reviewed: true }), /404/);
  await client.runs.wait(t.thread_id, "steps", { input: { n: 1 } });
  const before = await client.threads.getState(t.thread_id);
  await client.threads.patchState(t.thread_id, { reviewed: true, step: 99 });
  // The config form names the thread the same way.
  await client.threads.patchState({ configurable: { thread_id: t.thread_id } }, { by: "js" });
  const after = await client.threads.getState(t.thread_id);
  assert.equal(after.checkpoint.checkpoint_id, before.checkpoint.checkpoint_id);
  assert.equal(after.metadata.reviewed, true);
  assert.equal(after.metadata.step, 99);
  assert.equal(after.metadata.by, "js");
  assert.equal(after.metadata.source, before.metadata.source);
  const history = await client.threads.getHistory(t.thread_id, { limit: 10, metadata: { reviewed: true } });
  assert.deepEqual(history.map((s) => s.checkpoint.checkpoint_id), [before.checkpoint.checkpoint_id]);
});

test("failed run: stream error frame and runs.wait throws", async () => {
  const t = await newThread();
  const parts = await collect(client.runs.stream(t.thread_id, "fail", { input: {} }));
  const last = parts.at(-1);
  assert.equal(last.event, "error");
  assert.equal(last.data.error, "ValueError");
  assert.equal(last.data.message, "boom");
  await assert.rejects(client.runs.wait(t.thread_id, "fail", { input: {} }), /ValueError: boom/);
});

test("runs.list's select is honoured as the SDK sends it (repeated keys, or 2.0.0's JSON array)", async (t) => {
  const th = await newThread();
  await client.runs.wait(th.thread_id, "echo", { input: HI });
  requests.length = 0;
  let listed;
  let error;
  try {
    listed = await client.runs.list(th.thread_id, { select: ["run_id", "status"] });
  } catch (err) {
    error = err;
  }
  const url = requests.at(-1).url;
  const sent = SDK_VERSION === "2.0.0" ? ['["run_id","status"]'] : ["run_id", "status"];
  assert.deepEqual(url.searchParams.getAll("select"), sent);
  await specOnly(t, "contract: accept `select` as one JSON-array key (the peer answers 422)", async () => {
    assert.equal(error, undefined);
    assert.equal(listed.length, 1);
    assert.deepEqual(Object.keys(listed[0]).sort(), ["run_id", "status"]);
  });
});

test("runs.cancel sends wait=0 / wait=1 and stops the run", async (t) => {
  for (const wait of [false, true]) {
    const th = await newThread();
    const run = await client.runs.create(th.thread_id, "slow", { input: { delay_ms: 3000 } });
    await eventually(() => client.runs.get(th.thread_id, run.run_id), (r) => r.status === "running");
    requests.length = 0;
    await client.runs.cancel(th.thread_id, run.run_id, wait);
    const url = requests.find((r) => r.url.pathname.endsWith("/cancel")).url;
    assert.equal(url.searchParams.get("wait"), wait ? "1" : "0");
    assert.equal(url.searchParams.get("action"), "interrupt");
    const done = await waitRun(client, th.thread_id, run.run_id);
    assert.notEqual(done.status, "success");
    await specOnly(t, "SPEC A2: a cancelled run's status is `cancelled`", () => {
      assert.equal(done.status, "cancelled");
    });
  }
});

test("multitask reject answers 409 and is not retried", async () => {
  const th = await newThread();
  const run = await client.runs.create(th.thread_id, "slow", { input: { delay_ms: 1500 } });
  await eventually(() => client.runs.get(th.thread_id, run.run_id), (r) => r.status === "running");
  requests.length = 0;
  await assert.rejects(
    client.runs.create(th.thread_id, "echo", { input: HI, multitaskStrategy: "reject" }),
    (err) => err.status === 409,
  );
  assert.equal(requests.filter((r) => r.method === "POST").length, 1);
  await waitRun(client, th.thread_id, run.run_id);
});

test("threads.joinStream sees a run on the thread and its run_done marker", async () => {
  const th = await newThread();
  const controller = new AbortController();
  const stream = client.threads.joinStream(th.thread_id, { signal: controller.signal });
  const reader = (async () => {
    const parts = [];
    for await (const p of stream) {
      if (p.event) parts.push(p);
      if (p.event === "metadata" && p.data?.status === "run_done") break;
    }
    return parts;
  })();
  const run = await client.runs.create(th.thread_id, "slow", { input: { delay_ms: 1500 } });
  const timeout = setTimeout(() => controller.abort(), 15_000);
  const parts = await reader;
  clearTimeout(timeout);
  controller.abort();
  assert.equal(parts.at(-1).data.run_id, run.run_id);
});

test("store round trip through the JS client", async () => {
  const ns = ["e2e-js", marker()];
  await client.store.putItem(ns, "k", { a: 1 });
  const item = await client.store.getItem(ns, "k");
  assert.deepEqual(item.value, { a: 1 });
  const { items } = await client.store.searchItems(ns, { filter: { a: 1 } });
  assert.equal(items.length, 1);
  await client.store.deleteItem(ns, "k");
  assert.equal(await client.store.getItem(ns, "k"), null);
});
