// The Node side of the graph bridge: one worker process of service-server.
//
// The server starts it (boot.mjs) in the directory of the config file and talks to it
// over stdin and stdout, one JSON message per line: the same versioned protocol as the
// Python side (docs/python-graphs.md, "The worker protocol"; docs/js-graphs.md).
// Whatever the graphs print goes to stderr, which the server logs.

import { createInterface } from "node:readline";

import { adapter, loadStoreAdapter } from "./adapter.mjs";
import { isTypeScript, langgraphVersion, loadGraph, useLangGraph } from "./graphs.mjs";
import { answer, REQUEST, runError, send } from "./protocol.mjs";
import { OPS } from "./runs.mjs";
import { passListNamespacesThrough } from "./store.mjs";

const PROTOCOL = 1;
const REQUESTS = { ...OPS, adapter };

const running = new Map();

async function handle(request) {
  const controller = new AbortController();
  running.set(request.id, controller);
  try {
    const op = REQUESTS[request.op];
    if (!op) throw new Error(`unknown request ${request.op}`);
    const result = await REQUEST.run(request.id, () => op(request, controller.signal));
    send({ id: request.id, ok: result ?? null });
  } catch (error) {
    // Every failure goes back to the server as a RunError.
    if (controller.signal.aborted) send({ id: request.id, cancelled: true });
    else send({ id: request.id, err: runError(error) });
  } finally {
    running.delete(request.id);
  }
}

function serve() {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (!line) return;
    const msg = JSON.parse(line);
    if ("reply" in msg) answer(msg);
    else if (msg.op === "cancel") running.get(msg.id)?.abort();
    else handle(msg);
  });
  // The server is gone (stdin closed): exit now, whatever is still running.
  lines.on("close", () => process.exit(0));
}

/** Loads the graphs and the store adapter, says hello and serves. `project` imports a
 * package of the user's project (boot.mjs). */
export async function main(project) {
  const spec = JSON.parse(process.env.SERVICE_BRIDGE_SPEC);
  delete process.env.SERVICE_BRIDGE_SPEC;
  const hello = { protocol: PROTOCOL, node: process.versions.node, graphs: {} };
  const base = spec.base;
  try {
    hello.langgraph = langgraphVersion(base);
    const lg = await project("@langchain/langgraph");
    useLangGraph(lg, await project("@langchain/langgraph-checkpoint"));
    passListNamespacesThrough(lg);
  } catch (error) {
    // Reported to the server, which refuses to boot.
    hello.langgraph_error = `${error.name}: ${error.message}`;
    send({ hello });
    return;
  }
  let loader;
  if ([...Object.values(spec.graphs), spec.store_adapter ?? ""].some(isTypeScript)) {
    try {
      (await project("tsx/esm/api")).register();
    } catch (error) {
      loader = new Error(`TypeScript files need tsx in the project (npm install -D tsx): ${error.message}`, { cause: error });
    }
  }
  if (spec.store_adapter) {
    try {
      if (loader && isTypeScript(spec.store_adapter)) throw loader;
      await loadStoreAdapter(spec.store_adapter, base);
    } catch (error) {
      // Reported to the server, which refuses to boot.
      hello.store_adapter_error = runError(error);
      send({ hello });
      return;
    }
    hello.store_adapter = { supports_ttl: false, sweeps: false };
  }
  for (const [graphId, target] of Object.entries(spec.graphs)) {
    try {
      if (loader && isTypeScript(target)) throw loader;
      await loadGraph(graphId, target, base);
      hello.graphs[graphId] = { ok: true };
    } catch (error) {
      hello.graphs[graphId] = { ok: false, error: runError(error) };
    }
  }
  send({ hello });
  serve();
}
