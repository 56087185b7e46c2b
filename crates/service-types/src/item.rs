use serde::{Deserialize, Deserializer, Serialize};

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

/// How long a put item lives.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ItemTtl {
    /// `store.ttl.default_ttl`, or never without one: a client's `ttl` absent or
    /// `null` (SPEC: the default applies to puts without their own ttl), a graph's
    /// `put` without `ttl`.
    #[default]
    Default,
    /// Never expires, whatever the default: a graph's `put(ttl=None)`, as LangGraph
    /// reads it. Clients cannot ask for it over HTTP (docs/store.md, "Item lifetime").
    Never,
    /// This many minutes.
    Minutes(f64),
}

impl ItemTtl {
    /// The minutes the item lives, `default_minutes` standing for the default.
    pub fn resolve(self, default_minutes: Option<f64>) -> Option<f64> {
        match self {
            Self::Default => default_minutes,
            Self::Never => None,
            Self::Minutes(minutes) => Some(minutes),
        }
    }
}

/// A client's `ttl`: a number, or absent or `null` for the default.
pub(crate) fn client_ttl<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ItemTtl, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.map_or(ItemTtl::Default, ItemTtl::Minutes))
}
