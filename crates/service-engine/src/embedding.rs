//! Embedding for the semantic index, shared by the items calls and the graphs' store
//! handle: always before the store is called, so never inside a database transaction.

use std::sync::atomic::{AtomicBool, Ordering};

use service_store::{FieldVector, IndexFields, SemanticIndex, StoreError};
use service_types::Metadata;

use crate::{EngineError, ErrorKind};

/// The vectors of a put, embedded before the store is called (so never inside a
/// database transaction); none without an index, where `index` is ignored as on the
/// peers. The graphs' store handle embeds through it too.
pub(crate) async fn embed(
    index: Option<&SemanticIndex>,
    value: &Metadata,
    which: &IndexFields,
) -> Result<Vec<FieldVector>, StoreError> {
    match index {
        Some(index) => index.vectors(value, which).await,
        None => Ok(Vec::new()),
    }
}

/// An embedder's failure as a client sees it: its cause in the message, 422 when the
/// input was refused, else 503 (`embedding_failed`); nothing was written.
pub(crate) fn embedding_failed(error: StoreError) -> EngineError {
    let kind = match error.kind {
        service_store::ErrorKind::Invalid => ErrorKind::Unprocessable,
        _ => ErrorKind::Unavailable,
    };
    let mut failed = EngineError::new(kind, error.message.clone());
    failed.code = Some("embedding_failed");
    failed.with_source(error)
}

/// A `query` on a store without an index is ignored, as on the peers; said once.
pub(crate) fn ignored_query() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "a store search carried a query but store.index is not configured: results come in recency order with score null"
        );
    }
}
