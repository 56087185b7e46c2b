use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Config, Metadata, Timestamp};

/// A versioned configuration of a registered graph. The live row mirrors the
/// active version's snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Assistant {
    /// Identifier; the system assistant of graph G is uuid5(NAMESPACE, G).
    pub assistant_id: Uuid,
    /// Registered graph this assistant runs.
    pub graph_id: String,
    /// Run configuration.
    #[schema(required = true)]
    #[serde(default)]
    pub config: Config,
    /// Static context handed to runs.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub context: Metadata,
    /// Free-form metadata; `{"created_by":"system"}` on system assistants.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub metadata: Metadata,
    /// Display name (`Untitled` by default, the graph id for system assistants).
    pub name: String,
    /// Optional description.
    #[schema(required = true)]
    #[serde(default)]
    pub description: Option<String>,
    /// Number of the active version.
    pub version: i64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Bumps on update and set-latest.
    pub updated_at: Timestamp,
}

/// An immutable snapshot of an assistant at one version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AssistantVersion {
    /// The assistant this version belongs to.
    pub assistant_id: Uuid,
    /// Version number, starting at 1.
    pub version: i64,
    /// Graph of this version.
    pub graph_id: String,
    /// Run configuration of this version.
    #[schema(required = true)]
    #[serde(default)]
    pub config: Config,
    /// Context of this version.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub context: Metadata,
    /// Metadata of this version.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub metadata: Metadata,
    /// When this version was minted.
    pub created_at: Timestamp,
    /// Name of this version.
    pub name: String,
    /// Description of this version.
    #[schema(required = true)]
    #[serde(default)]
    pub description: Option<String>,
}

impl Assistant {
    /// Namespace of the UUID v5 ids of system assistants (one per registered graph).
    pub const SYSTEM_NAMESPACE: Uuid = Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

    /// The id of the system assistant of `graph_id`.
    pub fn system_id(graph_id: &str) -> Uuid {
        Uuid::new_v5(&Self::SYSTEM_NAMESPACE, graph_id.as_bytes())
    }

    /// This assistant's snapshot at its current version.
    pub fn snapshot(&self) -> AssistantVersion {
        AssistantVersion {
            assistant_id: self.assistant_id,
            version: self.version,
            graph_id: self.graph_id.clone(),
            config: self.config.clone(),
            context: self.context.clone(),
            metadata: self.metadata.clone(),
            created_at: self.updated_at,
            name: self.name.clone(),
            description: self.description.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_assistant_id_matches_the_reference_server() {
        let expected: Uuid = "fe096781-5601-53d2-b2f6-0d3403f7e9ca".parse().unwrap();
        assert_eq!(Assistant::system_id("agent"), expected);
    }
}
