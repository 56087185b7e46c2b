// The console's rules that need no browser, read from its own modules: what free
// text resumes with, how a webhook is redacted, how a cron's next run reads, when the
// playground offers chat, and what time travel's difference lists.
import assert from "node:assert/strict";
import { test } from "node:test";
import { resumeValue } from "../../../console/js/views/interrupts.js";
import { redactWebhook } from "../../../console/js/views/runs.js";
import { isFiveFields, nextText } from "../../../console/js/views/crons.js";
import { hasMessages } from "../../../console/js/views/playground.js";
import { diff } from "../../../console/js/views/timetravel.js";
import { parseNamespace } from "../../../console/js/views/store.js";
import { CAPS } from "../../../console/js/api.js";
import { pushCapped } from "../../../console/js/ui.js";

test("free text resumes with its JSON when it parses, else with the text", () => {
  assert.equal(resumeValue("true"), true);
  assert.deepEqual(resumeValue('{"ok": 1}'), { ok: 1 });
  assert.equal(resumeValue("ship it"), "ship it");
  assert.equal(resumeValue('"quoted"'), "quoted");
});

test("a webhook shows only its host and whether it has a path", () => {
  assert.equal(redactWebhook("https://hooks.example.com/t/secret-token?sig=1"), "hooks.example.com (with a path)");
  assert.equal(redactWebhook("https://user:pw@example.com:8443/"), "example.com:8443");
  assert.equal(redactWebhook("not a url"), "(not a URL)");
  // A channel reply shows its channel only: never the conversation or the MAC.
  assert.equal(redactWebhook("channel://slack-main/C123/1700.1?mac=abc"), "channel slack-main");
});

test("a cron reads paused, no upcoming run, or its next run relative to now", () => {
  const soon = new Date(Date.now() + 5 * 60_000 + 500).toISOString();
  const past = new Date(Date.now() - 2 * 3600_000).toISOString();
  assert.equal(nextText({ enabled: false, next_run_date: soon }), "paused");
  assert.equal(nextText({ enabled: true, next_run_date: null }), "no upcoming run");
  assert.equal(nextText({ enabled: true, next_run_date: soon }), "in 5 minutes");
  assert.equal(nextText({ enabled: true, next_run_date: past }), "2 hours ago");
  assert.ok(isFiveFields("*/5 * * * *"));
  assert.ok(!isFiveFields("* * * * * *"));
});

test("chat is offered only when the input schema has messages", () => {
  assert.ok(hasMessages({ input_schema: { properties: { messages: { type: "array" } } } }));
  assert.ok(!hasMessages({ input_schema: { properties: { n: { type: "integer" } } } }));
  assert.ok(!hasMessages({ input_schema: null }));
  assert.ok(!hasMessages(null));
});

test("the difference between two checkpoints lists changed, added and removed paths", () => {
  assert.deepEqual(diff({ a: 1, b: { c: 2, d: 3 } }, { a: 1, b: { c: 4 }, e: [1] }), [
    { path: "b.c", kind: "changed", before: 2, after: 4 },
    { path: "b.d", kind: "removed", before: 3, after: undefined },
    { path: "e", kind: "added", before: undefined, after: [1] },
  ]);
  assert.deepEqual(diff({ log: [1] }, { log: [1] }), []);
});

test("a namespace is typed with slashes or dots", () => {
  assert.deepEqual(parseNamespace("users/u1"), ["users", "u1"]);
  assert.deepEqual(parseNamespace(" notes.alice "), ["notes", "alice"]);
  assert.deepEqual(parseNamespace(""), []);
});

test("a run's tail keeps the latest 500 frames, and the lists keep SPEC's caps", () => {
  const frames = [];
  for (let i = 1; i <= 600; i++) pushCapped(frames, i, CAPS.frames);
  assert.equal(frames.length, 500);
  assert.equal(frames[0], 101);
  assert.equal(frames.at(-1), 600);
  assert.deepEqual(
    { threads: CAPS.threads, runs: CAPS.runs, checkpoints: CAPS.checkpoints, assistants: CAPS.assistants, crons: CAPS.crons },
    { threads: 50, runs: 50, checkpoints: 20, assistants: 100, crons: 100 },
  );
});
