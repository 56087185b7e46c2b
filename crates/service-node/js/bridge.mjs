// The Node side of the graph bridge: one worker process of service-server.
//
// The server runs this file with `node --input-type=module -e` in the directory of the
// config file (so `@langchain/langgraph` resolves from the user's own node_modules) and
// talks to it over stdin and stdout, one JSON message per line: the same versioned
// protocol as the Python side (docs/python-graphs.md, "The worker protocol";
// docs/js-graphs.md). Whatever the graphs print goes to stderr, which the server logs.

import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const PROTOCOL = 1;
// How long writes wait for the checkpoint they belong to (see ServerSaver.known).
const WRITES_WAIT_MS = 5000;
const TYPESCRIPT = [".ts", ".mts", ".cts", ".tsx"];

// The protocol owns stdout; anything else written there (console.log in a graph) goes
// to stderr so it cannot corrupt the stream.
const protocolWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);
for (const level of ["log", "info", "debug"]) console[level] = console.error;

/** JSON for what graphs put in state and frames (messages, errors, dates, ...). A
 * replacer sees a value after its own toJSON, so messages arrive here as LangChain's
 * `{lc, type: "constructor", id, kwargs}`. */
function plain(_key, value) {
  if (value === undefined || value === null || typeof value !== "object") {
    return typeof value === "bigint" ? value.toString() : value;
  }
  if (value.lc === 1 && value.type === "constructor" && value.id?.[1] === "messages") return message(value);
  if (value instanceof Error) return { error: value.name, message: value.message };
  if (value instanceof Map) return Object.fromEntries(value);
  if (value instanceof Set) return [...value];
  if (ArrayBuffer.isView(value)) return Buffer.from(value.buffer).toString("base64");
  return value;
}

const MESSAGE_TYPES = {
  AIMessage: "ai",
  HumanMessage: "human",
  SystemMessage: "system",
  ToolMessage: "tool",
  ChatMessage: "chat",
  FunctionMessage: "function",
  RemoveMessage: "remove",
};

/** A LangChain message as the SDKs read it: its fields and `type` (`ai`, ...; a
 * streamed chunk keeps its class name, `AIMessageChunk`, as Python's model_dump). */
function message({ id, kwargs }) {
  const name = id[id.length - 1];
  return { ...kwargs, type: MESSAGE_TYPES[name] ?? name };
}

function send(msg) {
  protocolWrite(JSON.stringify(msg, plain) + "\n");
}

/** A RunError for the server: name, message, stack and the cause chain. */
function runError(error, depth = 0) {
  if (!(error instanceof Error)) {
    return { error: "Error", message: typeof error === "string" ? error : JSON.stringify(error, plain) };
  }
  const out = { error: error.name || error.constructor?.name || "Error", message: error.message, stack: error.stack };
  if (error.cause !== undefined && depth < 8) out.cause = runError(error.cause, depth + 1);
  return out;
}

// ---------------------------------------------------------------- calls to the server

// The request a piece of code runs for, so a call names the run whose store it uses.
const REQUEST = new AsyncLocalStorage();
const waiting = new Map();
let nextCall = 0;

/** A call to the server's checkpointer or store: `op` and `args` are one variant of
 * `Call` in crates/service-python/src/calls.rs, shared with the Python bridge. */
function call(op, args) {
  nextCall += 1;
  const callId = nextCall;
  return new Promise((resolve, reject) => {
    waiting.set(callId, { resolve, reject });
    send({ call: callId, id: REQUEST.getStore() ?? null, op, ...args });
  });
}

function answer(msg) {
  const pending = waiting.get(msg.reply);
  if (!pending) return;
  waiting.delete(msg.reply);
  if ("err" in msg) pending.reject(new Error(msg.err));
  else pending.resolve(msg.ok ?? null);
}

// ----------------------------------------------------------------- loading LangGraph

/** `@langchain/langgraph`'s version in the user's project, found as Node finds it. */
function langgraphVersion(base) {
  for (let dir = base; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, "node_modules", "@langchain", "langgraph", "package.json");
    if (fs.existsSync(manifest)) return JSON.parse(fs.readFileSync(manifest, "utf8")).version;
    if (path.dirname(dir) === dir) return undefined;
  }
}

