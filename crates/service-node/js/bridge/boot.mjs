// What the server runs with `node --input-type=module -e`, in the config file's
// directory: it writes the bridge's modules (SERVICE_BRIDGE_MODULES, file name →
// source, shipped inside the binary) into a fresh private directory, imports them,
// removes the directory and starts the worker (main.mjs).
//
// Imports in this program resolve from the working directory, so the user's packages
// (@langchain/langgraph, tsx) come from the project's node_modules; the modules in the
// temporary directory would resolve them from there, so they import those through
// `project`, defined here.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const modules = JSON.parse(process.env.SERVICE_BRIDGE_MODULES);
delete process.env.SERVICE_BRIDGE_MODULES;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "service-node-bridge-"));
let main;
try {
  for (const [name, source] of Object.entries(modules)) fs.writeFileSync(path.join(dir, name), source);
  ({ main } = await import(pathToFileURL(path.join(dir, "main.mjs")).href));
} finally {
  // The modules import one another statically: once main.mjs is loaded, all are.
  fs.rmSync(dir, { recursive: true, force: true });
}
await main((specifier) => import(specifier));
