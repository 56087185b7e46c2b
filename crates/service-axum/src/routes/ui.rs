//! Generative UI, as the LangGraph servers serve it: `POST /ui/{assistant_id}` answers
//! the HTML fragment the SDK's `LoadExternalComponent` puts in a shadow root (the
//! graph's stylesheet and script, whose `onload` renders the named component), and
//! `GET /ui/{graph_id}/{file}` serves those files, without credentials as a
//! `<script src>` sends none.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use service_engine::auth::{Action, Resource};
use service_engine::{Engine, EngineError, ErrorKind};

use crate::auth::{Access, CallerOf};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Path};
use crate::routes::{MountPrefix, Table};

/// The bundled components of each graph with `ui` in langgraph.json: graph id → its
/// files (name, contents).
#[derive(Clone, Debug, Default)]
pub struct UiAssets(BTreeMap<String, Vec<(String, Bytes)>>);

impl UiAssets {
    /// Assets from each graph's files.
    pub fn new(graphs: BTreeMap<String, Vec<(String, Bytes)>>) -> Self {
        Self(graphs)
    }
}

pub(crate) fn routes() -> Table {
    Table::new()
        .post(
            "/ui/{assistant_id}",
            (Resource::Assistants, Action::Read),
            fragment,
        )
        .get("/ui/{graph_id}/{file}", Access::Public, file)
}

/// What the SDK asks for: the component `name`.
#[derive(Deserialize)]
struct ComponentRequest {
    name: String,
}

fn no_ui(id: &str) -> ApiError {
    ApiError(EngineError::not_found(format!(
        "UI not found for graph '{id}'"
    )))
}

async fn fragment(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    ui: Option<Extension<Arc<UiAssets>>>,
    prefix: MountPrefix,
    headers: HeaderMap,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<ComponentRequest>,
) -> ApiResult<Response> {
    let ui = ui.map(|Extension(ui)| ui).unwrap_or_default();
    // The SDK sends the stream's assistant id: a graph id, or an assistant's UUID.
    let graph_id = if ui.0.contains_key(&id) {
        id.clone()
    } else {
        match engine.as_caller(&caller).assistants().get(&id).await {
            Ok(assistant) => assistant.graph_id,
            Err(error) if matches!(error.kind, ErrorKind::NotFound | ErrorKind::Unprocessable) => {
                return Err(no_ui(&id));
            }
            Err(error) => return Err(error.into()),
        }
    };
    let files = ui.0.get(&graph_id).ok_or_else(|| no_ui(&id))?;
    // The fragment lands in the front end's page, another origin: absolute URLs, as
    // the JS server writes them (plain http for a loopback host).
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .filter(|host| !host.contains(['"', '\'', '<', '>', ' ', '/']));
    let origin = match host {
        Some(host) if is_loopback(host) => format!("http://{host}"),
        Some(host) => format!("//{host}"),
        None => String::new(),
    };
    let at = |name: &str| {
        format!(
            "{origin}{}/ui/{}/{}",
            prefix.0,
            segment(&graph_id),
            segment(name)
        )
    };
    let global = graph_id.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let name = escape(&serde_json::Value::String(request.name).to_string());
    let mut html = Vec::new();
    for (file, _) in files.iter().filter(|(file, _)| file.ends_with(".css")) {
        html.push(format!(r#"<link rel="stylesheet" href="{}" />"#, at(file)));
    }
    for (file, _) in files.iter().filter(|(file, _)| file.ends_with(".js")) {
        html.push(format!(
            r#"<script src="{}" onload='__LGUI_{global}.render({name}, "{{{{shadowRootId}}}}")'></script>"#,
            at(file)
        ));
    }
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/html"))],
        html.join("\n"),
    )
        .into_response())
}

async fn file(
    ui: Option<Extension<Arc<UiAssets>>>,
    Path((graph_id, name)): Path<(String, String)>,
) -> ApiResult<Response> {
    let contents = ui
        .as_ref()
        .and_then(|Extension(ui)| ui.0.get(&graph_id))
        .and_then(|files| files.iter().find(|(file, _)| *file == name))
        .map(|(_, contents)| contents.clone())
        .ok_or_else(|| ApiError(EngineError::not_found("File not found")))?;
    let kind = if name.ends_with(".css") {
        "text/css; charset=utf-8"
    } else if name.ends_with(".js") {
        "text/javascript; charset=utf-8"
    } else {
        "application/octet-stream"
    };
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
        contents,
    )
        .into_response())
}

fn is_loopback(host: &str) -> bool {
    ["localhost", "127.0.0.1", "[::1]"].iter().any(|loopback| {
        host == *loopback
            || host
                .strip_prefix(loopback)
                .is_some_and(|port| port.starts_with(':'))
    })
}

/// `text` as one URL path segment.
fn segment(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(byte).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `text` safe inside an HTML attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_segments_cannot_leave_their_attribute() {
        assert_eq!(escape(r#""a'<b>&""#), "&quot;a&#x27;&lt;b&gt;&amp;&quot;");
        assert_eq!(segment("my graph/x"), "my%20graph%2Fx");
        assert!(is_loopback("localhost:2024"));
        assert!(is_loopback("127.0.0.1"));
        assert!(!is_loopback("localhost.example.com"));
    }
}
