// Bundles langgraph.json's generative UI components (`ui`) for the browser, as the
// LangGraph servers do: one script per graph that registers its components under the
// global `__LGUI_<graph>`, with React and the SDK taken from the page (the SDK's
// `LoadExternalComponent` provides them), and the CSS it imports. Runs in the config
// file's directory with esbuild from the project's own node_modules.
//
// Input: process.argv[1], JSON {"ui": {graph_id: "./path.tsx"}, "shared": [module]}.
// Output on stdout, JSON: {"ok": {graph_id: [{"name": file, "text": contents}]}} or
// {"err": message}.

import path from "node:path";

const { ui, shared } = JSON.parse(process.argv[1]);
const base = process.cwd();

function reply(message) {
  process.stdout.write(JSON.stringify(message));
}

// The entry point of a graph's bundle: the user's components, and the `render` the
// HTML fragment of POST /ui/{graph} calls once the script has loaded.
function entry(userPath) {
  return [
    `import components from ${JSON.stringify(userPath)};`,
    "export function render(name, shadowRootId) {",
    "  const root = document.getElementById(shadowRootId).shadowRoot;",
    '  const target = document.createElement("div");',
    "  root.appendChild(target);",
    '  globalThis[Symbol.for("LGUI_EXT_STORE")].respond(shadowRootId, components[name], target);',
    "}",
  ].join("\n");
}

async function bundle(esbuild, graphId, file) {
  const full = path.resolve(base, file);
  let relative = path.relative(base, full).split(path.sep).join("/");
  if (relative.startsWith("../")) {
    throw new Error(`ui.${graphId}: ${file} is outside the project directory`);
  }
  if (!relative.startsWith("./")) relative = `./${relative}`;
  const result = await esbuild.build({
    stdin: { contents: entry(relative), resolveDir: base, loader: "tsx", sourcefile: "ui.entrypoint.tsx" },
    write: false,
    outdir: path.join(base, "dist"),
    entryNames: "entrypoint",
    bundle: true,
    platform: "browser",
    format: "iife",
    target: "es2020",
    jsx: "automatic",
    logLevel: "silent",
    external: ["react", "react-dom", "@langchain/langgraph-sdk", "@langchain/langgraph-sdk/react-ui", ...shared],
    globalName: `__LGUI_${graphId.replace(/[^a-zA-Z0-9]/g, "_")}`,
  });
  // esbuild's require shim for the external modules: the page's modules instead.
  return result.outputFiles.map((output) => ({
    name: path.basename(output.path),
    text: output.text.replaceAll(
      'typeof require !== "undefined" ? require',
      'typeof globalThis[Symbol.for("LGUI_REQUIRE")] !== "undefined" ? globalThis[Symbol.for("LGUI_REQUIRE")]',
    ),
  }));
}

try {
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch (error) {
    throw new Error(`esbuild is not installed in ${base} (npm install -D esbuild; tsx brings it too): ${error.message}`);
  }
  const bundles = {};
  for (const [graphId, file] of Object.entries(ui)) {
    try {
      bundles[graphId] = await bundle(esbuild, graphId, file);
    } catch (error) {
      const details = (error.errors ?? [])
        .map((e) => (e.location ? `${e.location.file}:${e.location.line}:${e.location.column}: ${e.text}` : e.text))
        .join("\n");
      throw new Error(`ui.${graphId} (${file}): ${details || error.message}`);
    }
  }
  reply({ ok: bundles });
} catch (error) {
  reply({ err: error.message });
}
