// The console's ten views in a real browser against a live dev server with seeded
// data: each view renders its data, and the actions a user takes from them (chat,
// stream, stop, approve, fork and run, create and pause a cron, search the store)
// reach the server. Screenshots of every view go to docs/console/.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { BASE_URL, api, eventually, launch, shot, watchedPage } from "./helpers.mjs";

const post = (path, body) => api(BASE_URL, "POST", path, body);
const get = (path) => api(BASE_URL, "GET", path);
const CONSOLE = `${BASE_URL}/console/`;

let browser;
let page;
let errors;
const seeded = {};

/** Opens a view afresh (the same hash again would not render it anew). */
async function visit(route) {
  const url = `${CONSOLE}#/${route}`;
  if (page.url() === url) await page.reload();
  else await page.goto(url);
  await page.locator("main .loading").first().waitFor({ state: "detached" }).catch(() => {});
}

/** Picks an assistant in the playground and waits until its schemas are read. */
async function pick(name) {
  await page.selectOption("#pg-assistant", { label: name });
  await page.locator("#pg-send:enabled").waitFor();
}

async function threadOf(graph, input) {
  const thread = await post("/threads", {});
  await post(`/threads/${thread.thread_id}/runs/wait`, { assistant_id: graph, input });
  return thread.thread_id;
}

before(async () => {
  seeded.echo = await threadOf("echo", { messages: [{ type: "human", content: "seeded" }] });
  seeded.approval = await threadOf("approval", { topic: "launch" });
  seeded.rejected = await threadOf("approval", { topic: "rollback" });
  seeded.fail = await threadOf("fail", {});
  seeded.steps = await threadOf("steps", { n: 2 });
  await api(BASE_URL, "PUT", "/store/items", { namespace: ["notes", "alice"], key: "milk", value: { kind: "note", text: "buy milk" } });
  await api(BASE_URL, "PUT", "/store/items", { namespace: ["notes", "alice"], key: "call", value: { kind: "todo", text: "call bob" } });
  browser = await launch();
  ({ page, errors } = await watchedPage(browser.context));
});

after(async () => {
  await browser?.close();
  assert.deepEqual(errors, [], "the browser logged errors");
});

test("the playground offers chat for a graph whose input has messages, and streams an echo run", async () => {
  await visit("playground");
  await pick("echo");
  await page.getByText("Message", { exact: true }).waitFor();
  await page.fill("#pg-input", "hello console");
  await page.click("#pg-send");
  await page.locator(".msg-ai", { hasText: "echo: hello console" }).waitFor();
  await page.locator("#pg-run + .badge", { hasText: "success" }).waitFor();
  assert.ok((await page.locator("#pg-frames .mode-values").count()) >= 1);
  const href = await page.locator("#pg-thread a").getAttribute("href");
  const thread = await get(`/threads/${href.split("/").pop()}`);
  assert.equal(thread.metadata.source, "console", "the playground marks the thread it creates");
  await shot(page, "playground");
});

test("the playground sends JSON input to a graph without messages and shows custom frames", async () => {
  await visit("playground");
  await pick("steps");
  await page.getByText("Input (JSON)", { exact: true }).waitFor();
  await page.fill("#pg-input", '{"n": 3}');
  await page.click("#pg-send");
  await page.locator("#pg-run + .badge", { hasText: "success" }).waitFor();
  assert.equal(await page.locator("#pg-frames .mode-custom").count(), 3);
  await page.selectOption("#pg-filter", "custom");
  assert.equal(await page.locator("#pg-frames .frame").count(), 3, "the mode filter shows custom frames only");
});

test("stop cancels a slow run", async () => {
  await visit("playground");
  await pick("slow");
  await page.fill("#pg-input", '{"delay_ms": 30000}');
  await page.click("#pg-send");
  await page.locator("#pg-frames .mode-metadata").waitFor();
  await page.click("#pg-stop");
  await page.locator("#pg-run + .badge", { hasText: "cancelled" }).waitFor();
  const [threadId, runId] = (await page.locator("#pg-run").getAttribute("href")).split("/").slice(-2);
  assert.equal((await get(`/threads/${threadId}/runs/${runId}`)).status, "cancelled");
});

