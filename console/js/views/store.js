// Store: browse namespaces, list a namespace's items, search with a filter (and a
// semantic query when the server has an index).

import { CAPS, post } from "../api.js";
import { empty, errorBox, fill, h, jsonBox, loading, pageHead, parseJson, section, table, time } from "../ui.js";

/** "users/u1" or "users.u1" as a namespace list. */
export const parseNamespace = (text) => text.split(/[/.]/).map((s) => s.trim()).filter(Boolean);

export async function render() {
  const results = h("div", { id: "store-results" }, empty("Pick a namespace, or search."));
  const prefix = h("input", { id: "store-prefix", type: "text", placeholder: "users/u1", autocomplete: "off" });
  const filter = h("input.mono", { id: "store-filter", type: "text", placeholder: '{"kind": "note"}', autocomplete: "off" });
  const query = h("input", { id: "store-query", type: "text", placeholder: "semantic query (needs an index)", autocomplete: "off" });

  async function search(event) {
    event?.preventDefault();
    fill(results, loading());
    try {
      const body = { namespace_prefix: parseNamespace(prefix.value), limit: CAPS.items };
      if (filter.value.trim()) body.filter = parseJson(filter.value, "Filter");
      if (query.value.trim()) body.query = query.value.trim();
      const { items } = await post("/store/items/search", body);
      fill(
        results,
        table(items, [
          ["Namespace", (i) => h("code", i.namespace.join("/"))],
          ["Key", (i) => h("code", i.key)],
          ["Value", (i) => jsonBox(i.value, 1)],
          ["Updated", (i) => time(i.updated_at)],
          ["Score", (i) => (i.score == null ? "—" : i.score.toFixed(3))],
        ], "No items match."),
      );
    } catch (error) {
      fill(results, errorBox(error));
    }
  }

  const namespaces = section(
    "Namespaces",
    () => post("/store/namespaces", { limit: CAPS.namespaces }),
    ({ namespaces }) =>
      namespaces.length
        ? h(
            "ul.chips",
            namespaces.map((ns) =>
              h("li", h("button.chip", { type: "button", onclick: () => ((prefix.value = ns.join("/")), search()) }, ns.join("/"))),
            ),
          )
        : empty("The store is empty."),
  );

  return h(
    "div.view",
    pageHead("Store", "The long-term memory: namespaces, items, search."),
    h(
      "div.grid",
      namespaces,
      h(
        "form.card.stack",
        { onsubmit: search, id: "store-search" },
        h("header.card-head", h("h2", "Search")),
        h("label", { for: "store-prefix" }, "Namespace prefix"),
        prefix,
        h("label", { for: "store-filter" }, "Filter (JSON: a value, or $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin)"),
        filter,
        h("label", { for: "store-query" }, "Query"),
        query,
        h("div.row", h("button.primary", { type: "submit" }, "Search")),
      ),
    ),
    h("section.card", h("header.card-head", h("h2", "Items")), results),
  );
}
