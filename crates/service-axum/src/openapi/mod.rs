//! The OpenAPI 3.1 document of every route (`GET /openapi.json`) and a page that
//! renders it (`GET /docs`), both served without credentials as the reference server
//! serves them: they describe the API, not anyone's data.
//!
//! Bodies are the wire types' own schemas (`utoipa::ToSchema` derived in
//! service-types); [`operations`] says, per route of the table, which of them each
//! route reads and answers. A route the table serves without an operation here fails
//! the `every_route_has_an_operation` test.

mod op;
mod operations;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

/// Where the document is served.
pub const OPENAPI_PATH: &str = "/openapi.json";
/// Where the page that renders it is served.
pub const DOCS_PATH: &str = "/docs";

const DOCS_PAGE: &str = include_str!("docs.html");

/// The schemas the operations name, collected as `components.schemas`.
#[derive(Default)]
pub(crate) struct Schemas(BTreeMap<String, Value>);

impl Schemas {
    /// A `$ref` to `T`'s schema, which is added with every schema it refers to.
    pub(crate) fn of<T: ToSchema>(&mut self) -> Value {
        let mut found = Vec::new();
        T::schemas(&mut found);
        found.push((T::name().into_owned(), T::schema()));
        for (name, schema) in found {
            self.0.entry(name).or_insert_with(|| to_json(&schema));
        }
        reference(&T::name())
    }

    /// A `$ref` to a copy of `T`'s schema with no field required: what a route
    /// answers when the request's `select` names the fields to keep.
    pub(crate) fn selected<T: ToSchema>(&mut self) -> Value {
        self.of::<T>();
        let name = format!("{}Selection", T::name());
        let mut schema = self.0[T::name().as_ref()].clone();
        if let Some(object) = schema.as_object_mut() {
            object.remove("required");
            object.insert(
                "description".into(),
                json!(format!(
                    "The fields of {} the request's `select` names (all without it).",
                    T::name()
                )),
            );
        }
        self.0.insert(name.clone(), schema);
        reference(&name)
    }

    /// A named schema written here, for bodies no wire type describes.
    pub(crate) fn named(&mut self, name: &str, schema: Value) -> Value {
        self.0.insert(name.to_owned(), schema);
        reference(name)
    }
}

fn to_json(schema: &RefOr<Schema>) -> Value {
    serde_json::to_value(schema).expect("schemas serialize")
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// One operation: a route of the table with what it reads and answers.
pub(crate) struct Operation {
    pub(crate) method: Method,
    pub(crate) path: &'static str,
    pub(crate) body: Value,
}

/// The document for the routes `served` (method and path template).
pub(crate) fn document(served: &[(Method, &str)]) -> Value {
    let mut schemas = Schemas::default();
    let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for operation in operations::all(&mut schemas) {
        let is_served = served
            .iter()
            .any(|(method, path)| *method == operation.method && *path == operation.path);
        if is_served {
            paths.entry(operation.path).or_default().insert(
                operation.method.as_str().to_ascii_lowercase(),
                operation.body,
            );
        }
    }
    link_creations(&mut paths);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Agent server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The LangGraph Platform API this server speaks: assistants, \
                threads, runs, crons, the store, and their streams. Under an \
                authenticator every route but the public ones needs credentials.",
        },
        "paths": paths,
        "components": { "schemas": schemas.0 },
    })
}

/// The ids each resource's answer carries, by schema name.
const IDS: [(&str, &[&str]); 4] = [
    ("Thread", &["thread_id"]),
    ("Assistant", &["assistant_id"]),
    ("Run", &["run_id", "thread_id", "assistant_id"]),
    ("Cron", &["cron_id", "thread_id", "assistant_id"]),
];

/// OpenAPI links from each `POST` that answers one resource to every operation whose
/// path parameters that answer's ids fill: a client (and schemathesis's stateful
/// phase) can follow a creation into the routes of what it created.
fn link_creations(paths: &mut BTreeMap<&str, Map<String, Value>>) {
    let targets: Vec<(String, Vec<String>)> = paths
        .iter()
        .flat_map(|(path, item)| {
            let parameters: Vec<String> = path
                .split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .map(str::to_owned)
                .collect();
            item.values().filter_map(move |operation| {
                let id = operation["operationId"].as_str()?.to_owned();
                (!parameters.is_empty()).then(|| (id, parameters.clone()))
            })
        })
        .collect();
    for item in paths.values_mut() {
        let Some(Value::Object(operation)) = item.get_mut("post") else {
            continue;
        };
        let Some(answer) = operation
            .get_mut("responses")
            .and_then(|responses| responses.get_mut("200"))
        else {
            continue;
        };
        let schema = answer["content"]["application/json"]["schema"]["$ref"].as_str();
        let Some(ids) = schema.and_then(|schema| {
            let name = schema.strip_prefix("#/components/schemas/")?;
            IDS.iter().find(|(resource, _)| *resource == name)
        }) else {
            continue;
        };
        let mut links = Map::new();
        for (target, parameters) in &targets {
            if parameters.iter().all(|name| ids.1.contains(&name.as_str())) {
                let parameters: Map<String, Value> = parameters
                    .iter()
                    .map(|name| (name.clone(), json!(format!("$response.body#/{name}"))))
                    .collect();
                let name: String = target
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                links.insert(
                    name,
                    json!({"operationId": target, "parameters": parameters}),
                );
            }
        }
        if !links.is_empty() {
            answer["links"] = links.into();
        }
    }
}

/// The routes a router serves, as `router_with` builds them from its options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served {
    pub(crate) disable_runs: bool,
    pub(crate) channels: bool,
    pub(crate) metrics: bool,
}

/// The document's JSON for one router, built on first request.
#[derive(Clone)]
pub(crate) struct Document {
    served: Served,
    json: Arc<OnceLock<bytes::Bytes>>,
}

impl Document {
    pub(crate) fn new(served: Served) -> Self {
        Self {
            served,
            json: Arc::default(),
        }
    }

    pub(crate) fn response(&self) -> Response {
        let body = self.json.get_or_init(|| {
            let Served {
                disable_runs,
                channels,
                metrics,
            } = self.served;
            let table = crate::route_table(disable_runs, channels, None, self.clone());
            let mut served: Vec<(Method, &str)> = table
                .into_parts()
                .1
                .into_iter()
                .map(|route| (route.method, route.path))
                .collect();
            if metrics {
                served.push((Method::GET, crate::metrics::METRICS_PATH));
            }
            serde_json::to_vec(&document(&served))
                .expect("the document serializes")
                .into()
        });
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body.clone(),
        )
            .into_response()
    }
}

/// The docs page: one self-contained HTML file that fetches the document next to it.
pub(crate) fn docs_page() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        DOCS_PAGE,
    )
        .into_response()
}
