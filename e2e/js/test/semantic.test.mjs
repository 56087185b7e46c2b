// Store semantic search (SPEC "Store", `store.index`) through the JS SDK: a server of
// its own whose index embeds with a fake OpenAI-compatible endpoint on 127.0.0.1
// (words hashed into 64 buckets, answered in base64 as OpenAI does).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Client } from "./sdk.mjs";
import { OWN_SERVER_SKIP, SERVER_MODE, marker, startOwnServer } from "./helpers.mjs";

const DIMS = 64;

/** Each word (lowercased) adds one to the bucket of its FNV-1a hash. */
function vector(text) {
  const buckets = new Float32Array(DIMS);
  for (const word of text.toLowerCase().match(/[0-9a-z]+/g) ?? []) {
    let hash = 0xcbf29ce484222325n;
    for (const byte of Buffer.from(word)) {
      hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) % 2n ** 64n;
    }
    buckets[Number(hash % BigInt(DIMS))] += 1;
  }
  if (buckets.every((x) => x === 0)) buckets[DIMS - 1] = 1;
  return buckets;
}

const PGVECTOR = process.env.PGVECTOR_TEST_URL ?? "";
const SKIP =
  OWN_SERVER_SKIP ||
  (SERVER_MODE === "start" && !PGVECTOR ? "start mode needs PostgreSQL with pgvector: set PGVECTOR_TEST_URL" : false);

describe("store semantic search", { skip: SKIP }, () => {
  let embeddings;
  let server;
  let client;
  before(async () => {
    embeddings = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        const { input, model } = JSON.parse(body);
        const data = input.map((text, index) => ({
          object: "embedding",
          index,
          embedding: Buffer.from(vector(text).buffer).toString("base64"),
        }));
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ object: "list", data, model }));
      });
    });
    await new Promise((resolve) => embeddings.listen(0, "127.0.0.1", resolve));
    const env = {
      OPENAI_BASE_URL: `http://127.0.0.1:${embeddings.address().port}/v1`,
      OPENAI_API_KEY: "sk-e2e",
    };
    if (SERVER_MODE === "start") env.DATABASE_URL = PGVECTOR;
    const config = { store: { index: { embed: "openai:fake-embedder", dims: DIMS, fields: ["text"] } } };
    server = await startOwnServer(config, { env });
    client = new Client({ apiUrl: server.url });
  });
  after(async () => {
    await server?.stop();
    embeddings?.close();
  });

  test("searchItems with a query ranks by cosine similarity, unindexed items last", async () => {
    const ns = ["e2e", marker()];
    await client.store.putItem(ns, "mat", { text: "the cat sat on the mat" });
    await client.store.putItem(ns, "stocks", { text: "stock prices fell" });
    await client.store.putItem(ns, "skip", { text: "the cat sat on the mat" }, { index: false });
    const { items } = await client.store.searchItems(ns, { query: "the cat on the mat", limit: 10 });
    assert.deepEqual(items.map((item) => item.key), ["mat", "stocks", "skip"]);
    assert.ok(items[0].score > items[1].score, JSON.stringify(items));
    assert.equal(items[2].score, null);
    const plain = await client.store.searchItems(ns, { limit: 10 });
    assert.ok(plain.items.every((item) => item.score === null || item.score === undefined));
  });

  test("a query with a filter ranks only what the filter leaves", async () => {
    const ns = ["e2e", marker()];
    await client.store.putItem(ns, "pet", { text: "cat", kind: "pet" });
    await client.store.putItem(ns, "wild", { text: "cat", kind: "wild" });
    const { items } = await client.store.searchItems(ns, { query: "cat", filter: { kind: "pet" } });
    assert.deepEqual(items.map((item) => item.key), ["pet"]);
    assert.ok(Math.abs(items[0].score - 1) < 1e-6);
  });
});