function coordinates(config) {
  const conf = config?.configurable ?? {};
  return {
    thread_id: conf.thread_id,
    checkpoint_ns: conf.checkpoint_ns ?? "",
    checkpoint_id: conf.checkpoint_id ?? null,
  };
}

function codePointCompare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

// The run keys the server puts in a run's config metadata. LangGraph.js does not copy
// them into its checkpoints' metadata; the server finds a run's checkpoints by them
// (rollback, and refusing a stopped run's late checkpoints), so the saver does.
const RUN_KEYS = ["run_id", "thread_id", "graph_id", "assistant_id", "run_attempt"];

function runKeys(config) {
  const run = config?.metadata ?? {};
  return Object.fromEntries(RUN_KEYS.filter((key) => key in run).map((key) => [key, run[key]]));
}

function saverClass(lg, checkpoint) {
  const { BaseCheckpointSaver } = lg;
  const { WRITES_IDX_MAP } = checkpoint;

  /** Keeps checkpoints in the server's own checkpointer (memory or PostgreSQL).
   * Bodies and written values are stored as the serializer's typed bytes, metadata as
   * JSON, so the server can filter history and roll back runs by it. */
  return class ServerSaver extends BaseCheckpointSaver {
    // Checkpoints this process knows the server has. LangGraph stores a checkpoint in
    // the background and may record the next step's writes against it first; the
    // server refuses writes against a checkpoint it does not have, so those wait.
    known = new Map();

    mark(key) {
      let entry = this.known.get(key);
      if (!entry) {
        let resolve;
        const stored = new Promise((done) => (resolve = done));
        entry = { stored, resolve };
        this.known.set(key, entry);
        if (this.known.size > 100_000) this.known.delete(this.known.keys().next().value);
      }
      return entry;
    }

    stored(config) {
      const { thread_id, checkpoint_ns, checkpoint_id } = coordinates(config);
      this.mark(JSON.stringify([thread_id, checkpoint_ns, checkpoint_id])).resolve();
    }

    async typed(value) {
      const [t, bytes] = await this.serde.dumpsTyped(value);
      return { t, b: Buffer.from(bytes).toString("base64") };
    }

    async untyped(stored) {
      return this.serde.loadsTyped(stored.t, new Uint8Array(Buffer.from(stored.b, "base64")));
    }

    async tuple(stored) {
      const writes = await Promise.all(
        (stored.pending_writes ?? []).map(async (write) => {
          const colon = write.channel.indexOf(":");
          const idx = Number(write.channel.slice(0, colon));
          const channel = write.channel.slice(colon + 1);
          return [write.value.p ?? "", write.task_id, idx, channel, await this.untyped(write.value)];
        }),
      );
      writes.sort((a, b) => codePointCompare(a[0], b[0]) || codePointCompare(a[1], b[1]) || a[2] - b[2]);
      const found = {
        config: { configurable: stored.config },
        checkpoint: await this.untyped(stored.checkpoint),
        metadata: stored.metadata ?? {},
        pendingWrites: writes.map(([, task, , channel, value]) => [task, channel, value]),
      };
      if (stored.parent_config) found.parentConfig = { configurable: stored.parent_config };
      this.stored(found.config);
      return found;
    }

    async getTuple(config) {
      const stored = await call("cp.get", coordinates(config));
      return stored === null ? undefined : this.tuple(stored);
    }

    async *list(config, options = {}) {
      const stored = await call("cp.list", {
        ...coordinates(config),
        filter: options.filter ?? null,
        before: options.before?.configurable?.checkpoint_id ?? null,
        limit: options.limit ?? null,
      });
      for (const item of stored) yield await this.tuple(item);
    }

    async put(config, saved, metadata) {
      const { thread_id, checkpoint_ns, checkpoint_id } = coordinates(config);
      await call("cp.put", {
        thread_id,
        checkpoint_ns,
        parent_id: checkpoint_id,
        checkpoint_id: saved.id,
        checkpoint: await this.typed(saved),
        metadata: { ...runKeys(config), ...JSON.parse(JSON.stringify(metadata ?? {}, plain)) },
      });
      this.mark(JSON.stringify([thread_id, checkpoint_ns, saved.id])).resolve();
      return { configurable: { thread_id, checkpoint_ns, checkpoint_id: saved.id } };
    }

    async putWrites(config, writes, taskId, taskPath = "") {
      const at = coordinates(config);
      const { stored } = this.mark(JSON.stringify([at.thread_id, at.checkpoint_ns, at.checkpoint_id]));
      let timer;
      // Stored by another worker or process when this times out: the server decides.
      await Promise.race([stored, new Promise((done) => (timer = setTimeout(done, WRITES_WAIT_MS)))]);
      clearTimeout(timer);
      await call("cp.put_writes", {
        ...at,
        task_id: taskId,
        run_id: config?.metadata?.run_id ?? null,
        writes: await Promise.all(
          writes.map(async ([channel, value], idx) => [
            `${WRITES_IDX_MAP[channel] ?? idx}:${channel}`,
            { ...(await this.typed(value)), p: taskPath ?? "" },
          ]),
        ),
      });
    }

    async deleteThread(threadId) {
      await call("cp.delete_thread", { thread_id: threadId });
    }
  };
}

