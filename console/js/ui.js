// Small DOM helpers shared by the views: elements, JSON trees, times, and sections
// that show their own loading and error states.

/** `h("a.link", {href}, child, ...)`: an element with classes, attributes (`on*`
 *  functions become listeners) and children (strings become text, never HTML). */
export function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs === null || typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs)) {
    children.unshift(attrs);
    attrs = {};
  }
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "value") el.value = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces `el`'s children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A collapsible tree of `value`: objects and arrays are <details> (keyboard-operable
 *  natively), open down to `open` levels. */
export function jsonTree(value, open = 2, key = undefined) {
  const label = key === undefined ? [] : [h("span.json-key", `${key}: `)];
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    const summary = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    if (!entries.length) return h("div.json-leaf", label, h("span.json-punct", Array.isArray(value) ? "[]" : "{}"));
    return h(
      "details.json-node",
      { open: open > 0 },
      h("summary", label, h("span.json-punct", summary)),
      entries.map(([k, v]) => jsonTree(v, open - 1, k)),
    );
  }
  const kind = value === null ? "null" : typeof value;
  return h("div.json-leaf", label, h(`span.json-${kind}`, JSON.stringify(value)));
}

/** A JSON tree in a bordered box, the form most views show data in. */
export const jsonBox = (value, open = 2) => h("div.json", jsonTree(value, open));

const UNITS = [
  ["year", 31536000],
  ["month", 2592000],
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** "in 5 minutes" / "3 hours ago" (a past-due time reads as ago). */
export function relTime(iso) {
  if (!iso) return "";
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") return relative.format(Math.round(seconds / size), unit);
  }
  return "";
}

/** A time element: relative text, the exact time on hover. */
export const time = (iso) => (iso ? h("time", { datetime: iso, title: new Date(iso).toLocaleString() }, relTime(iso)) : "—");

export const badge = (status) => h(`span.badge.status-${status}`, status);

// The tail: a v7 UUID begins with its timestamp, so ids made together share a head.
export const short = (id) => (id ? String(id).slice(-8) : "—");

/** Appends `item`, dropping the oldest beyond `cap` (the run tail keeps the latest
 *  frames). */
export function pushCapped(list, item, cap) {
  list.push(item);
  if (list.length > cap) list.splice(0, list.length - cap);
  return list;
}

/** Renders the current view again, as a user's Reload does (never on its own). */
export const rerender = () => window.dispatchEvent(new HashChangeEvent("hashchange"));

/** A link to a hash route. */
export const link = (route, text, attrs = {}) => h("a", { href: `#${route}`, ...attrs }, text);

/** A section whose body comes from `load()`: shows "Loading…" meanwhile and the
 *  server's message when it fails. `render(data)` gives the children. Returns the
 *  element; `.reload()` runs it again. */
export function section(title, load, render, actions = []) {
  const body = h("div.section-body");
  // Untitled, it is only a place for what it loads (cards of their own, say).
  const el = title ? h("section.card", h("header.card-head", h("h2", title), actions), body) : h("section", body);
  el.reload = async () => {
    fill(body, loading());
    try {
      const data = await load();
      fill(body, render(data));
    } catch (error) {
      fill(body, errorBox(error));
    }
  };
  el.reload();
  return el;
}

export const loading = () => h("p.loading", { role: "status" }, "Loading…");

export const errorBox = (error) =>
  h(
    "p.error",
    { role: "alert" },
    error?.message ?? String(error),
    error?.status === 401 ? h("span.hint", " Type a key in the API key box at the top.") : null,
  );

export const empty = (text) => h("p.empty", text);

/** A table: `columns` are [heading, cell(row)] pairs. */
export function table(rows, columns, empty_ = "Nothing here yet.") {
  if (!rows.length) return empty(empty_);
  return h(
    "div.table-wrap",
    h(
      "table",
      h("thead", h("tr", columns.map(([heading]) => h("th", { scope: "col" }, heading)))),
      h("tbody", rows.map((row) => h("tr", columns.map(([, cell]) => h("td", cell(row)))))),
    ),
  );
}

/** A button that shows it is busy and reports failure in `status` while `action`
 *  runs. */
export function actionButton(text, action, { status, className = "", disabled = false, title } = {}) {
  const button = h(`button${className ? "." + className : ""}`, { type: "button", disabled, title }, text);
  button.addEventListener("click", async () => {
    button.disabled = true;
    if (status) fill(status, h("span.loading", { role: "status" }, `${text}…`));
    try {
      const message = await action();
      if (status) fill(status, message ? h("span.ok", { role: "status" }, message) : "");
    } catch (error) {
      if (status) fill(status, errorBox(error));
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** Parses JSON typed by the user, naming the field in the error. */
export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

/** The page heading and its intro line. */
export const pageHead = (title, intro, ...actions) =>
  h("header.page-head", h("div", h("h1", title), intro ? h("p.intro", intro) : null), h("div.actions", actions));
