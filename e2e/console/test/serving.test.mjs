// SPEC console items 1–2 on the live binary: the bare mount redirects to the slashed
// form, the page and its files are served with their cache rules, and any other path
// under the mount is a miss, never the page.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BASE_URL } from "./helpers.mjs";

const fetchRaw = (path, init = {}) => fetch(BASE_URL + path, { redirect: "manual", ...init });

test("the bare mount redirects 302 to the slashed form, keeping the query", async () => {
  const response = await fetchRaw("/console?baseUrl=http%3A%2F%2Fexample.com");
  assert.equal(response.status, 302);
  assert.equal(response.headers.get("location"), "/console/?baseUrl=http%3A%2F%2Fexample.com");
});

test("the page is never cached and its files are, under a content hash", async () => {
  const page = await fetchRaw("/console/");
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("cache-control"), "no-cache");
  const html = await page.text();
  const script = html.match(/src="\.\/([0-9a-f]{12}\/js\/main\.js)"/)?.[1];
  assert.ok(script, "the page names its script under a hash folder");
  const asset = await fetchRaw(`/console/${script}`, { headers: { "accept-encoding": "gzip" } });
  assert.equal(asset.status, 200);
  assert.match(asset.headers.get("cache-control"), /immutable/);
  assert.match(asset.headers.get("content-type"), /^text\/javascript/);
  const head = await fetchRaw("/console/", { method: "HEAD" });
  assert.equal(head.status, 200);
});

test("an unknown path under the mount is a miss, not the page", async () => {
  for (const path of ["/console/threads", "/console/index.html", "/console/js/main.js", "/console/0123456789ab/js/main.js"]) {
    const response = await fetchRaw(path);
    assert.equal(response.status, 404, path);
    assert.doesNotMatch(await response.text(), /<html/i, path);
  }
  const post = await fetchRaw("/console/", { method: "POST" });
  assert.equal(post.status, 405, "GET and HEAD only");
});
