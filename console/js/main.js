// The shell: navigation, the server box (base URL and API key) and hash routing.
// Each view renders once per visit; nothing refreshes on its own.

import { apiKey, baseUrl, forgetBaseUrl, setApiKey } from "./api.js";
import { errorBox, fill, h, loading } from "./ui.js";
import * as playground from "./views/playground.js";
import * as overview from "./views/overview.js";
import * as assistants from "./views/assistants.js";
import * as threads from "./views/threads.js";
import * as runs from "./views/runs.js";
import * as channels from "./views/channels.js";
import * as interrupts from "./views/interrupts.js";
import * as timetravel from "./views/timetravel.js";
import * as store from "./views/store.js";
import * as crons from "./views/crons.js";

const VIEWS = [
  ["playground", "Playground", playground],
  ["overview", "Overview", overview],
  ["assistants", "Assistants", assistants],
  ["threads", "Threads", threads],
  ["runs", "Runs", runs],
  ["channels", "Channels", channels],
  ["interrupts", "Interrupts", interrupts],
  ["timetravel", "Time travel", timetravel],
  ["store", "Store", store],
  ["crons", "Crons", crons],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let current = null;

function serverBox() {
  const base = h("input", { id: "base-url", type: "url", value: baseUrl(), readonly: true, "aria-label": "API base URL" });
  const key = h("input", {
    id: "api-key",
    type: "password",
    value: apiKey(),
    autocomplete: "off",
    placeholder: "x-api-key, when needed",
    "aria-label": "API key",
  });
  const save = (event) => {
    event.preventDefault();
    setApiKey(key.value.trim());
    route();
  };
  const reset = () => {
    forgetBaseUrl();
    const url = new URL(location.href);
    if (url.searchParams.has("baseUrl")) {
      // Loads the page again without the parameter, which would set it anew.
      url.searchParams.delete("baseUrl");
      location.replace(url.href);
      return;
    }
    base.value = baseUrl();
    route();
  };
  return h(
    "form.server",
    { onsubmit: save },
    h("label", { for: "base-url" }, "Server"),
    base,
    h("button.ghost", { type: "button", onclick: reset, title: "Forget the ?baseUrl= override" }, "Reset"),
    h("label", { for: "api-key" }, "API key"),
    key,
    h("button", { type: "submit" }, "Use key"),
  );
}

function parse() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { name: parts[0] || "playground", parts: parts.slice(1), query: new URLSearchParams(query) };
}

async function route() {
  const { name, parts, query } = parse();
  current?.abort();
  current = new AbortController();
  const view = VIEWS.find(([id]) => id === name);
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.view === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!view) {
    fill(main, errorBox(new Error(`No view named “${name}”.`)));
    return;
  }
  document.title = `${view[1]} · Console`;
  // The view before goes at once: what shows is always the view asked for.
  fill(main, loading());
  try {
    fill(main, await view[2].render({ parts, query, signal: current.signal }));
  } catch (error) {
    fill(main, errorBox(error));
  }
  main.focus({ preventScroll: true });
}

fill(
  nav,
  h(
    "ul",
    VIEWS.map(([id, label]) => h("li", h("a", { href: `#/${id}`, "data-view": id }, label))),
  ),
);
document.getElementById("server").append(serverBox());
// The skip link focuses the view instead of changing the hash, which is the route.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
window.addEventListener("hashchange", route);
route();