function storeClass(lg) {
  const item = (stored) => ({
    namespace: stored.namespace,
    key: stored.key,
    value: stored.value,
    createdAt: new Date(stored.created_at),
    updatedAt: new Date(stored.updated_at),
    ...(stored.score === undefined ? {} : { score: stored.score }),
  });
  // A call's arguments under `body`, in the store routes' request shapes
  // (`Call` in crates/service-python/src/calls.rs, with the checkpointer calls).
  const store = (op, body) => call(op, { body });
  const conditions = (op) => {
    const wanted = {};
    for (const condition of op.matchConditions ?? []) {
      if (condition.matchType in wanted) {
        throw new Error(`more than one ${condition.matchType} condition in listNamespaces`);
      }
      wanted[condition.matchType] = condition.path;
    }
    return wanted;
  };

  /** The server's long-term store, as the run that uses it sees it: every operation is
   * the server's own (filters, paging, semantic query, ttl), none re-implemented. */
  return class ServerStore extends lg.BaseStore {
    async one(op) {
      if ("namespacePrefix" in op) {
        const stored = await store("store.search", {
          namespace_prefix: op.namespacePrefix,
          filter: op.filter ?? null,
          limit: op.limit ?? 10,
          offset: op.offset ?? 0,
          query: op.query ?? null,
        });
        return stored.map(item);
      }
      if ("value" in op) {
        if (op.value === null) {
          await store("store.delete", { namespace: op.namespace, key: op.key });
          return undefined;
        }
        const body = { namespace: op.namespace, key: op.key, value: op.value };
        if (op.index !== undefined) body.index = op.index;
        if (typeof op.ttl === "number") body.ttl = op.ttl;
        await store("store.put", body);
        return undefined;
      }
      if ("key" in op) {
        const stored = await store("store.get", { namespace: op.namespace, key: op.key });
        return stored === null ? null : item(stored);
      }
      return store("store.list_namespaces", {
        ...conditions(op),
        max_depth: op.maxDepth ?? null,
        limit: op.limit ?? 100,
        offset: op.offset ?? 0,
      });
    }

    async batch(ops) {
      const results = [];
      for (const op of ops) results.push(await this.one(op));
      return results;
    }
  };
}

// ------------------------------------------------------------------------ the graphs

let LG;
let SAVER;
let STORE;
const GRAPHS = new Map();

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

const isTypeScript = (target) => TYPESCRIPT.some((ext) => parseTarget(target)[0].endsWith(ext));

