// API keys and owner scoping through the JS SDK's `apiKey` (sent as x-api-key). The
// tests start a server of their own with an `auth` block: identities alice and bob
// (fresh names per run, so servers sharing one database in start mode never see an
// earlier run's rows), `scoping: owner`. Bob only ever reads, so his views stay empty.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "./sdk.mjs";
import { HI, OWN_SERVER_SKIP, contents, marker, startOwnServer } from "./helpers.mjs";

const YEARLY = "0 0 1 1 *";

/** The SDK error `promise` rejects with (an HTTPError: status, text). */
async function errorOf(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail("the request succeeded");
}
const statusOf = async (promise) => (await errorOf(promise)).status;

/**
 * `runs.wait` of `echo` on HI, bounded: in start mode this server shares the database
 * with run.sh's server, and a wait whose run another instance executed has been seen
 * never to answer; this says so instead of hanging to the test timeout.
 */
async function waitEcho(client, threadId, timeoutMs = 20_000) {
  const LATE = Symbol("late");
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(resolve, timeoutMs, LATE);
  });
  try {
    const answer = await Promise.race([client.runs.wait(threadId, "echo", { input: HI }), late]);
    if (answer !== LATE) return answer;
  } finally {
    clearTimeout(timer);
  }
  const runs = (await client.runs.list(threadId)).map((r) => [r.run_id, r.status]);
  assert.fail(`runs.wait gave no answer within ${timeoutMs} ms; the thread's runs: ${JSON.stringify(runs)}`);
}

// Each test is marked skipped (and counted so) when no server can be started.
const it = (name, fn) => test(name, { skip: OWN_SERVER_SKIP }, fn);

describe("auth: API keys with owner scoping", () => {
  const m = marker();
  const ids = { alice: `alice-${m}`, bob: `bob-${m}` };
  const keys = { alice: `alice-key-${marker()}`, bob: `bob-key-${marker()}` };
  let server;
  let alice;
  let bob;
  const made = {};

  before(async () => {
    if (OWN_SERVER_SKIP) return;
    server = await startOwnServer({
      auth: { api_keys: { [ids.alice]: keys.alice, [ids.bob]: keys.bob }, scoping: "owner" },
    });
    alice = new Client({ apiUrl: server.url, apiKey: keys.alice });
    bob = new Client({ apiUrl: server.url, apiKey: keys.bob });
    made.thread = await alice.threads.create({ metadata: { e2e: m } });
    assert.deepEqual(contents(await waitEcho(alice, made.thread.thread_id)), ["hi", "echo: hi"]);
    made.assistant = await alice.assistants.create({ graphId: "echo", name: `alice-${m}` });
    made.cron = await alice.crons.create("echo", { schedule: YEARLY, input: HI });
    made.namespace = ["notes", m];
    await alice.store.putItem(made.namespace, "k", { by: "alice" });
  });

  after(async () => {
    await server?.stop();
  });

  it("a request without an API key, or with a wrong one, is 401", async () => {
    for (const apiKey of [null, `wrong-key-${marker()}`]) {
      const anonymous = new Client({ apiUrl: server.url, apiKey });
      const err = await errorOf(anonymous.threads.search());
      assert.equal(err.status, 401);
      const body = JSON.parse(err.text);
      assert.equal(body.status, 401);
      assert.ok(body.message);
    }
  });

  it("what alice makes carries her as owner", () => {
    // An API key's principal is `key:<name>`.
    for (const what of ["thread", "assistant", "cron"]) assert.equal(made[what].metadata.owner, `key:${ids.alice}`, what);
  });

  it("bob cannot see alice's threads or runs", async () => {
    const tid = made.thread.thread_id;
    assert.equal(await statusOf(bob.threads.get(tid)), 404);
    assert.equal(await statusOf(bob.runs.list(tid)), 404);
    assert.deepEqual(await bob.threads.search(), []);
    assert.equal(await bob.threads.count(), 0);

    assert.equal((await alice.threads.get(tid)).thread_id, tid);
    assert.deepEqual((await alice.threads.search({ limit: 100 })).map((t) => t.thread_id), [tid]);
    assert.equal((await alice.runs.list(tid)).length, 1);
  });

  it("bob sees only the system assistants; alice sees them and hers", async () => {
    const aid = made.assistant.assistant_id;
    assert.equal(await statusOf(bob.assistants.get(aid)), 404);
    const found = await bob.assistants.search({ limit: 100 });
    assert.ok(found.some((a) => a.graph_id === "echo"));
    assert.ok(found.every((a) => a.metadata.created_by === "system"), JSON.stringify(found));
    assert.equal((await bob.assistants.get("echo")).graph_id, "echo");

    const mine = await alice.assistants.search({ limit: 100 });
    assert.deepEqual(mine.map((a) => a.assistant_id).sort(), [aid, ...found.map((a) => a.assistant_id)].sort());
  });

  it("bob sees none of alice's crons", async () => {
    assert.deepEqual(await bob.crons.search(), []);
    assert.deepEqual((await alice.crons.search()).map((c) => c.cron_id), [made.cron.cron_id]);
  });

  it("each identity has its own store", async () => {
    assert.equal(await bob.store.getItem(made.namespace, "k"), null);
    assert.deepEqual((await bob.store.listNamespaces()).namespaces, []);
    assert.deepEqual((await bob.store.searchItems(["notes"])).items, []);

    assert.deepEqual((await alice.store.getItem(made.namespace, "k")).value, { by: "alice" });
    // Namespaces come back as written, without the identity's hidden prefix.
    assert.deepEqual((await alice.store.listNamespaces()).namespaces, [made.namespace]);
  });
});
