// Store adapters in LangGraph.js for crates/service-server/tests/store_adapter.rs,
// which copies this directory into a project whose node_modules has
// @langchain/langgraph: a BaseStore keeping its items in a Map.
import {
  BaseStore,
  type Item,
  type Operation,
  type OperationResults,
} from "@langchain/langgraph";

const startsWith = (namespace: string[], prefix: string[]) =>
  prefix.every((label, i) => namespace[i] === label);

/** Plain storage, as a user's store over their own database would be: no filter, no
 * ordering of its own (the server applies its own over what this answers). */
class MapStore extends BaseStore {
  private items = new Map<string, Item>();
  // Strictly increasing times, so "newest first" is one order.
  private last = 0;
  /** How many operations of each kind reached the store. */
  seen: Record<string, number> = {};

  constructor(seeded: Item[]) {
    super();
    for (const item of seeded) this.items.set(JSON.stringify([item.namespace, item.key]), item);
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    return operations.map((op) => this.one(op)) as OperationResults<Op>;
  }

  /** The keys held under `prefix`, sorted. */
  keys(prefix: string[]): string[] {
    return [...this.items.values()].filter((item) => startsWith(item.namespace, prefix)).map((item) => item.key).sort();
  }

  private count(kind: string) {
    this.seen[kind] = (this.seen[kind] ?? 0) + 1;
  }

  private one(op: Operation) {
    if ("namespacePrefix" in op) {
      this.count("search");
      const offset = op.offset ?? 0;
      return [...this.items.values()]
        .filter((item) => startsWith(item.namespace, op.namespacePrefix))
        .slice(offset, offset + (op.limit ?? 10));
    }
    if ("value" in op) {
      this.count("put");
      const id = JSON.stringify([op.namespace, op.key]);
      if (op.value === null) {
        this.items.delete(id);
        return undefined;
      }
      this.last = Math.max(Date.now(), this.last + 1);
      const now = new Date(this.last);
      const createdAt = this.items.get(id)?.createdAt ?? now;
      this.items.set(id, { namespace: op.namespace, key: op.key, value: op.value, createdAt, updatedAt: now });
      return undefined;
    }
    if ("key" in op) {
      this.count("get");
      return this.items.get(JSON.stringify([op.namespace, op.key])) ?? null;
    }
    this.count("listNamespaces");
    const prefix = op.matchConditions?.find((condition) => condition.matchType === "prefix")?.path ?? [];
    const namespaces = new Map<string, string[]>();
    for (const { namespace } of this.items.values()) {
      if (startsWith(namespace, prefix)) namespaces.set(JSON.stringify(namespace), namespace);
    }
    return [...namespaces.values()].slice(op.offset, op.offset + op.limit);
  }
}

/** What the store held before the server started. */
export const store = new MapStore([
  {
    namespace: ["archive"],
    key: "first",
    value: { text: "kept before the server started" },
    createdAt: new Date("2024-01-02T03:04:05Z"),
    updatedAt: new Date("2024-01-02T03:04:05Z"),
  },
]);

/** Not a store: the boot must refuse it. */
export const notAStore = { put: "nothing" };

/** A store whose backend is down: every operation throws. */
class DownStore extends BaseStore {
  async batch<Op extends Operation[]>(_operations: Op): Promise<OperationResults<Op>> {
    throw new Error("the notes database is down");
  }
}

export const down = new DownStore();
