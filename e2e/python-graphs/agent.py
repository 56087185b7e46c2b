"""Graphs of the Python bridge's own end-to-end tests (e2e/python/test_python_graphs.py).

`agent` is LangGraph's prebuilt ReAct agent around a scripted chat model (no network):
  "weather in <city>" -> calls the `weather` tool, then answers in streamed tokens;
  "book <city>"       -> calls the `book` tool, which asks for confirmation with interrupt();
  "explode"           -> the model raises.
`nested` runs a compiled subgraph as its node `review`; the subgraph interrupts.
`made` is built by a factory that reads the run's config.
`sleepy` waits `seconds` (asyncio) before it answers.
`greeter` greets the run's context (`context_schema`).
"""

from __future__ import annotations

import asyncio
import operator
import os
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict


class ScriptedModel(BaseChatModel):
    """Answers from the conversation so far, deterministically, streaming by word."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Done: {last.content}")
        text = str(last.content)
        if text == "explode":
            raise ValueError("the model exploded")
        for verb, name in (("weather in ", "weather"), ("book ", "book")):
            if text.startswith(verb):
                city = text[len(verb):]
                return AIMessage(
                    content="",
                    tool_calls=[{"name": name, "args": {"city": city}, "id": f"call-{name}-{city}"}],
                )
        return AIMessage(content=f"You said {text}")

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        reply = self._reply(messages)
        if reply.tool_calls:
            chunk = AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {"name": c["name"], "args": '{"city": "%s"}' % c["args"]["city"], "id": c["id"], "index": 0}
                    for c in reply.tool_calls
                ],
            )
            yield ChatGenerationChunk(message=chunk)
            return
        words = str(reply.content).split(" ")
        for i, word in enumerate(words):
            token = word if i == 0 else f" {word}"
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def book(city: str) -> str:
    """Books a trip, once the user confirms."""
    answer = interrupt({"confirm": f"book a trip to {city}?"})
    return f"booked {city}" if answer is True else f"not booked {city}"


agent = create_react_agent(ScriptedModel(), [weather, book])


class ReviewState(TypedDict, total=False):
    topic: str
    draft: str
    status: str


def draft(state: ReviewState) -> dict:
    return {"draft": f"draft for {state.get('topic')}"}


def review(state: ReviewState) -> dict:
    answer = interrupt({"question": "approve?", "draft": state.get("draft")})
    return {"status": "approved" if answer is True else "rejected"}


_review = StateGraph(ReviewState)
_review.add_node("draft", draft)
_review.add_node("review", review)
_review.add_edge(START, "draft")
_review.add_edge("draft", "review")
_review.add_edge("review", END)


class NestedState(TypedDict, total=False):
    topic: str
    draft: str
    status: str
    log: Annotated[list, operator.add]


def plan(state: NestedState) -> dict:
    return {"log": ["plan"]}


def publish(state: NestedState) -> dict:
    return {"log": [f"publish {state.get('status')}"]}


_nested = StateGraph(NestedState)
_nested.add_node("plan", plan)
_nested.add_node("review", _review.compile())
_nested.add_node("publish", publish)
_nested.add_edge(START, "plan")
_nested.add_edge("plan", "review")
_nested.add_edge("review", "publish")
_nested.add_edge("publish", END)
nested = _nested.compile()


class MadeState(TypedDict, total=False):
    greeting: str


def made(config: dict) -> StateGraph:
    """A factory: the graph it builds greets whoever the run's config names."""
    who = config.get("configurable", {}).get("who", "nobody")

    def greet(state: MadeState) -> dict:
        return {"greeting": f"{os.environ.get('AGENT_GREETING', 'no env')}: hello {who}"}

    builder = StateGraph(MadeState)
    builder.add_node("greet", greet)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", END)
    return builder


class SleepyState(TypedDict, total=False):
    seconds: float
    woke: bool


async def sleep(state: SleepyState) -> dict:
    await asyncio.sleep(state.get("seconds") or 0)
    return {"woke": True}


_sleepy = StateGraph(SleepyState)
_sleepy.add_node("sleep", sleep)
_sleepy.add_edge(START, "sleep")
_sleepy.add_edge("sleep", END)
sleepy = _sleepy.compile()


@dataclass
class Who:
    name: str = "nobody"


def hello(state: MadeState, runtime: Runtime[Who]) -> dict:
    return {"greeting": f"hi {runtime.context.name}"}


_greeter = StateGraph(MadeState, context_schema=Who)
_greeter.add_node("hello", hello)
_greeter.add_edge(START, "hello")
_greeter.add_edge("hello", END)
greeter = _greeter.compile()
