//! The builder the operations are written with: path parameters from the template,
//! JSON bodies and answers, and the error answer every operation shares.

use axum::http::Method;
use serde_json::{Value, json};

use super::Operation;

/// One operation being described.
pub(super) struct Op {
    method: Method,
    path: &'static str,
    body: serde_json::Map<String, Value>,
    parameters: Vec<Value>,
    responses: serde_json::Map<String, Value>,
}

/// The schema of a path parameter: run, thread, cron and delivery ids are UUIDs;
/// an assistant is named by its UUID or its graph id.
fn path_parameter(name: &str) -> Value {
    let schema = match name {
        "thread_id" | "run_id" | "cron_id" | "delivery_id" => {
            json!({"type": "string", "format": "uuid"})
        }
        _ => json!({"type": "string"}),
    };
    let description = match name {
        "assistant_id" => "The assistant's UUID, or a graph id for its system assistant.",
        "graph_id" => "A graph id of the server's configuration.",
        "namespace" => "A subgraph namespace (`|`-separated).",
        "checkpoint_id" => "A checkpoint id of the thread.",
        "route_name" => "A channel route's name.",
        _ => "",
    };
    json!({"name": name, "in": "path", "required": true, "schema": schema,
        "description": description})
}

pub(super) fn op(method: Method, path: &'static str, tag: &str, summary: &str) -> Op {
    let parameters = path
        .split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(path_parameter)
        .collect();
    let mut body = serde_json::Map::new();
    body.insert("tags".into(), json!([tag]));
    body.insert("summary".into(), json!(summary));
    let id = format!("{} {}", method.as_str().to_ascii_lowercase(), path);
    body.insert("operationId".into(), json!(id));
    Op {
        method,
        path,
        body,
        parameters,
        responses: serde_json::Map::new(),
    }
}

pub(super) fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

impl Op {
    pub(super) fn query(mut self, name: &str, schema: Value, description: &str) -> Self {
        self.parameters
            .push(json!({"name": name, "in": "query", "required": false,
            "schema": schema, "description": description}));
        self
    }

    pub(super) fn flag(self, name: &str, description: &str) -> Self {
        self.query(name, json!({"type": "boolean"}), description)
    }

    pub(super) fn header(mut self, name: &str, description: &str) -> Self {
        self.parameters
            .push(json!({"name": name, "in": "header", "required": false,
            "schema": {"type": "string"}, "description": description}));
        self
    }

    /// A JSON request body; `required` when an absent body is refused.
    pub(super) fn body(mut self, schema: Value, required: bool) -> Self {
        self.body.insert(
            "requestBody".into(),
            json!({"required": required, "content": json_content(schema)}),
        );
        self
    }

    pub(super) fn reply(mut self, status: &str, description: &str, content: Option<Value>) -> Self {
        let mut response = json!({"description": description});
        if let Some(content) = content {
            response["content"] = content;
        }
        self.responses.insert(status.into(), response);
        self
    }

    pub(super) fn ok(self, schema: Value) -> Self {
        self.reply("200", "Success", Some(json_content(schema)))
    }

    pub(super) fn empty(self, status: &str, description: &str) -> Self {
        self.reply(status, description, None)
    }

    /// A `text/event-stream` answer: `event:`/`data:` frames as the streaming
    /// contract names them.
    pub(super) fn stream(self, description: &str) -> Self {
        self.reply(
            "200",
            description,
            Some(json!({"text/event-stream": {"schema": {"type": "string"}}})),
        )
    }

    /// Error answers are the one error body unless the route said otherwise.
    pub(super) fn done(mut self, error: &Value) -> Operation {
        self.responses.entry("default").or_insert_with(
            || json!({"description": "An error", "content": json_content(error.clone())}),
        );
        if !self.parameters.is_empty() {
            self.body
                .insert("parameters".into(), self.parameters.into());
        }
        self.body.insert("responses".into(), self.responses.into());
        Operation {
            method: self.method,
            path: self.path,
            body: self.body.into(),
        }
    }
}

pub(super) fn string() -> Value {
    json!({"type": "string"})
}

pub(super) fn integer() -> Value {
    json!({"type": "integer"})
}

pub(super) fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

pub(super) fn object() -> Value {
    json!({"type": "object"})
}

pub(super) fn any() -> Value {
    json!({})
}
