// The console's only way to the server: the same routes and bodies as the SDKs,
// through the API's normal authentication (the x-api-key box).

const BASE_KEY = "console.baseUrl";
const API_KEY = "console.apiKey";

/** Marks threads the playground creates (SPEC console item 8). */
export const CONSOLE_SOURCE = "console";

/** List caps (SPEC Limits, console lists); store items and namespaces, which SPEC
 *  does not cap, take the thread and assistant caps. */
export const CAPS = { threads: 50, runs: 50, checkpoints: 20, assistants: 100, crons: 100, frames: 500, items: 50, namespaces: 100 };

/** `?baseUrl=` wins and is remembered; else the remembered one; else this page's
 *  parent path (the console's mount sits one segment below the API). */
export function baseUrl() {
  const given = new URLSearchParams(location.search).get("baseUrl");
  if (given) localStorage.setItem(BASE_KEY, given);
  const url = given || localStorage.getItem(BASE_KEY) || new URL("..", location.href).href;
  return url.replace(/\/+$/, "");
}

export function forgetBaseUrl() {
  localStorage.removeItem(BASE_KEY);
}

export function apiKey() {
  return localStorage.getItem(API_KEY) || "";
}

export function setApiKey(key) {
  if (key) localStorage.setItem(API_KEY, key);
  else localStorage.removeItem(API_KEY);
}

/** An answer other than 2xx, carrying the server's own message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const out = { ...extra };
  const key = apiKey();
  if (key) out["x-api-key"] = key;
  return out;
}

async function failure(response) {
  const text = await response.text();
  let message = text || response.statusText;
  try {
    const body = JSON.parse(text);
    message = body.message ?? body.detail ?? body.error ?? message;
    if (typeof message !== "string") message = JSON.stringify(message);
  } catch {
    // Not JSON: the text itself is the message.
  }
  return new ApiError(response.status, `${response.status}: ${message}`);
}

/** One JSON request; resolves to the parsed body (null when empty). */
export async function call(method, path, body, { signal } = {}) {
  const init = { method, headers: headers(), signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(baseUrl() + path, init);
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, options) => call("GET", path, undefined, options);
export const post = (path, body, options) => call("POST", path, body ?? {}, options);
export const patch = (path, body) => call("PATCH", path, body);

/** Reads an SSE response, calling `onFrame({event, data, id})` per frame, until the
 *  stream ends or `signal` aborts. Both line endings the SDKs accept are read. */
export async function stream(method, path, body, { signal, lastEventId, onFrame }) {
  const extra = { accept: "text/event-stream" };
  if (lastEventId !== undefined) extra["last-event-id"] = String(lastEventId);
  const init = { method, headers: headers(extra), signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(baseUrl() + path, init);
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let frame = { event: "", data: [], id: undefined };
  const dispatch = () => {
    if (frame.event || frame.data.length) {
      let data = frame.data.join("\n");
      try {
        data = JSON.parse(data);
      } catch {
        // Kept as text: the frame is still shown.
      }
      onFrame({ event: frame.event || "message", data, id: frame.id });
    }
    frame = { event: "", data: [], id: frame.id };
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === "") dispatch();
      else if (line.startsWith(":")) continue;
      else {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") frame.event = text;
        else if (field === "data") frame.data.push(text);
        else if (field === "id") frame.id = text;
      }
    }
  }
  dispatch();
}

/** The thread's most recent run, or null (SPEC console item 6). */
export async function latestRun(threadId) {
  const runs = await get(`/threads/${threadId}/runs?limit=1`);
  return runs[0] ?? null;
}

/** The assistants the console lists, capped. */
export function assistants() {
  return post("/assistants/search", { limit: CAPS.assistants, sort_by: "name", sort_order: "asc" });
}
