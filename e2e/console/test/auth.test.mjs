// The console against a server with auth.api_keys and owner scoping: the assets load
// without a key, data requests show the server's 401 until a key is given in the
// key box, and each key sees only its own threads, runs, crons and store items.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { SERVER_BIN, api, launch, shot, startServer, watchedPage } from "./helpers.mjs";

const ALICE = "alice-console-key-0123456789";
const BOB = "bob-console-key-0123456789ab";
const skip = SERVER_BIN ? false : "needs E2E_SERVER_BIN to start a server with auth on";

let server;
let browser;
let page;
let errors;
const mine = {};

/** Refused loads before a key is given are the point of the first test. */
const expected = (text) => text.includes("status of 401");

async function seed(key, who) {
  const thread = await api(server.url, "POST", "/threads", {}, key);
  const run = await api(server.url, "POST", `/threads/${thread.thread_id}/runs/wait`, {
    assistant_id: "echo",
    input: { messages: [{ type: "human", content: `hi from ${who}` }] },
  }, key);
  await api(server.url, "PUT", "/store/items", { namespace: ["notes"], key: `${who}-note`, value: { owner: who } }, key);
  const cron = await api(server.url, "POST", "/runs/crons", { assistant_id: "echo", schedule: "0 9 * * *", input: { who } }, key);
  const [latest] = await api(server.url, "GET", `/threads/${thread.thread_id}/runs`, undefined, key);
  mine[who] = { thread: thread.thread_id, run: latest.run_id, cron: cron.cron_id, values: run };
}

async function useKey(key) {
  await page.fill("#api-key", key);
  await page.click("form.server button[type=submit]");
}

async function visit(route) {
  const url = `${server.url}/console/#/${route}`;
  if (page.url() === url) await page.reload();
  else await page.goto(url);
}

before(async () => {
  if (skip) return;
  server = await startServer({ auth: { api_keys: { alice: ALICE, bob: BOB }, scoping: "owner" } });
  await seed(ALICE, "alice");
  await seed(BOB, "bob");
  browser = await launch();
  ({ page, errors } = await watchedPage(browser.context, expected));
});

after(async () => {
  await browser?.close();
  await server?.stop();
  if (errors) assert.deepEqual(errors, [], "the browser logged errors");
});

test("without a key the console loads and shows the server's 401 message", { skip }, async () => {
  await visit("threads");
  await page.locator("main [role=alert]", { hasText: /^401: / }).waitFor();
  await shot(page, "auth-key-needed");
});

test("each key sees only its own threads, runs, crons and store items", { skip }, async () => {
  for (const [key, who, other] of [[ALICE, "alice", "bob"], [BOB, "bob", "alice"]]) {
    await visit("threads");
    await useKey(key);
    // The list drawn with this key (the one before used the other key).
    await page.getByRole("link", { name: mine[who].thread.slice(-8) }).waitFor();
    assert.equal(await page.locator("main tbody tr").count(), 1, `${who} sees one thread`);
    assert.equal(await page.getByRole("link", { name: mine[other].thread.slice(-8) }).count(), 0);

    await visit("runs");
    await page.getByRole("link", { name: mine[who].run.slice(-8) }).waitFor();
    assert.equal(await page.locator("main tbody tr").count(), 1, `${who} sees one run`);

    await visit("crons");
    await page.getByRole("cell", { name: mine[who].cron.slice(-8) }).waitFor();
    assert.equal(await page.locator("main tbody tr").count(), 1, `${who} sees one cron`);

    await visit("store");
    await page.fill("#store-prefix", "notes");
    await page.click("#store-search button[type=submit]");
    await page.locator("#store-results tbody tr").first().waitFor();
    const keys = await page.locator("#store-results tbody tr td:nth-child(2)").allTextContents();
    assert.deepEqual(keys, [`${who}-note`]);
  }
});
