//! Protocol v2 commands as both transports decode them (`POST
//! /threads/{id}/commands` and a WebSocket text frame): JSON, the envelope
//! (`ProtocolCommand::from_value`), then the method's params
//! (`service_engine::protocol::command_params`) and what each command reads from them
//! before acting: an assistant id, the answers, a run id, an event filter. A
//! subscription's filter must carry the events its own request names.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use service_engine::protocol::{EventFilter, ProtocolFailure, command_params};
use service_types::{
    AgentTreeParams, EventParams, EventStreamRequest, EventType, InputRespondParams,
    ProtocolCommand, ProtocolEvent, ProtocolResponse, RunStartParams, UnsubscribeParams,
};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let command = match ProtocolCommand::from_value(value) {
        Ok(command) => command,
        Err(answer) => return answered(&answer.with_detail()),
    };
    let outcome = match command.method.as_str() {
        "run.start" => command_params::<RunStartParams>(&command).map(drop),
        "input.respond" => {
            command_params::<InputRespondParams>(&command).map(|params| drop(params.answers()))
        }
        "agent.getTree" => command_params::<AgentTreeParams>(&command).map(|params| {
            if let Some(id) = params.run_id {
                let _ = uuid::Uuid::parse_str(&id);
            }
        }),
        "subscription.unsubscribe" => command_params::<UnsubscribeParams>(&command).map(drop),
        "subscription.subscribe" | "subscription.reconnect" => {
            command_params::<EventStreamRequest>(&command).map(|request| subscribe(&request))
        }
        _ => Ok(()),
    };
    let answer = match outcome {
        Ok(()) => ProtocolResponse::success(command.id, json!({})),
        Err(ProtocolFailure { code, message }) => {
            assert!(!message.is_empty());
            ProtocolResponse::error(Some(command.id), code, message)
        }
    };
    answered(&answer);
});

/// Every answer is written as JSON text.
fn answered(answer: &ProtocolResponse) {
    serde_json::to_string(answer).expect("an answer serializes");
}

fn event(method: &str, namespace: &[String]) -> ProtocolEvent {
    ProtocolEvent {
        kind: EventType::Event,
        event_id: "1-0".into(),
        seq: 1,
        method: method.into(),
        params: EventParams {
            namespace: namespace.to_vec(),
            timestamp: 0,
            data: json!({"name": "x"}),
            node: None,
        },
    }
}

fn subscribe(request: &EventStreamRequest) {
    let Ok(filter) = EventFilter::new(request) else {
        return;
    };
    let roots = [Vec::new()];
    let namespaces = match &request.namespaces {
        Some(list) if !list.is_empty() => list.as_slice(),
        _ => &roots,
    };
    for channel in &request.channels {
        let method = match channel.as_str() {
            "input" => "input.requested",
            custom if custom.starts_with("custom:") => "custom",
            other => other,
        };
        for namespace in namespaces {
            let mut event = event(method, namespace);
            if let Some(name) = channel.strip_prefix("custom:") {
                event.params.data = json!({ "name": name });
            }
            assert!(
                filter.matches(&event),
                "{request:?} leaves out {method} at {namespace:?}"
            );
            // One level deeper: in or out by `depth`, but decided without a panic.
            event.params.namespace.push("child:1".into());
            filter.matches(&event);
        }
    }
}