test("the overview counts threads by status and lists recent runs", async () => {
  await visit("overview");
  const total = await post("/threads/count", {});
  await page.locator(".tile", { hasText: "all" }).locator(".tile-n", { hasText: String(total) }).waitFor();
  const interrupted = await post("/threads/count", { status: "interrupted" });
  await page.locator('a.tile[href="#/threads?status=interrupted"] .tile-n', { hasText: String(interrupted) }).waitFor();
  await page.locator("#queue-depth").waitFor();
  assert.ok((await page.locator("section", { hasText: "Recent runs" }).locator("tbody tr").count()) >= 4);
  await shot(page, "overview");
});

test("an assistant shows its graph as a diagram, its versions and its schemas", async () => {
  await visit("assistants");
  await page.getByRole("link", { name: "approval", exact: true }).click();
  await page.locator("#assistant-graph svg .diagram-node").first().waitFor();
  const nodes = await page.locator("#assistant-graph svg .diagram-node text").allTextContents();
  for (const node of ["start", "draft", "review", "end"]) assert.ok(nodes.includes(node), `${node} in ${nodes}`);
  await page.getByText("1 (active)").waitFor();
  await page.getByRole("heading", { name: "input schema" }).waitFor();
  await shot(page, "assistants");
});

test("the threads' status filter lives in the hash and survives a reload", async () => {
  await visit("threads");
  await page.selectOption("#thread-status", "interrupted");
  await page.waitForURL(/#\/threads\?status=interrupted$/);
  await page.reload();
  await page.locator("main tbody tr").first().waitFor();
  assert.equal(await page.inputValue("#thread-status"), "interrupted");
  const statuses = await page.locator("main tbody .badge").allTextContents();
  assert.ok(statuses.length >= 1 && statuses.every((s) => s === "interrupted"), `${statuses}`);
  await page.goto(`${CONSOLE}#/threads?status=bogus`);
  await page.locator("main tbody tr").first().waitFor();
  assert.equal(await page.inputValue("#thread-status"), "all", "an unknown status means all");
  await visit(`threads/${seeded.steps}`);
  await page.locator("#thread-values .json-key", { hasText: "count" }).waitFor();
  await shot(page, "threads");
});

test("a failed run shows its error with the cause chain, and an active run is tailed live", async () => {
  const [run] = await get(`/threads/${seeded.fail}/runs`);
  await visit(`runs/${seeded.fail}/${run.run_id}`);
  await page.locator("#run-error li", { hasText: "boom" }).waitFor();
  await page.locator("#run-error li", { hasText: "root cause" }).waitFor();
  await shot(page, "runs");
  const thread = await post("/threads", {});
  const slow = await post(`/threads/${thread.thread_id}/runs`, { assistant_id: "slow", input: { delay_ms: 1500 }, stream_mode: ["values", "updates"] });
  await visit(`runs/${thread.thread_id}/${slow.run_id}`);
  await page.getByText("The run has ended; reload to see its final status.").waitFor({ timeout: 15_000 });
  assert.ok((await page.locator("#run-tail .frame").count()) >= 1, "the tail showed the run's frames");
  const settled = () => get(`/threads/${thread.thread_id}/runs/${slow.run_id}`).then((r) => r.status === "success");
  await eventually(settled, "the watched run succeeds (watching does not cancel it)");
  await visit("runs");
  await page.locator("main tbody tr").first().waitFor();
});

test("the channels view says when the server has no channel routes", async () => {
  await visit("channels");
  await page.getByText("No channel routes are configured").waitFor();
  await shot(page, "channels");
});

test("an approval interrupt is approved from the interrupts view", async () => {
  await visit("interrupts");
  const card = page.locator(`li.interrupt[data-thread="${seeded.approval}"]`);
  await card.getByText("approve?").waitFor();
  await shot(page, "interrupts");
  await card.getByRole("button", { name: "Approve" }).click();
  await card.getByText("Resumed: run").waitFor();
  await eventually(async () => (await get(`/threads/${seeded.approval}`)).values?.status === "approved", "the thread reaches approved");
  // Free text resumes with its JSON when it parses: `false` rejects like Reject.
  const other = page.locator(`li.interrupt[data-thread="${seeded.rejected}"]`);
  await other.getByRole("textbox", { name: "Free-text answer" }).fill("false");
  await other.getByRole("button", { name: "Send answer" }).click();
  await other.getByText("Resumed: run").waitFor();
  await eventually(async () => (await get(`/threads/${seeded.rejected}`)).values?.status === "rejected", "the thread reaches rejected");
});

test("time travel forks a checkpoint and runs from it", async () => {
  const before = await post(`/threads/${seeded.steps}/history`, { limit: 100 });
  const runsBefore = await get(`/threads/${seeded.steps}/runs`);
  await visit(`timetravel/${seeded.steps}`);
  await page.locator("#tt-diff").getByText("Difference").waitFor();
  const values = JSON.parse(await page.inputValue("#tt-values"));
  await page.fill("#tt-values", JSON.stringify({ ...values, n: 4 }));
  await shot(page, "timetravel");
  await page.getByRole("button", { name: "Fork", exact: true }).click();
  await page.getByText(/Forked: new checkpoint .*; nothing ran\./).waitFor();
  assert.equal((await get(`/threads/${seeded.steps}/runs`)).length, runsBefore.length, "a fork runs nothing");
  await page.getByRole("button", { name: "Fork and run" }).click();
  await page.locator(".tt-run").waitFor();
  const runId = (await page.locator(".tt-run").getAttribute("href")).split("/").pop();
  await eventually(async () => (await get(`/threads/${seeded.steps}/runs/${runId}`)).status === "success", "the forked run succeeds");
  const afterHistory = await post(`/threads/${seeded.steps}/history`, { limit: 100 });
  assert.ok(afterHistory.length > before.length, "the fork wrote a checkpoint");
  assert.ok(afterHistory.some((s) => s.metadata?.source === "update" || s.metadata?.source === "fork"), "a checkpoint written by the fork");
  assert.equal((await get(`/threads/${seeded.steps}/runs`)).length, runsBefore.length + 1);
});

test("a store search with a filter finds the item", async () => {
  await visit("store");
  await page.getByRole("button", { name: "notes/alice" }).waitFor();
  await page.fill("#store-prefix", "notes");
  await page.fill("#store-filter", '{"kind": "todo"}');
  await page.click("#store-search button[type=submit]");
  await page.locator("#store-results code", { hasText: "call" }).waitFor();
  assert.equal(await page.locator("#store-results tbody tr").count(), 1, "the filter left out the note");
  await shot(page, "store");
});

test("a cron is created and paused", async () => {
  await visit("crons");
  await page.selectOption("#cron-assistant", { label: "echo" });
  await page.fill("#cron-schedule", "*/5 * * * *");
  await page.fill("#cron-input", '{"messages": [{"type": "human", "content": "tick"}]}');
  await page.click("#cron-form button[type=submit]");
  await page.getByText(/Created cron .*, next in /).waitFor();
  const row = page.locator("main tbody tr", { hasText: "*/5 * * * *" });
  await row.getByText(/^in \d+ (minute|minutes|second|seconds)$/).waitFor();
  await row.getByRole("button", { name: "Pause" }).click();
  await row.locator(".badge", { hasText: "paused" }).waitFor();
  const [cron] = await post("/runs/crons/search", { limit: 10 });
  assert.equal(cron.enabled, false);
  await shot(page, "crons");
});

test("?baseUrl= points the console at a server and is remembered", async () => {
  const other = BASE_URL.replace("127.0.0.1", "localhost");
  await page.goto(`${CONSOLE}?baseUrl=${encodeURIComponent(other)}#/overview`);
  assert.equal(await page.inputValue("#base-url"), other);
  await page.goto(`${CONSOLE}#/threads`);
  assert.equal(await page.inputValue("#base-url"), other, "remembered without the parameter");
  await page.locator("main tbody tr").first().waitFor();
  await page.getByRole("button", { name: "Reset" }).click();
  await page.waitForFunction((base) => document.querySelector("#base-url")?.value === base, BASE_URL);
});

test("the views are reachable from the keyboard", async () => {
  await visit("playground");
  await page.locator("body").focus();
  for (let i = 0; i < 30; i++) {
    await page.keyboard.press("Tab");
    if ((await page.evaluate(() => document.activeElement?.textContent)) === "Crons") break;
  }
  await page.keyboard.press("Enter");
  await page.waitForURL(/#\/crons$/);
  await page.getByRole("heading", { name: "Crons" }).waitFor();
});

test("the console fits a phone and follows a dark system theme", async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  const views = ["playground", "assistants", "threads", `threads/${seeded.steps}`, "runs", "channels", "interrupts", `timetravel/${seeded.steps}`, "store", "crons", "overview"];
  for (const view of views) {
    await visit(view);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${view} is ${overflow}px wider than the phone`);
  }
  await shot(page, "phone");
  await page.setViewportSize({ width: 1280, height: 860 });
  await page.emulateMedia({ colorScheme: "dark" });
  await visit("overview");
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(background, "rgb(15, 18, 22)");
  await shot(page, "dark");
  await page.emulateMedia({ colorScheme: "light" });
});