/** The export `./path/file.ts:export` (relative to `base`) names. */
async function loadExport(spec, base) {
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

// ---------------------------------------------------------------------- store.adapter

let STORE_ADAPTER;
// Items and namespaces are read from the adapter in pages of this size.
const ADAPTER_PAGE = 1000;

/** store.adapter: a LangGraph.js BaseStore instance (anything with a batch method). */
async function loadStoreAdapter(spec, base) {
  const target = await loadExport(spec, base);
  if (typeof target?.batch !== "function") {
    const kind = typeof target === "object" && target !== null ? target.constructor?.name ?? "Object" : typeof target;
    throw new TypeError(`${JSON.stringify(spec)} is ${kind}, not a LangGraph BaseStore instance: it has no batch method`);
  }
  return target;
}

function adaptedItem(found) {
  // Dates (or what a store keeps instead) as ISO times with their offset.
  const stamp = (at) => new Date(at).toISOString();
  const { namespace, key, value, createdAt, updatedAt } = found;
  return { namespace: [...namespace], key, value, created_at: stamp(createdAt), updated_at: stamp(updatedAt) };
}

/** One operation on the store.adapter (`AdapterCall` in crates/service-python/src/adapter.rs,
 * as bridge.py answers it) through its `batch`: plain storage; the server applies its
 * filter, order, paging and namespace rules. LangGraph.js stores have no ttl. */
async function adapter({ call: op }) {
  const one = async (operation) => (await STORE_ADAPTER.batch([operation]))[0];
  const pages = async (operation, shape) => {
    const found = [];
    for (;;) {
      const page = (await one({ ...operation, limit: ADAPTER_PAGE, offset: found.length })) ?? [];
      found.push(...page.map(shape));
      if (page.length < ADAPTER_PAGE) return found;
    }
  };
  const { namespace, key } = op;
  switch (op.kind) {
    case "get": {
      const found = await one({ namespace, key });
      return found ? adaptedItem(found) : null;
    }
    case "put":
      await one({ namespace, key, value: op.value });
      return null;
    case "delete":
      await one({ namespace, key, value: null });
      return null;
    case "items":
      return pages({ namespacePrefix: op.prefix }, adaptedItem);
    case "namespaces": {
      const matchConditions = op.prefix.length ? [{ matchType: "prefix", path: op.prefix }] : [];
      return pages({ matchConditions }, (labels) => [...labels]);
    }
    default:
      throw new Error(`unknown store adapter call ${JSON.stringify(op.kind)}`);
  }
}

// ---------------------------------------------------------------------- the requests

const SNAKE_OPTIONS = {
  recursion_limit: "recursionLimit",
  max_concurrency: "maxConcurrency",
  run_name: "runName",
  run_id: "runId",
};

function runConfig(request) {
  const config = { ...(request.config ?? {}) };
  for (const [snake, camel] of Object.entries(SNAKE_OPTIONS)) {
    if (snake in config) {
      config[camel] = config[snake];
      delete config[snake];
    }
  }
  config.configurable = { ...(config.configurable ?? {}) };
  if (request.metadata) config.metadata = { ...(config.metadata ?? {}), ...request.metadata };
  return config;
}

function threaded(config) {
  return Boolean(config?.configurable?.thread_id);
}

function input(value) {
  if (value && typeof value === "object" && "command" in value) {
    const { resume, update, goto, graph } = value.command ?? {};
    const send = (g) => (g && typeof g === "object" ? new LG.Send(g.node, g.input) : g);
    const fields = { resume, update, graph };
    if (goto !== undefined && goto !== null) fields.goto = Array.isArray(goto) ? goto.map(send) : send(goto);
    return new LG.Command(Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)));
  }
  return value && typeof value === "object" ? value.values : null;
}

function checkpointCoordinates(config) {
  const conf = config?.configurable;
  if (!conf?.thread_id) return null;
  return { thread_id: conf.thread_id, checkpoint_ns: conf.checkpoint_ns ?? "", checkpoint_id: conf.checkpoint_id ?? null };
}

/** A task's error as a JSON RunError. */
function taskError(error) {
  if (!error) return null;
  if (error instanceof Error) return JSON.stringify(runError(error));
  if (typeof error === "object") {
    return JSON.stringify({ error: error.name ?? "Error", message: error.message ?? JSON.stringify(error) });
  }
  return JSON.stringify({ error: "Error", message: String(error) });
}

