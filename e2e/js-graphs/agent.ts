// Graphs of the Node bridge's end-to-end tests (e2e/python/test_js_graphs.py), served
// from this folder's langgraph.json beside a Python graph and a Rust one.
//
// `agent` is LangGraph.js's prebuilt ReAct agent around a scripted chat model (no
// network):
//   "weather in <city>" -> calls the `weather` tool, then answers in streamed tokens;
//   "book <city>"       -> calls the `book` tool, which asks for confirmation with interrupt();
//   "explode"           -> the model throws.
// `nested` runs a compiled subgraph as its node `review`; the subgraph interrupts
// (its first node is `drafting`: LangGraph.js refuses a node named like a state key).
// `made` is built by a factory that reads the run's config and the config's env.
// `sleepy` waits `seconds` before it answers.
// `welcomer` greets the run's context; its state and context are Zod schemas.

import { AIMessage, AIMessageChunk, type BaseMessage, ToolMessage } from "@langchain/core/messages";
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { Annotation, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

class ScriptedModel extends BaseChatModel {
  _llmType() {
    return "scripted";
  }

  override bindTools() {
    return this as never;
  }

  reply(messages: BaseMessage[]): AIMessage {
    const last = messages[messages.length - 1];
    if (last instanceof ToolMessage) return new AIMessage(`Done: ${last.content}`);
    const text = String(last.content);
    if (text === "explode") throw new Error("the model exploded");
    for (const [verb, name] of [["weather in ", "weather"], ["book ", "book"]] as const) {
      if (text.startsWith(verb)) {
        const city = text.slice(verb.length);
        return new AIMessage({ content: "", tool_calls: [{ name, args: { city }, id: `call-${name}-${city}` }] });
      }
    }
    return new AIMessage(`You said ${text}`);
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const message = this.reply(messages);
    return { generations: [{ message, text: String(message.content) }] };
  }

  // Each chunk is reported to the run manager, as a real model does: that is where
  // LangGraph's `messages` stream takes its tokens from.
  async *_streamResponseChunks(
    messages: BaseMessage[],
    _options: unknown,
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const reply = this.reply(messages);
    if (reply.tool_calls?.length) {
      const tool_call_chunks = reply.tool_calls.map((call, index) => ({
        name: call.name,
        args: JSON.stringify(call.args),
        id: call.id,
        index,
      }));
      const chunk = new ChatGenerationChunk({ text: "", message: new AIMessageChunk({ content: "", tool_call_chunks }) });
      await runManager?.handleLLMNewToken("", undefined, undefined, undefined, undefined, { chunk });
      yield chunk;
      return;
    }
    const words = String(reply.content).split(" ");
    for (const [i, word] of words.entries()) {
      const token = i === 0 ? word : ` ${word}`;
      const chunk = new ChatGenerationChunk({ text: token, message: new AIMessageChunk({ content: token }) });
      await runManager?.handleLLMNewToken(token, undefined, undefined, undefined, undefined, { chunk });
      yield chunk;
    }
  }
}

const weather = tool(async ({ city }) => `sunny in ${city}`, {
  name: "weather",
  description: "The weather in a city.",
  schema: z.object({ city: z.string() }),
});

const book = tool(
  async ({ city }) => {
    const answer = interrupt({ confirm: `book a trip to ${city}?` });
    return answer === true ? `booked ${city}` : `not booked ${city}`;
  },
  { name: "book", description: "Books a trip, once the user confirms.", schema: z.object({ city: z.string() }) },
);

export const agent = createReactAgent({ llm: new ScriptedModel({}), tools: [weather, book] });

const ReviewState = Annotation.Root({
  topic: Annotation<string>(),
  draft: Annotation<string>(),
  status: Annotation<string>(),
});

const review = new StateGraph(ReviewState)
  .addNode("drafting", (state) => ({ draft: `draft for ${state.topic}` }))
  .addNode("review", (state) => {
    const answer = interrupt({ question: "approve?", draft: state.draft });
    return { status: answer === true ? "approved" : "rejected" };
  })
  .addEdge(START, "drafting")
  .addEdge("drafting", "review")
  .addEdge("review", END)
  .compile();

const NestedState = Annotation.Root({
  topic: Annotation<string>(),
  draft: Annotation<string>(),
  status: Annotation<string>(),
  log: Annotation<string[]>({ reducer: (left, right) => left.concat(right), default: () => [] }),
});

export const nested = new StateGraph(NestedState)
  .addNode("plan", () => ({ log: ["plan"] }))
  .addNode("review", review)
  .addNode("publish", (state) => ({ log: [`publish ${state.status}`] }))
  .addEdge(START, "plan")
  .addEdge("plan", "review")
  .addEdge("review", "publish")
  .addEdge("publish", END)
  .compile();

const MadeState = Annotation.Root({ greeting: Annotation<string>() });

/** A factory: the graph it builds greets whoever the run's config names. */
export function made(config: LangGraphRunnableConfig) {
  const who = config.configurable?.who ?? "nobody";
  return new StateGraph(MadeState)
    .addNode("greet", () => ({ greeting: `${process.env.AGENT_GREETING ?? "no env"}: hello ${who}` }))
    .addEdge(START, "greet")
    .addEdge("greet", END);
}

export const welcomer = new StateGraph(z.object({ greeting: z.string().optional() }), {
  context: z.object({ name: z.string().default("nobody") }),
})
  .addNode("hello", (_state, runtime: LangGraphRunnableConfig<{ name: string }>) => ({
    greeting: `hi ${runtime.context?.name}`,
  }))
  .addEdge(START, "hello")
  .addEdge("hello", END)
  .compile();

const SleepyState = Annotation.Root({ seconds: Annotation<number>(), woke: Annotation<boolean>() });

export const sleepy = new StateGraph(SleepyState)
  .addNode("sleep", async (state) => {
    await new Promise((resolve) => setTimeout(resolve, (state.seconds ?? 0) * 1000));
    return { woke: true };
  })
  .addEdge(START, "sleep")
  .addEdge("sleep", END)
  .compile();
