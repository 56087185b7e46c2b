// A graph drawing (GET /assistants/{id}/graph) as an SVG: nodes in layers by their
// longest distance from the start, edges as curves, conditional ones dashed.

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 132;
const NODE_H = 34;
const GAP_X = 28;
const GAP_Y = 46;

function el(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

const label = (node) =>
  (typeof node.data === "string" ? node.data : node.data?.name) ?? node.name ?? String(node.id);

/** Layer of every node: longest path from the roots over the edges that do not
 *  close a cycle. */
function layers(nodes, edges) {
  const out = new Map(nodes.map((n) => [String(n.id), []]));
  for (const e of edges) out.get(String(e.source))?.push(String(e.target));
  const state = new Map();
  const forward = [];
  const visit = (id) => {
    state.set(id, "open");
    for (const next of out.get(id) ?? []) {
      if (state.get(next) === "open") continue;
      forward.push([id, next]);
      if (!state.has(next)) visit(next);
    }
    state.set(id, "done");
  };
  const start = nodes.find((n) => n.id === "__start__");
  if (start) visit("__start__");
  for (const n of nodes) if (!state.has(String(n.id))) visit(String(n.id));
  const layer = new Map(nodes.map((n) => [String(n.id), 0]));
  // Longest path by relaxation; the forward edges form a DAG, so |V| passes suffice.
  for (let i = 0; i < nodes.length; i++) {
    for (const [a, b] of forward) layer.set(b, Math.max(layer.get(b), layer.get(a) + 1));
  }
  return layer;
}

/** The SVG of `graph` ({nodes, edges}). */
export function diagram(graph) {
  const nodes = graph?.nodes ?? [];
  const edges = graph?.edges ?? [];
  const layer = layers(nodes, edges);
  const rows = [];
  for (const n of nodes) (rows[layer.get(String(n.id))] ??= []).push(n);
  const widest = Math.max(1, ...rows.map((r) => r?.length ?? 0));
  const width = widest * (NODE_W + GAP_X) + GAP_X;
  const height = rows.length * (NODE_H + GAP_Y) + GAP_Y / 2;
  const at = new Map();
  rows.forEach((row = [], y) => {
    const offset = (width - row.length * (NODE_W + GAP_X) + GAP_X) / 2;
    row.forEach((n, x) => at.set(String(n.id), { x: offset + x * (NODE_W + GAP_X), y: GAP_Y / 2 + y * (NODE_H + GAP_Y) }));
  });
  const svg = el("svg", {
    class: "diagram",
    viewBox: `0 0 ${width} ${Math.max(height, NODE_H + GAP_Y)}`,
    role: "img",
    "aria-label": `Graph of ${nodes.length} nodes and ${edges.length} edges`,
  });
  const defs = el("defs");
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(el("path", { d: "M0,0 L10,5 L0,10 z", class: "diagram-arrow" }));
  defs.append(marker);
  svg.append(defs);
  for (const e of edges) {
    const a = at.get(String(e.source));
    const b = at.get(String(e.target));
    if (!a || !b) continue;
    const x1 = a.x + NODE_W / 2;
    const x2 = b.x + NODE_W / 2;
    let d;
    if (b.y > a.y) {
      const y1 = a.y + NODE_H;
      const y2 = b.y;
      d = `M${x1},${y1} C${x1},${y1 + GAP_Y / 2} ${x2},${y2 - GAP_Y / 2} ${x2},${y2}`;
    } else {
      // Back or same-layer edge: loop around the right side.
      const xr = Math.max(a.x, b.x) + NODE_W;
      d = `M${a.x + NODE_W},${a.y + NODE_H / 2} C${xr + GAP_X},${a.y + NODE_H / 2} ${xr + GAP_X},${b.y + NODE_H / 2} ${b.x + NODE_W},${b.y + NODE_H / 2}`;
    }
    const path = el("path", { d, class: e.conditional ? "diagram-edge conditional" : "diagram-edge", "marker-end": "url(#arrow)" });
    if (e.data) path.append(el("title", {}, String(e.data)));
    svg.append(path);
  }
  for (const n of nodes) {
    const p = at.get(String(n.id));
    const terminal = n.id === "__start__" || n.id === "__end__";
    const g = el("g", { class: terminal ? "diagram-node terminal" : "diagram-node" });
    g.append(el("rect", { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: terminal ? NODE_H / 2 : 6 }));
    const text = label(n).replace(/^__(.*)__$/, "$1");
    g.append(el("text", { x: p.x + NODE_W / 2, y: p.y + NODE_H / 2, "dominant-baseline": "central", "text-anchor": "middle" }, text.length > 18 ? text.slice(0, 17) + "…" : text));
    g.append(el("title", {}, String(n.id)));
    svg.append(g);
  }
  return svg;
}