function snapshot(state) {
  return {
    values: state.values ?? {},
    next: [...(state.next ?? [])],
    tasks: (state.tasks ?? []).map((task) => {
      const entry = {
        id: task.id,
        name: task.name,
        error: taskError(task.error),
        interrupts: (task.interrupts ?? []).map((i) => ({ id: i.id ?? i.interrupt_id, value: i.value })),
        result: task.result ?? null,
      };
      if (task.state) {
        if ("values" in task.state) {
          entry.state = snapshot(task.state);
          entry.checkpoint = checkpointCoordinates(task.state.config);
        } else {
          entry.checkpoint = checkpointCoordinates(task.state);
        }
      }
      return entry;
    }),
    config: checkpointCoordinates(state.config),
    parent_config: checkpointCoordinates(state.parentConfig),
    metadata: state.metadata ?? null,
    created_at: state.createdAt ?? null,
  };
}

/** A checkpoint payload with Python's `parent_config` (null for the first), as the
 * server's `checkpoints` and `debug` events carry it. */
function checkpointPayload({ parentConfig, ...payload }) {
  return { ...payload, parent_config: parentConfig ?? null };
}

function wireShaped(mode, data) {
  if (mode === "checkpoints") return checkpointPayload(data);
  if (mode === "debug" && data?.type === "checkpoint") return { ...data, payload: checkpointPayload(data.payload) };
  return data;
}

/** The loaded graph of a request. */
function served(graphId) {
  const graph = GRAPHS.get(graphId);
  if (!graph) throw new Error(`graph ${graphId} is not loaded in this worker`);
  return graph;
}

/** The run's context through the graph's context schema, so its defaults apply (as
 * Python LangGraph does with a context dataclass; LangGraph.js passes it unparsed). */
async function runContext(graph, context) {
  const validate = graph.builder?._configRuntimeSchema?.["~standard"]?.validate;
  if (!validate) return context;
  const parsed = await validate(context);
  if (parsed.issues) {
    const reasons = parsed.issues.map((issue) => `${(issue.path ?? []).join(".") || "context"}: ${issue.message}`);
    throw new TypeError(`the run's context does not match the graph's context schema (${reasons.join("; ")})`);
  }
  return parsed.value;
}

/** The graph and stream options of a run request. */
async function prepareRun(request, signal) {
  const config = runConfig(request);
  const graph = await served(request.graph_id).compiled(config, { stateful: threaded(config) });
  const options = { ...config, signal, context: await runContext(graph, request.context ?? {}) };
  if (request.interrupt_before) options.interruptBefore = request.interrupt_before;
  if (request.interrupt_after) options.interruptAfter = request.interrupt_after;
  return { graph, config, options };
}

/** Reports a task's start or end, which the server makes a span of its run's trace
 * (LangGraph's `tasks` stream: a start carries `triggers`, an end `result`). */
function nodeBoundary(id, namespace, task) {
  const node = { task: task.id, name: task.name, ns: namespace };
  if (!("triggers" in task)) {
    node.end = true;
    if (task.error) node.error = task.error instanceof Error ? `${task.error.name}: ${task.error.message}` : String(task.error);
  }
  send({ id, node });
}

async function stream(request, signal) {
  const { graph, config, options } = await prepareRun(request, signal);
  let modes = request.modes?.length ? request.modes : ["values"];
  // A traced run (the request carries the server's `traceparent`) reports its nodes'
  // boundaries; `tasks` frames nobody asked for are not sent.
  const traced = Boolean(request.traceparent);
  const asked = modes.includes("tasks");
  if (traced && !asked) modes = [...modes, "tasks"];
  const chunks = await graph.stream(input(request.input), { ...options, streamMode: modes, subgraphs: true });
  for await (const [namespace, mode, data] of chunks) {
    if (traced && mode === "tasks") {
      nodeBoundary(request.id, namespace, data);
      if (!asked) continue;
    }
    send({ id: request.id, chunk: [mode, namespace, wireShaped(mode, data)] });
  }
  if (!threaded(config)) return null;
  // The state the run ended in, so the server need not ask for it.
  const { checkpoint_id: _id, checkpoint_ns: _ns, ...latest } = config.configurable;
  return snapshot(await graph.getState({ ...config, configurable: latest }));
}

