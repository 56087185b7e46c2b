// The long-term store runs get: LangGraph.js's BaseStore over the server's own.

import { call } from "./protocol.mjs";

export function storeClass(lg) {
  const item = (stored) => ({
    namespace: stored.namespace,
    key: stored.key,
    value: stored.value,
    createdAt: new Date(stored.created_at),
    updatedAt: new Date(stored.updated_at),
    ...(stored.score === undefined ? {} : { score: stored.score }),
  });
  // A call's arguments under `body`, in the store routes' request shapes
  // (`Call` in crates/service-python/src/calls.rs, with the checkpointer calls).
  const store = (op, body) => call(op, { body });
  const conditions = (op) => {
    const wanted = {};
    for (const condition of op.matchConditions ?? []) {
      if (condition.matchType in wanted) {
        throw new Error(`more than one ${condition.matchType} condition in listNamespaces`);
      }
      wanted[condition.matchType] = condition.path;
    }
    return wanted;
  };

  /** The server's long-term store, as the run that uses it sees it: every operation is
   * the server's own (filters, paging, semantic query, ttl), none re-implemented. */
  return class ServerStore extends lg.BaseStore {
    async one(op) {
      if ("namespacePrefix" in op) {
        const stored = await store("store.search", {
          namespace_prefix: op.namespacePrefix,
          filter: op.filter ?? null,
          limit: op.limit ?? 10,
          offset: op.offset ?? 0,
          query: op.query ?? null,
        });
        return stored.map(item);
      }
      if ("value" in op) {
        if (op.value === null) {
          await store("store.delete", { namespace: op.namespace, key: op.key });
          return undefined;
        }
        const body = { namespace: op.namespace, key: op.key, value: op.value };
        if (op.index !== undefined) body.index = op.index;
        if (typeof op.ttl === "number") body.ttl = op.ttl;
        await store("store.put", body);
        return undefined;
      }
      if ("key" in op) {
        const stored = await store("store.get", { namespace: op.namespace, key: op.key });
        return stored === null ? null : item(stored);
      }
      return store("store.list_namespaces", {
        ...conditions(op),
        max_depth: op.maxDepth ?? null,
        limit: op.limit ?? 100,
        offset: op.offset ?? 0,
      });
    }

    async batch(ops) {
      const results = [];
      for (const op of ops) results.push(await this.one(op));
      return results;
    }
  };
}

/** LangGraph.js 1.x hands a graph's nodes its store wrapped in an `AsyncBatchedStore`,
 * which queues get, put, search and delete into the store's batch but inherits
 * BaseStore's listNamespaces, whose batch call the wrapper refuses. The wrapper passes
 * it to the store it wraps instead (unless LangGraph.js implements it itself). */
export function passListNamespacesThrough(lg) {
  const wrapper = lg.AsyncBatchedStore?.prototype;
  if (!wrapper || Object.hasOwn(wrapper, "listNamespaces")) return;
  wrapper.listNamespaces = function listNamespaces(options) {
    return this.store.listNamespaces(options);
  };
}
