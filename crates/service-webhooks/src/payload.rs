//! The payload cap: a callback body over `max_payload_bytes` has its `values`, then
//! its `interrupts`, replaced by a marker inside the signed body.

use serde_json::{Value, json};
use service_types::Metadata;

/// Cuts `payload` to `max_bytes` where it can; true when anything was cut. The rest
/// of the body (the run's own fields) is kept even if still over the cap.
pub fn cap(payload: &mut Metadata, max_bytes: usize) -> bool {
    let mut size = encoded_len(payload);
    let mut cut = false;
    for field in ["values", "interrupts"] {
        if size <= max_bytes {
            break;
        }
        let Some(value) = payload.get_mut(field) else {
            continue;
        };
        let original_bytes = encoded_len(value);
        *value = json!({"__truncated__": true, "original_bytes": original_bytes});
        cut = true;
        size = encoded_len(payload);
    }
    cut
}

fn encoded_len(value: &(impl serde::Serialize + ?Sized)) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// Whether a body field was replaced by the truncation marker.
pub fn is_truncation_marker(value: &Value) -> bool {
    value.get("__truncated__") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(values: usize, interrupts: usize) -> Metadata {
        let mut body = Metadata::new();
        body.insert("run_id".into(), json!("r1"));
        body.insert("values".into(), json!({"text": "v".repeat(values)}));
        body.insert(
            "interrupts".into(),
            json!({"t": [{"id": "i", "value": "i".repeat(interrupts)}]}),
        );
        body
    }

    #[test]
    fn a_body_under_the_cap_is_untouched() {
        let mut small = body(10, 10);
        let before = small.clone();
        assert!(!cap(&mut small, 1024));
        assert_eq!(small, before);
    }

    #[test]
    fn values_go_first_then_interrupts() {
        let mut big_values = body(5000, 10);
        assert!(cap(&mut big_values, 1024));
        assert!(is_truncation_marker(&big_values["values"]));
        assert_eq!(big_values["values"]["original_bytes"], json!(5000 + 11));
        assert!(!is_truncation_marker(&big_values["interrupts"]));
        assert!(serde_json::to_vec(&big_values).unwrap().len() <= 1024);

        let mut both = body(5000, 5000);
        assert!(cap(&mut both, 1024));
        assert!(is_truncation_marker(&both["values"]));
        assert!(is_truncation_marker(&both["interrupts"]));
        assert_eq!(both["run_id"], json!("r1"));
    }
}