async function events(request, signal) {
  const { graph, options } = await prepareRun(request, signal);
  for await (const event of graph.streamEvents(input(request.input), { ...options, version: "v2" })) {
    send({ id: request.id, chunk: ["events", [], event] });
  }
  return null;
}

async function graphOf(request) {
  const config = runConfig(request);
  return { graph: await served(request.graph_id).compiled(config), config };
}

async function state(request) {
  const { graph, config } = await graphOf(request);
  return snapshot(await graph.getState(config, { subgraphs: Boolean(request.subgraphs) }));
}

async function history(request) {
  const { graph, config } = await graphOf(request);
  const found = [];
  const options = { filter: request.filter ?? undefined, limit: request.limit ?? undefined };
  if (request.before) options.before = { configurable: { checkpoint_id: request.before } };
  for await (const item of graph.getStateHistory(config, options)) found.push(snapshot(item));
  return found;
}

async function update(request) {
  const { graph, config } = await graphOf(request);
  return checkpointCoordinates(await graph.updateState(config, request.values, request.as_node ?? undefined));
}

async function bulk(request) {
  const { graph, config } = await graphOf(request);
  const supersteps = request.supersteps.map((step) => ({
    updates: step.map((u) => ({
      values: u.command != null ? input({ command: u.command }) : u.values,
      asNode: u.as_node ?? undefined,
    })),
  }));
  return checkpointCoordinates(await graph.bulkUpdateState(config, supersteps));
}

async function drawing(request) {
  const { graph, config } = await graphOf(request);
  const xray = request.xray > 0 ? request.xray : undefined;
  const drawn = await graph.getGraphAsync({ ...config, xray });
  return drawn.toJSON();
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
function schemas(graph) {
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

async function subgraphs(request) {
  const { graph } = await graphOf(request);
  const found = [];
  for await (const [namespace, subgraph] of graph.getSubgraphsAsync(request.namespace ?? undefined, Boolean(request.recurse))) {
    found.push([namespace, schemas(subgraph)]);
  }
  return found;
}

async function graphSchemas(request) {
  const { graph } = await graphOf(request);
  return schemas(graph);
}

const OPS = {
  stream,
  events,
  state,
  history,
  update,
  bulk,
  graph: drawing,
  subgraphs,
  schemas: graphSchemas,
  adapter,
};

const running = new Map();

async function handle(request) {
  const controller = new AbortController();
  running.set(request.id, controller);
  try {
    const op = OPS[request.op];
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

async function main() {
  const spec = JSON.parse(process.env.SERVICE_BRIDGE_SPEC);
  delete process.env.SERVICE_BRIDGE_SPEC;
  const hello = { protocol: PROTOCOL, node: process.versions.node, graphs: {} };
  const base = spec.base;
  try {
    hello.langgraph = langgraphVersion(base);
    LG = await import("@langchain/langgraph");
    const checkpoint = await import("@langchain/langgraph-checkpoint");
    SAVER = new (saverClass(LG, checkpoint))();
    STORE = new (storeClass(LG))();
  } catch (error) {
    // Reported to the server, which refuses to boot.
    hello.langgraph_error = `${error.name}: ${error.message}`;
    send({ hello });
    return;
  }
  let loader;
  if ([...Object.values(spec.graphs), spec.store_adapter ?? ""].some(isTypeScript)) {
    try {
      (await import("tsx/esm/api")).register();
    } catch (error) {
      loader = new Error(`TypeScript files need tsx in the project (npm install -D tsx): ${error.message}`, { cause: error });
    }
  }
  if (spec.store_adapter) {
    try {
      if (loader && isTypeScript(spec.store_adapter)) throw loader;
      STORE_ADAPTER = await loadStoreAdapter(spec.store_adapter, base);
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
      GRAPHS.set(graphId, new Graph(graphId, await loadExport(target, base)));
      hello.graphs[graphId] = { ok: true };
    } catch (error) {
      hello.graphs[graphId] = { ok: false, error: runError(error) };
    }
  }
  send({ hello });
  serve();
}

await main();
