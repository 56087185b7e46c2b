// Generative UI: the SDK's `LoadExternalComponent` (@langchain/langgraph-sdk/react-ui)
// asks `POST /ui/{assistant_id}` for a graph's components and renders the one a message
// names. Against the JS reference graphs (E2E_GRAPHS=js: examples/js-graphs, whose
// langgraph.json gives `echo` the components of ui.tsx) it renders one in a jsdom
// window that loads the server's script as a browser would; a graph without
// components is a 404, as on the LangGraph servers.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { BASE_URL } from "./helpers.mjs";

const WITH_UI = process.env.E2E_GRAPHS === "js";
const NO_UI = WITH_UI ? false : "the server's echo has generative UI only with E2E_GRAPHS=js";

// A page that runs the scripts the fragment names, fetched from the server.
const dom = new JSDOM("<!doctype html><html><body></body></html>", {
  url: "http://localhost/",
  runScripts: "dangerously",
  resources: "usable",
});
globalThis.window = dom.window;
globalThis.document = dom.window.document;
if (globalThis.navigator === undefined) globalThis.navigator = dom.window.navigator;
globalThis.IS_REACT_ACT_ENVIRONMENT = true;

const { act, createElement } = await import("react");
const { createRoot } = await import("react-dom/client");
const { Client, loadReactUi } = await import("./sdk.mjs");
// Importing it gives the page the modules the components share (React, the SDK).
const { LoadExternalComponent } = await loadReactUi();

after(() => dom.window.close());

const ui = (id, body) =>
  fetch(`${BASE_URL}/ui/${id}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/html" },
    body: JSON.stringify(body),
  });

test("a graph without generative UI answers 404", async () => {
  const response = await ui("steps", { name: "greeting" });
  assert.equal(response.status, 404);
  assert.match(await response.text(), /UI not found for graph 'steps'/);
  const file = await fetch(`${BASE_URL}/ui/steps/entrypoint.js`);
  assert.equal(file.status, 404);
});

test("the fragment names the graph's script and stylesheet, for its id or an assistant of it", { skip: NO_UI }, async () => {
  const client = new Client({ apiUrl: BASE_URL });
  const assistant = await client.assistants.create({ graphId: "echo" });
  for (const id of ["echo", assistant.assistant_id]) {
    const response = await ui(id, { name: "greeting" });
    assert.equal(response.status, 200, id);
    assert.match(response.headers.get("content-type"), /^text\/html/);
    const html = await response.text();
    const script = html.match(/<script src="([^"]+)" onload='__LGUI_echo\.render\(&quot;greeting&quot;, "\{\{shadowRootId\}\}"\)'><\/script>/);
    assert.ok(script, html);
    const stylesheet = html.match(/<link rel="stylesheet" href="([^"]+)" \/>/);
    assert.ok(stylesheet, html);
    // Absolute URLs: the fragment lands in the front end's page, another origin.
    assert.equal(new URL(script[1]).origin, BASE_URL);
    const js = await fetch(script[1]);
    assert.equal(js.status, 200);
    assert.match(js.headers.get("content-type"), /javascript/);
    assert.match(await js.text(), /var __LGUI_echo =/);
    const css = await fetch(stylesheet[1]);
    assert.match(css.headers.get("content-type"), /^text\/css/);
    assert.match(await css.text(), /\.greeting/);
  }
  const missing = await ui("echo", {});
  assert.equal(missing.status, 422);
});

test("LoadExternalComponent renders the component a message names", { skip: NO_UI }, async () => {
  const client = new Client({ apiUrl: BASE_URL });
  const container = document.createElement("div");
  document.body.append(container);
  const root = createRoot(container);
  const message = { id: "ui-1", type: "ui", name: "greeting", props: { text: "hi there" } };
  // What the component reads of a `useStream` result: its client and assistant.
  const stream = { client, assistantId: "echo" };
  await act(async () => root.render(createElement(LoadExternalComponent, { stream, message })));
  const deadline = Date.now() + 20_000;
  let shown = "";
  let started = false;
  while (Date.now() < deadline) {
    const host = container.querySelector("[id^=child-shadow-]");
    // jsdom does not run the scripts of a parsed fragment, as a browser does: the
    // test runs the one the SDK put in the shadow root, with its onload, in the page.
    const script = host?.shadowRoot?.querySelector("script");
    if (script && !started) {
      started = true;
      const run = document.createElement("script");
      run.src = script.src;
      run.setAttribute("onload", script.getAttribute("onload"));
      document.head.append(run);
    }
    shown = host?.shadowRoot?.textContent ?? "";
    if (shown.includes("echo says: hi there")) break;
    await act(async () => new Promise((resolve) => setTimeout(resolve, 50)));
  }
  assert.match(shown, /echo says: hi there/);
  await act(async () => root.unmount());
});
