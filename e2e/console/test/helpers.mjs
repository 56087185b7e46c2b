// Shared helpers of the console's browser suite: Debian's chromium driven by
// playwright-core (never a downloaded browser), servers started from the binary.
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const BASE_URL = (process.env.E2E_BASE_URL ?? "http://127.0.0.1:8123").replace(/\/$/, "");
export const SERVER_BIN = process.env.E2E_SERVER_BIN ?? "";
export const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
/** Where the screenshots of every view go (committed, shown in the README). */
export const SHOTS = process.env.CONSOLE_SCREENSHOTS ?? join(dirname(fileURLToPath(import.meta.url)), "../../../docs/console");

/** A fresh browser profile; `close()` removes it. */
export async function launch() {
  const profile = await mkdtemp(join(tmpdir(), "console-e2e-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1280, height: 860 },
    colorScheme: "light",
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** A page whose console errors and uncaught exceptions are collected in `errors`.
 *  `expected(message)` names the failed loads a test provokes on purpose. */
export async function watchedPage(context, expected = () => false) {
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(`uncaught: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    const text = `${message.text()} (${message.location().url})`;
    if (!expected(text)) errors.push(text);
  });
  return { page, errors };
}

export async function shot(page, name) {
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

/** One JSON call to `base` as the SDKs make it. */
export async function api(base, method, path, body, key) {
  const headers = { "content-type": "application/json" };
  if (key) headers["x-api-key"] = key;
  const response = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Polls `check` until it returns a truthy value (10 s). */
export async function eventually(check, what) {
  const deadline = Date.now() + 10_000;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await check();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: never happened (last: ${last})`);
}

/** `$E2E_SERVER_BIN dev --port 0 --config <config>`, ready; returns { url, stop }. */
export async function startServer(config, env = {}) {
  const dir = await mkdtemp(join(tmpdir(), "console-e2e-server-"));
  const path = join(dir, "config.json");
  await writeFile(path, JSON.stringify(config));
  const child = spawn(SERVER_BIN, ["dev", "--port", "0", "--config", path], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  const keep = (chunk) => (log = (log + chunk).slice(-20_000));
  child.stdout.setEncoding("utf8").on("data", keep);
  child.stderr.setEncoding("utf8").on("data", keep);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited during startup:\n${log}`);
    const url = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/)?.[1];
    if (url && (await fetch(`${url}/ok`).then((r) => r.ok, () => false))) return { url, stop };
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  throw new Error(`server did not start within 30 s:\n${log}`);
}
