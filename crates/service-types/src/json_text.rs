//! JSON kept as text in long-lived memory. A parsed `Value` costs several times its
//! text in allocations (every object is a B-tree node with room for eleven entries),
//! so records that sit idle, such as finished runs' options and old checkpoints, are
//! kept as text and parsed when read.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A serialized JSON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonText(Box<str>);

impl JsonText {
    /// Serializes `value`. Values whose keys are all strings (every `Value` and every
    /// derived type of this crate) cannot fail to serialize.
    pub fn new(value: &impl Serialize) -> Self {
        Self(
            serde_json::to_string(value)
                .expect("JSON values serialize")
                .into_boxed_str(),
        )
    }

    /// Parses the text back. Nesting is not limited: the document was accepted once,
    /// and what a request could nest plus the levels a checkpoint wraps it in would
    /// otherwise trip serde_json's default depth limit of 128.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(&self.0);
        deserializer.disable_recursion_limit();
        let value = T::deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(value)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn values_round_trip_exactly() {
        let value = json!({"a": [1, -2, 1.5, 1e300, u64::MAX, null, true], "b": {"c": "é\n"}});
        assert_eq!(JsonText::new(&value).parse::<Value>().unwrap(), value);
    }

    #[test]
    fn nesting_beyond_serde_json_default_limit_reads_back() {
        let mut value = json!("leaf");
        for _ in 0..200 {
            value = json!({ "inner": value });
        }
        let text = JsonText::new(&value);
        assert!(serde_json::from_str::<Value>(text.as_str()).is_err());
        assert_eq!(text.parse::<Value>().unwrap(), value);
    }
}
