use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph, message_text};

/// The action `review` asks a human about.
const ACTION: &str = "publish";

/// The topic: the `topic` key, else the last message's text (a chat front end sends
/// only messages).
fn topic(state: &Value) -> String {
    match &state["topic"] {
        Value::String(topic) => topic.clone(),
        Value::Null => state["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .map(message_text)
            .unwrap_or_else(|| "None".to_owned()),
        other => other.to_string(),
    }
}

/// The interrupt: `question` and `draft`, and the same ask in the shape of LangChain's
/// human-in-the-loop middleware (`action_requests`, `review_configs`), which Agent
/// Chat UI renders and answers with `{"decisions": [...]}`.
fn review_request(draft: &Value) -> Value {
    json!({
        "question": "approve?",
        "draft": draft,
        "action_requests": [{
            "name": ACTION,
            "args": {"draft": draft},
            "description": "Publish this draft?",
        }],
        "review_configs": [{
            "action_name": ACTION,
            "allowed_decisions": ["approve", "edit", "reject"],
        }],
    })
}

/// How a resume value decides: `true` or an `approve` decision approves the draft, an
/// `edit` decision approves its edited draft, anything else rejects it.
fn decide(answer: &Value, draft: &Value) -> (&'static str, Value) {
    if answer == &Value::Bool(true) {
        return ("approved", draft.clone());
    }
    let decision = &answer["decisions"][0];
    match decision["type"].as_str() {
        Some("approve") => ("approved", draft.clone()),
        Some("edit") => match &decision["edited_action"]["args"]["draft"] {
            Value::Null => ("approved", draft.clone()),
            edited => ("approved", edited.clone()),
        },
        _ => ("rejected", draft.clone()),
    }
}

/// `approval`: `draft` writes a draft, `review` interrupts for approval and answers
/// with the outcome in `status` and an AI message.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("approval")
        .channel("topic", Reducer::LastValue, json!({"type": "string"}))
        .channel("draft", Reducer::LastValue, json!({"type": "string"}))
        .channel("status", Reducer::LastValue, json!({"type": "string"}))
        .channel(
            "messages",
            Reducer::MergeMessages,
            json!({"type": "array", "items": {}}),
        )
        .node("draft", |state, _ctx| async move {
            Ok::<_, NodeError>(json!({"draft": format!("draft for {}", topic(&state))}))
        })
        .node("review", |state, ctx| async move {
            let answer = ctx.interrupt(review_request(&state["draft"]))?;
            let (status, draft) = decide(&answer, &state["draft"]);
            let reply = format!("{status}: {}", message_text(&json!({"content": draft})));
            let mut update = json!({
                "status": status,
                "messages": [{"type": "ai", "content": reply}],
            });
            if draft != state["draft"] {
                update["draft"] = draft;
            }
            Ok::<_, NodeError>(update)
        })
        .edge(START, "draft")
        .edge("draft", "review")
        .edge("review", END)
        .compile(checkpointer)
}
