use serde::{Deserialize, Serialize};

use crate::{Metadata, Timestamp};

/// A long-term store item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Item {
    /// Namespace path.
    pub namespace: Vec<String>,
    /// Key within the namespace.
    pub key: String,
    /// The stored object.
    #[schema(value_type = Object)]
    pub value: Metadata,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last write time.
    pub updated_at: Timestamp,
}

/// A store search result; `score` is null unless the search was semantic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchItem {
    /// The item.
    #[serde(flatten)]
    pub item: Item,
    /// Similarity score of a semantic search.
    #[schema(required = true)]
    pub score: Option<f64>,
}
