// The graphs this worker serves: loading langgraph.json's targets, giving a run a copy
// with the server's saver and store, and their JSON schemas.

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { saverClass } from "./saver.mjs";
import { storeClass } from "./store.mjs";

const TYPESCRIPT = [".ts", ".mts", ".cts", ".tsx"];

/** `@langchain/langgraph`'s version in the user's project, found as Node finds it. */
export function langgraphVersion(base) {
  for (let dir = base; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, "node_modules", "@langchain", "langgraph", "package.json");
    if (fs.existsSync(manifest)) return JSON.parse(fs.readFileSync(manifest, "utf8")).version;
    if (path.dirname(dir) === dir) return undefined;
  }
}

// The project's @langchain/langgraph, and the saver and store every run gets.
export let LG;
let SAVER;
let STORE;
const GRAPHS = new Map();

/** Serves graphs with `lg` (and `checkpoint`, its @langchain/langgraph-checkpoint). */
export function useLangGraph(lg, checkpoint) {
  LG = lg;
  SAVER = new (saverClass(lg, checkpoint))();
  STORE = new (storeClass(lg))();
}

/** Loads langgraph.json's `target` (relative to `base`) as `graphId`. */
export async function loadGraph(graphId, target, base) {
  GRAPHS.set(graphId, new Graph(graphId, await loadExport(target, base)));
}

/** The loaded graph of a request. */
export function served(graphId) {
  const graph = GRAPHS.get(graphId);
  if (!graph) throw new Error(`graph ${graphId} is not loaded in this worker`);
  return graph;
}

const isPregel = (value) =>
  value !== null && typeof value === "object" && typeof value.getState === "function" && typeof value.stream === "function";

/** One served graph: the user's export and how to get a runnable graph from it. */
class Graph {
  constructor(graphId, target) {
    this.graphId = graphId;
    this.target = target;
  }

  /** A copy of the graph with the server's saver (when the run has a thread) and store. */
  async compiled(config, { stateful = true } = {}) {
    let graph = this.target;
    if (!isPregel(graph) && typeof graph?.compile === "function") {
      graph = graph.compile();
    } else if (!isPregel(graph) && typeof graph === "function") {
      graph = await graph(config);
      if (!isPregel(graph) && typeof graph?.compile === "function") graph = graph.compile();
    }
    if (!isPregel(graph)) {
      throw new TypeError(`${this.graphId}: the export is not a graph, a StateGraph or a factory of one`);
    }
    // A shallow copy, so concurrent runs each see their own saver and store.
    const copy = Object.assign(Object.create(Object.getPrototypeOf(graph)), graph);
    copy.checkpointer = stateful ? SAVER : undefined;
    copy.store = STORE;
    return copy;
  }
}

/** A target's file and export: `./src/agent.ts:graph`, or the default export. */
function parseTarget(target) {
  const colon = target.lastIndexOf(":");
  return colon > 0 ? [target.slice(0, colon), target.slice(colon + 1)] : [target, "default"];
}

export const isTypeScript = (target) => TYPESCRIPT.some((ext) => parseTarget(target)[0].endsWith(ext));

/** The export `./path/file.ts:export` (relative to `base`) names. */
export async function loadExport(spec, base) {
  const [file, exported] = parseTarget(spec);
  if (!exported) throw new Error(`${JSON.stringify(spec)} must be './file.ts:export'`);
  const module = await import(pathToFileURL(path.resolve(base, file)).href);
  let target = module;
  for (const part of exported.split(".")) {
    target = target?.[part];
  }
  if (target === undefined) {
    throw new Error(`${file} has no export ${JSON.stringify(exported)} (exports: ${Object.keys(module).join(", ") || "none"})`);
  }
  return target;
}

/** A channel's JSON schema: what its reducer and default show (an `Annotation<T>()`'s
 * type is TypeScript's alone, gone at run time: any value). */
function channelSchema(channel) {
  if (channel?.operator === LG.messagesStateReducer) return { type: "array", items: { type: "object" } };
  let value;
  try {
    value = channel?.initialValueFactory?.();
  } catch {
    return {};
  }
  if (Array.isArray(value)) return { type: "array" };
  if (value === null || value === undefined) return {};
  return ["string", "number", "boolean", "object"].includes(typeof value) ? { type: typeof value } : {};
}

/** The JSON schema of an annotation state (`Annotation.Root`): its channels' keys. */
function annotationSchema(definition) {
  if (!definition || typeof definition !== "object") return null;
  const properties = {};
  for (const [key, channel] of Object.entries(definition)) {
    if (!key.startsWith("__")) properties[key] = channelSchema(channel);
  }
  return { type: "object", properties };
}

/** JSON schemas of the graph's state: from Zod or StateSchema where it declares them,
 * else from its annotation's channels. */
export function schemas(graph) {
  const describe = (schema) => {
    if (!schema) return null;
    try {
      return LG.getJsonSchemaFromSchema(schema) ?? null;
    } catch {
      return null; // an annotation-only state has no runtime schema
    }
  };
  const builder = graph.builder;
  const state = describe(builder?._schemaRuntimeDefinition) ?? annotationSchema(builder?._schemaDefinition);
  // Without an input (output) schema of its own, a graph takes (part of) its state.
  const own = (runtime, definition) =>
    describe(runtime) ?? (definition === builder?._schemaDefinition ? state : annotationSchema(definition) ?? state);
  return {
    input_schema: own(builder?._inputRuntimeDefinition, builder?._inputDefinition),
    output_schema: own(builder?._outputRuntimeDefinition, builder?._outputDefinition),
    state_schema: state,
    config_schema: null,
    context_schema: describe(builder?._configRuntimeSchema),
  };
}
