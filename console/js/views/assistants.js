// Assistants (read-only): the list, and one assistant's versions, config, graph
// drawn as a diagram, and schemas.

import { CAPS, assistants, get, post } from "../api.js";
import { h, jsonBox, link, pageHead, section, table, time } from "../ui.js";
import { diagram } from "../diagram.js";

export async function render({ parts }) {
  if (parts.length) return detail(parts[0]);
  return h(
    "div.view",
    pageHead("Assistants", `Up to ${CAPS.assistants} assistants, read-only.`),
    section("Assistants", assistants, (list) =>
      table(list, [
        ["Name", (a) => link(`/assistants/${a.assistant_id}`, a.name)],
        ["Graph", (a) => a.graph_id],
        ["Version", (a) => a.version],
        ["Description", (a) => a.description ?? "—"],
        ["Updated", (a) => time(a.updated_at)],
      ], "No assistants."),
    ),
  );
}

async function detail(id) {
  const assistant = await get(`/assistants/${id}`);
  return h(
    "div.view",
    pageHead(assistant.name, `Graph ${assistant.graph_id} · version ${assistant.version}`),
    h(
      "div.grid",
      section("Graph", () => get(`/assistants/${id}/graph`), (graph) => h("div", { id: "assistant-graph" }, diagram(graph))),
      h(
        "section.card",
        h("header.card-head", h("h2", "Assistant")),
        h(
          "dl.facts",
          h("dt", "Id"), h("dd.mono", assistant.assistant_id),
          h("dt", "Graph"), h("dd", assistant.graph_id),
          h("dt", "Created"), h("dd", time(assistant.created_at)),
        ),
        h("h3", "Config"),
        jsonBox(assistant.config, 2),
        h("h3", "Context"),
        jsonBox(assistant.context, 1),
        h("h3", "Metadata"),
        jsonBox(assistant.metadata, 1),
      ),
      section("Versions", () => post(`/assistants/${id}/versions`, { limit: CAPS.assistants }), (versions) =>
        table(versions, [
          ["Version", (v) => v.version + (v.version === assistant.version ? " (active)" : "")],
          ["Name", (v) => v.name],
          ["Created", (v) => time(v.created_at)],
          ["Config", (v) => jsonBox(v.config, 0)],
        ]),
      ),
      section("Schemas", () => get(`/assistants/${id}/schemas`), (schemas) =>
        ["input_schema", "output_schema", "state_schema", "config_schema", "context_schema"].map((name) => [
          h("h3", name.replace("_", " ")),
          schemas[name] ? jsonBox(schemas[name], 1) : h("p.muted", "none"),
        ]),
      ),
    ),
  );
}
