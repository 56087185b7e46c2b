// LangGraph.js versions of the reference graphs (same ids, same behaviour as
// examples/python-graphs/graphs.py), in TypeScript, served by the server's Node bridge
// from this folder's langgraph.json: the bridge's tests and scripts/test's JS
// reference-graph passes read them from here. `npx @langchain/langgraph-cli dev`
// serves them too, to compare with the reference server.

import { Annotation, END, START, StateGraph, interrupt, messagesStateReducer } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";

const append = <T>() =>
  Annotation<T[]>({ reducer: (left, right) => left.concat(right), default: () => [] });

// ---------------------------------------------------------------------- echo
// Messages merge by id as LangGraph's `add_messages` does (ids given, content blocks kept).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const messages = () => Annotation<any[]>({ reducer: messagesStateReducer, default: () => [] });

const EchoState = Annotation.Root({ messages: messages() });

const content = (message: unknown): unknown =>
  message !== null && typeof message === "object" && "content" in message
    ? (message as { content: unknown }).content
    : message;

/** A message's text: its content string, or its text blocks joined. */
const text = (message: unknown): string => {
  const value = content(message);
  if (Array.isArray(value)) {
    return value
      .map((block) =>
        typeof block === "string" ? block : block?.type === "text" ? String(block.text ?? "") : "",
      )
      .join("");
  }
  return value === null || value === undefined ? "" : String(value);
};

const last = (list: unknown[]): unknown => list[list.length - 1];

export const echo = new StateGraph(EchoState)
  .addNode("echo", (state) => {
    const said = state.messages.length ? text(last(state.messages)) : "";
    return { messages: [{ type: "ai", content: `echo: ${said}` }] };
  })
  .addEdge(START, "echo")
  .addEdge("echo", END)
  .compile();

// --------------------------------------------------------------------- steps
const StepsState = Annotation.Root({
  n: Annotation<number | null>(),
  count: Annotation<number>(),
  log: append<string>(),
});

export const steps = new StateGraph(StepsState)
  .addNode("step", (state, config: LangGraphRunnableConfig) => {
    const k = (state.count ?? 0) + 1;
    config.writer?.({ step: k });
    return { count: k, log: [`step ${k}`] };
  })
  .addEdge(START, "step")
  .addConditionalEdges("step", (state) => ((state.count ?? 0) < (state.n ?? 3) ? "step" : END), ["step", END])
  .compile();

// ------------------------------------------------------------------ approval
const ApprovalState = Annotation.Root({
  topic: Annotation<string>(),
  draft: Annotation<string>(),
  status: Annotation<string>(),
  messages: messages(),
});

type Decision = { type?: string; edited_action?: { args?: { draft?: string } } };

// LangGraph.js refuses a node named as a state key, so the Python graph's `draft` node
// is `drafting` here.
export const approval = new StateGraph(ApprovalState)
  .addNode("drafting", (state) => {
    const topic = state.topic ?? (state.messages.length ? text(last(state.messages)) : undefined);
    return { draft: `draft for ${topic}` };
  })
  .addNode("review", (state) => {
    // The ask also in the shape of LangChain's human-in-the-loop middleware, which
    // Agent Chat UI renders and answers with {"decisions": [...]}.
    const draft = state.draft;
    const answer = interrupt({
      question: "approve?",
      draft,
      action_requests: [{ name: "publish", args: { draft }, description: "Publish this draft?" }],
      review_configs: [{ action_name: "publish", allowed_decisions: ["approve", "edit", "reject"] }],
    });
    let status = "rejected";
    let decided = draft;
    const decisions: Decision[] | undefined = answer?.decisions;
    if (answer === true) {
      status = "approved";
    } else if (Array.isArray(decisions) && decisions.length) {
      const decision = decisions[0];
      if (decision.type === "approve") {
        status = "approved";
      } else if (decision.type === "edit") {
        status = "approved";
        decided = decision.edited_action?.args?.draft ?? draft;
      }
    }
    const update: Record<string, unknown> = {
      status,
      messages: [{ type: "ai", content: `${status}: ${decided}` }],
    };
    if (decided !== draft) update.draft = decided;
    return update;
  })
  .addEdge(START, "drafting")
  .addEdge("drafting", "review")
  .addEdge("review", END)
  .compile();

// ---------------------------------------------------------------------- fail
// Named as the Python graph's exceptions, so both report the same error types.
class ValueError extends Error {
  override name = "ValueError";
}
class RuntimeError extends Error {
  override name = "RuntimeError";
}

export const fail = new StateGraph(Annotation.Root({ messages: append<unknown>() }))
  .addNode("explode", () => {
    throw new ValueError("boom", { cause: new RuntimeError("root cause") });
  })
  .addEdge(START, "explode")
  .addEdge("explode", END)
  .compile();

// ---------------------------------------------------------------------- slow
const SlowState = Annotation.Root({
  delay_ms: Annotation<number | null>(),
  done: Annotation<boolean>(),
});

export const slow = new StateGraph(SlowState)
  .addNode("sleep", async (state) => {
    await new Promise((resolve) => setTimeout(resolve, state.delay_ms ?? 1000));
    return { done: true };
  })
  .addEdge(START, "sleep")
  .addEdge("sleep", END)
  .compile();

// --------------------------------------------------------------------- reply
const ReplyState = Annotation.Root({ text: Annotation<string>(), replied: Annotation<boolean>() });

export const reply = new StateGraph(ReplyState)
  .addNode("reply", (state, config: LangGraphRunnableConfig) => {
    // Reply declaration on the custom stream: the service puts the last one in the
    // webhook body's `reply` field.
    config.writer?.({ reply: { text: `reply to ${state.text}` } });
    return { replied: true };
  })
  .addEdge(START, "reply")
  .addEdge("reply", END)
  .compile();

// -------------------------------------------------------------------- memory
const MemoryState = Annotation.Root({
  user: Annotation<string>(),
  key: Annotation<string>(),
  text: Annotation<string>(),
  count: Annotation<number>(),
});

export const memory = new StateGraph(MemoryState)
  .addNode("remember", async (state, config: LangGraphRunnableConfig) => {
    const store = config.store!;
    const namespace = ["memories", state.user];
    await store.put(namespace, state.key, { text: state.text ?? null });
    const items = await store.search(namespace, { limit: 1000 });
    return { count: items.length };
  })
  .addEdge(START, "remember")
  .addEdge("remember", END)
  .compile();
