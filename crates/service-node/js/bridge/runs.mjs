// The requests on a graph: runs (stream, events) and state, history, updates,
// drawings and schemas.

import { LG, schemas, served } from "./graphs.mjs";
import { runError, send } from "./protocol.mjs";

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

export const OPS = {
  stream,
  events,
  state,
  history,
  update,
  bulk,
  graph: drawing,
  subgraphs,
  schemas: graphSchemas,
};
