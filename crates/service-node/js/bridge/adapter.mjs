// store.adapter: a LangGraph.js BaseStore of the user's that keeps the server's store
// items, answering the server's `adapter` requests.

import { loadExport } from "./graphs.mjs";

let STORE_ADAPTER;
// Items and namespaces are read from the adapter in pages of this size.
const ADAPTER_PAGE = 1000;

/** Loads store.adapter: a LangGraph.js BaseStore instance (anything with a batch method). */
export async function loadStoreAdapter(spec, base) {
  const target = await loadExport(spec, base);
  if (typeof target?.batch !== "function") {
    const kind = typeof target === "object" && target !== null ? target.constructor?.name ?? "Object" : typeof target;
    throw new TypeError(`${JSON.stringify(spec)} is ${kind}, not a LangGraph BaseStore instance: it has no batch method`);
  }
  STORE_ADAPTER = target;
}

function adaptedItem(found) {
  // Dates (or what a store keeps instead) as ISO times with their offset.
  const stamp = (at) => new Date(at).toISOString();
  const { namespace, key, value, createdAt, updatedAt } = found;
  return { namespace: [...namespace], key, value, created_at: stamp(createdAt), updated_at: stamp(updatedAt) };
}

/** One operation on the store.adapter (`AdapterCall` in crates/service-python/src/adapter.rs,
 * as bridge.py answers it) through its `batch`: plain storage; the server applies its
 * filter, order, paging and namespace rules. LangGraph.js stores have no ttl. */
export async function adapter({ call: op }) {
  const one = async (operation) => (await STORE_ADAPTER.batch([operation]))[0];
  const pages = async (operation, shape) => {
    const found = [];
    for (;;) {
      const page = (await one({ ...operation, limit: ADAPTER_PAGE, offset: found.length })) ?? [];
      found.push(...page.map(shape));
      if (page.length < ADAPTER_PAGE) return found;
    }
  };
  const { namespace, key } = op;
  switch (op.kind) {
    case "get": {
      const found = await one({ namespace, key });
      return found ? adaptedItem(found) : null;
    }
    case "put":
      await one({ namespace, key, value: op.value });
      return null;
    case "delete":
      await one({ namespace, key, value: null });
      return null;
    case "items":
      return pages({ namespacePrefix: op.prefix }, adaptedItem);
    case "namespaces": {
      const matchConditions = op.prefix.length ? [{ matchType: "prefix", path: op.prefix }] : [];
      return pages({ matchConditions }, (labels) => [...labels]);
    }
    default:
      throw new Error(`unknown store adapter call ${JSON.stringify(op.kind)}`);
  }
}
