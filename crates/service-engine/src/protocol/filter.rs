//! Which events a stream or subscription carries: channels, namespace subtrees, depth.

use serde_json::Value;
use service_types::{EventStreamRequest, ProtocolEvent};

/// The fixed channels; `custom:<name>` is the one open-ended form.
const CHANNELS: [&str; 9] = [
    "values",
    "updates",
    "messages",
    "tools",
    "lifecycle",
    "input",
    "tasks",
    "custom",
    "checkpoints",
];

/// A validated event filter.
#[derive(Clone, Debug, PartialEq)]
pub struct EventFilter {
    channels: Vec<String>,
    namespaces: Option<Vec<Vec<String>>>,
    depth: Option<u32>,
}

impl EventFilter {
    /// The filter of a request; the error names the channels no server sends.
    pub fn new(request: &EventStreamRequest) -> Result<Self, String> {
        if request.channels.is_empty() {
            return Err("channels is required and must be a non-empty array".into());
        }
        let unknown: Vec<&str> = request
            .channels
            .iter()
            .map(String::as_str)
            .filter(|channel| !is_channel(channel))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "channels contains unsupported entries: {}. Allowed: values, updates, \
                 messages, tools, custom, lifecycle, input, tasks, checkpoints, or any \
                 `custom:<name>`.",
                unknown.join(", ")
            ));
        }
        Ok(Self {
            channels: request.channels.clone(),
            namespaces: request.namespaces.clone().filter(|list| !list.is_empty()),
            depth: request.depth,
        })
    }

    /// True when the event is on one of the channels and within the namespaces.
    pub fn matches(&self, event: &ProtocolEvent) -> bool {
        let wanted = |channel: &str| self.channels.iter().any(|c| c == channel);
        let on_channel = match event.method.as_str() {
            "input.requested" => wanted("input"),
            "custom" => {
                let name = event.params.data.get("name").and_then(Value::as_str);
                wanted("custom") || name.is_some_and(|name| wanted(&format!("custom:{name}")))
            }
            method => wanted(method),
        };
        on_channel && self.within(&event.params.namespace)
    }

    fn within(&self, namespace: &[String]) -> bool {
        let Some(prefixes) = &self.namespaces else {
            return true;
        };
        prefixes.iter().any(|prefix| {
            is_prefix(namespace, prefix)
                && self
                    .depth
                    .is_none_or(|depth| namespace.len() - prefix.len() <= depth as usize)
        })
    }
}

fn is_channel(channel: &str) -> bool {
    CHANNELS.contains(&channel)
        || channel
            .strip_prefix("custom:")
            .is_some_and(|name| !name.is_empty())
}

/// True when `namespace` starts with `prefix`; a prefix segment without `:` also
/// matches a segment naming that node with any task id.
fn is_prefix(namespace: &[String], prefix: &[String]) -> bool {
    prefix.len() <= namespace.len()
        && prefix.iter().zip(namespace).all(|(wanted, segment)| {
            wanted == segment
                || (!wanted.contains(':') && segment.split(':').next() == Some(wanted.as_str()))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_types::{EventParams, EventType};

    use super::*;

    fn event(method: &str, namespace: &[&str], data: Value) -> ProtocolEvent {
        ProtocolEvent {
            kind: EventType::Event,
            event_id: "1-0".into(),
            seq: 1,
            method: method.into(),
            params: EventParams {
                namespace: namespace.iter().map(|s| (*s).to_owned()).collect(),
                timestamp: 0,
                data,
                node: None,
            },
        }
    }

    fn filter(body: Value) -> Result<EventFilter, String> {
        EventFilter::new(&serde_json::from_value(body).unwrap())
    }

    #[test]
    fn channels_are_required_and_known() {
        assert!(filter(json!({"channels": []})).is_err());
        let error = filter(json!({"channels": ["values", "debug"]})).unwrap_err();
        assert!(error.contains("debug"), "{error}");
        assert!(filter(json!({"channels": ["custom:"]})).is_err());
        assert!(filter(json!({"channels": ["custom:progress", "checkpoints"]})).is_ok());
    }

    #[test]
    fn input_requests_travel_on_the_input_channel_and_custom_names_narrow() {
        let input = filter(json!({"channels": ["input"]})).unwrap();
        assert!(input.matches(&event("input.requested", &[], json!({}))));
        assert!(!input.matches(&event("values", &[], json!({}))));
        let named = filter(json!({"channels": ["custom:progress"]})).unwrap();
        assert!(named.matches(&event("custom", &[], json!({"name": "progress"}))));
        assert!(!named.matches(&event("custom", &[], json!({"payload": 1}))));
        let custom = filter(json!({"channels": ["custom"]})).unwrap();
        assert!(custom.matches(&event("custom", &[], json!({"name": "progress"}))));
    }

    #[test]
    fn namespaces_select_subtrees_down_to_depth() {
        let root_only =
            filter(json!({"channels": ["values"], "namespaces": [[]], "depth": 0})).unwrap();
        assert!(root_only.matches(&event("values", &[], json!({}))));
        assert!(!root_only.matches(&event("values", &["review:1"], json!({}))));
        let review = filter(json!({"channels": ["values"], "namespaces": [["review"]]})).unwrap();
        assert!(review.matches(&event("values", &["review:1", "inner:2"], json!({}))));
        assert!(!review.matches(&event("values", &["plan:1"], json!({}))));
        let exact = filter(json!({"channels": ["values"], "namespaces": [["review:2"]]})).unwrap();
        assert!(!exact.matches(&event("values", &["review:1"], json!({}))));
    }
}
