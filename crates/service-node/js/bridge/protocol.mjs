// The worker protocol's IO: stdout is the protocol's alone, one JSON message a line;
// the calls a worker makes to the server's checkpointer and store, and their replies.

import { AsyncLocalStorage } from "node:async_hooks";

// The protocol owns stdout; anything else written there (console.log in a graph) goes
// to stderr so it cannot corrupt the stream.
const protocolWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);
for (const level of ["log", "info", "debug"]) console[level] = console.error;

/** JSON for what graphs put in state and frames (messages, errors, dates, ...). A
 * replacer sees a value after its own toJSON, so messages arrive here as LangChain's
 * `{lc, type: "constructor", id, kwargs}`. */
export function plain(_key, value) {
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

export function send(msg) {
  protocolWrite(JSON.stringify(msg, plain) + "\n");
}

/** A RunError for the server: name, message, stack and the cause chain. */
export function runError(error, depth = 0) {
  if (!(error instanceof Error)) {
    return { error: "Error", message: typeof error === "string" ? error : JSON.stringify(error, plain) };
  }
  const out = { error: error.name || error.constructor?.name || "Error", message: error.message, stack: error.stack };
  if (error.cause !== undefined && depth < 8) out.cause = runError(error.cause, depth + 1);
  return out;
}

// The request a piece of code runs for, so a call names the run whose store it uses.
export const REQUEST = new AsyncLocalStorage();
const waiting = new Map();
let nextCall = 0;

/** A call to the server's checkpointer or store: `op` and `args` are one variant of
 * `Call` in crates/service-python/src/calls.rs, shared with the Python bridge. */
export function call(op, args) {
  nextCall += 1;
  const callId = nextCall;
  return new Promise((resolve, reject) => {
    waiting.set(callId, { resolve, reject });
    send({ call: callId, id: REQUEST.getStore() ?? null, op, ...args });
  });
}

export function answer(msg) {
  const pending = waiting.get(msg.reply);
  if (!pending) return;
  waiting.delete(msg.reply);
  if ("err" in msg) pending.reject(new Error(msg.err));
  else pending.resolve(msg.ok ?? null);
}
