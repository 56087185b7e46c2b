// Shared helpers for the JS end-to-end suite (node:test).
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "./sdk.mjs";

export const BASE_URL = (process.env.E2E_BASE_URL ?? "http://127.0.0.1:8130").replace(/\/$/, "");
export const REFERENCE = !["", "0", "false"].includes(process.env.E2E_REFERENCE ?? "");

// How run.sh started the server; tests that need a server with their own
// configuration start one the same way (start mode passes DATABASE_URL through).
export const SERVER_BIN = process.env.E2E_SERVER_BIN ?? "";
export const SERVER_MODE = process.env.E2E_SERVER_MODE ?? "dev";
/** Why a test needing its own server cannot run, or false when it can. */
export const OWN_SERVER_SKIP = SERVER_BIN
  ? false
  : "needs a server of its own: set E2E_SERVER_BIN (this run is against an already-running server)";

/**
 * Start `$E2E_SERVER_BIN $E2E_SERVER_MODE --port 0 --config <config>` with `config`
 * (an object) written to a temporary directory; wait until its log names the port
 * and GET /ok answers (30 s). Returns { url, stop }.
 */
export async function startOwnServer(config, { env = {} } = {}) {
  const dir = await mkdtemp(join(tmpdir(), "e2e-own-server-"));
  const configPath = join(dir, "config.json");
  await writeFile(configPath, JSON.stringify(config));
  const child = spawn(SERVER_BIN, [SERVER_MODE, "--port", "0", "--config", configPath], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  // The pipes are always drained (dev mode logs every request); the log is kept short.
  const keep = (chunk) => {
    log = (log + chunk).slice(-20_000);
  };
  child.stdout.setEncoding("utf8").on("data", keep);
  child.stderr.setEncoding("utf8").on("data", keep);
  let spawnError = null;
  child.once("error", (err) => (spawnError = err)); // e.g. E2E_SERVER_BIN does not exist
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (!spawnError && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  try {
    while (Date.now() < deadline) {
      if (spawnError) throw new Error(`cannot start ${SERVER_BIN}: ${spawnError.message}`);
      if (child.exitCode !== null) throw new Error(`server exited during startup (${child.exitCode}):\n${log}`);
      const url = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/)?.[1];
      if (url && (await fetch(`${url}/ok`).then((r) => r.ok, () => false))) return { url, stop };
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`server not ready within 30 s:\n${log}`);
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A client that records every request URL it sends (to check query encodings). */
export function makeClient() {
  const requests = [];
  const client = new Client({
    apiUrl: BASE_URL,
    apiKey: null,
    onRequest: (url, init) => {
      requests.push({ url: new URL(url), method: init.method ?? "GET" });
      return init;
    },
  });
  return { client, requests };
}

export const marker = () => randomUUID().replaceAll("-", "");

/**
 * Assertions that hold on our server (SPEC.md) but not on the reference server.
 * With E2E_REFERENCE=1 a failure inside marks the test skipped with the reason
 * instead of failing it; otherwise it is a plain assertion.
 */
export async function specOnly(t, reason, fn) {
  try {
    await fn();
  } catch (err) {
    if (REFERENCE) {
      t.skip(`SPEC departure: ${reason} (${err?.message ?? err})`.slice(0, 300));
      return;
    }
    throw err;
  }
}

/** Poll `fetch` until `predicate` holds (bounded, default 10 s). */
export async function eventually(fetch, predicate, timeoutMs = 10_000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fetch();
    if (predicate(value)) return value;
    if (Date.now() > deadline) {
      throw new Error(`condition not met within ${timeoutMs} ms; last value: ${JSON.stringify(value)}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Read a finite SSE stream to its end, dropping the decoder's empty heartbeat
 * items. A stream that never ends is cut by the runner's --test-timeout.
 */
export async function collect(stream) {
  const parts = [];
  for await (const part of stream) {
    if (part.event) parts.push(part);
  }
  return parts;
}

export const TERMINAL = new Set(["success", "error", "cancelled", "interrupted", "timeout"]);

export function waitRun(client, threadId, runId) {
  return eventually(() => client.runs.get(threadId, runId), (r) => TERMINAL.has(r.status));
}

export const HI = { messages: [{ type: "human", content: "hi" }] };
export const contents = (values) => values.messages.map((m) => m.content);
