// Run-completion webhooks through the JS SDK: a run's `webhook` reaches a real
// receiver that checks the signature with node's own crypto (independently of the
// server's code) and answers 2xx only after recording the delivery. run.sh starts
// the server with SERVICE_WEBHOOK_SECRET=E2E_WEBHOOK_SECRET.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { HI, REFERENCE, eventually, makeClient } from "./helpers.mjs";

const SECRET = process.env.E2E_WEBHOOK_SECRET ?? "e2e-webhook-secret";
const TOLERANCE_SECONDS = 300;
const { client } = makeClient();

/** The recipe of docs/webhooks.md: `t=<unix>,v1=<hex>` over `<t>.` + raw body. */
function verify(header, rawBody, secrets) {
  if (!header) return false;
  const parts = Object.fromEntries(header.split(",").map((part) => part.split("=", 2)));
  const timestamp = Number.parseInt(parts.t, 10);
  if (!Number.isFinite(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > TOLERANCE_SECONDS) return false;
  const given = Buffer.from(parts.v1 ?? "", "hex");
  return secrets.some((secret) => {
    const expected = createHmac("sha256", secret).update(`${timestamp}.`).update(rawBody).digest();
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

async function startReceiver() {
  const deliveries = [];
  const server = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const raw = Buffer.concat(chunks);
      const signed = verify(request.headers["x-service-signature"], raw, [SECRET]);
      // Recorded before answering: a 2xx means the work is durable.
      deliveries.push({
        id: request.headers["x-service-delivery-id"],
        attempt: request.headers["x-service-attempt"],
        signed,
        body: JSON.parse(raw.toString("utf8")),
      });
      response.writeHead(signed ? 204 : 500).end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/hook`, deliveries, close: () => server.close() };
}

test("a run's webhook reaches the receiver, signed", { skip: REFERENCE && "the reference server blocks loopback webhooks" }, async () => {
  const receiver = await startReceiver();
  try {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "echo", { input: HI, webhook: receiver.url });
    const [delivery] = await eventually(async () => receiver.deliveries, (got) => got.length >= 1);
    assert.ok(delivery.signed, "the signature verifies with node's crypto");
    assert.equal(delivery.attempt, "1");
    assert.equal(delivery.body.run_id, run.run_id);
    assert.equal(delivery.body.status, "success");
    assert.equal(delivery.body.values.messages.at(-1).content, "echo: hi");
    assert.ok(delivery.body.webhook_sent_at && delivery.body.run_ended_at);
  } finally {
    receiver.close();
  }
});
