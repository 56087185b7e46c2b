// A LangGraph.js graph using the long-term store as graphs do (the server's store, whose
// items the store adapter keeps); it reports what the store answered and what the
// adapter (store.ts's MapStore, in this same worker) holds.
import { Annotation, END, START, StateGraph, getStore } from "@langchain/langgraph";
import { store as adapter } from "./store.ts";

const State = Annotation.Root({ report: Annotation<Record<string, unknown>>() });

async function remember() {
  const store = getStore()!;
  await store.put(["notes", "graph"], "from-graph", { text: "written by a run", n: 10 });
  const found = await store.search(["notes"], { filter: { n: { $gte: 2 } }, limit: 50 });
  const got = await store.get(["notes", "u1"], "a");
  const namespaces = {
    notes: await store.listNamespaces({ prefix: ["notes"] }),
    page: await store.listNamespaces({ prefix: ["notes"], limit: 1, offset: 1 }),
    suffix: await store.listNamespaces({ suffix: ["u2"] }),
    roots: await store.listNamespaces({ maxDepth: 1 }),
  };
  return {
    report: {
      found: found.map((item) => item.key),
      got: got?.value ?? null,
      namespaces,
      held: adapter.keys(["notes"]),
      seen: { ...adapter.seen },
    },
  };
}

export const graph = new StateGraph(State)
  .addNode("remember", remember)
  .addEdge(START, "remember")
  .addEdge("remember", END)
  .compile();
