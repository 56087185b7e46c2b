//! Where an engine's graphs come from. The engine owns the checkpointer and builds its
//! graphs with it, so the checkpoints the graphs write and the ones thread copy, prune
//! and rollback act on are in one saver.

use std::sync::Arc;

use crate::{Checkpointer, GraphError, GraphResolver};

/// Builds the graphs an engine serves, once, from the checkpointer the engine owns.
///
/// Any `FnOnce(Arc<dyn Checkpointer>) -> Result<R, GraphError>` with `R: GraphResolver`
/// is a source, so a function such as
/// `fn graphs(saver: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError>` is
/// handed over as it is (a closure names its argument's type:
/// `|saver: Arc<dyn Checkpointer>| ...`). Implement the trait for a source that is
/// more than a function, such as one that wraps another.
pub trait GraphSource: Send {
    /// Builds the resolver whose graphs keep their checkpoints in `checkpointer`.
    fn build(
        self: Box<Self>,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Arc<dyn GraphResolver>, GraphError>;
}

impl<F, R> GraphSource for F
where
    F: FnOnce(Arc<dyn Checkpointer>) -> Result<R, GraphError> + Send,
    R: GraphResolver + 'static,
{
    fn build(
        self: Box<Self>,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Arc<dyn GraphResolver>, GraphError> {
        Ok(Arc::new((*self)(checkpointer)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GraphRegistry, InMemorySaver};

    fn registry(_saver: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
        Ok(GraphRegistry::new())
    }

    #[test]
    fn a_function_and_a_closure_are_sources() {
        let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
        let function: Box<dyn GraphSource> = Box::new(registry);
        assert!(
            function
                .build(saver.clone())
                .unwrap()
                .graph_ids()
                .is_empty()
        );
        let failing: Box<dyn GraphSource> = Box::new(|_: Arc<dyn Checkpointer>| {
            Err::<GraphRegistry, _>(GraphError::NotFound("no graphs".into()))
        });
        assert!(failing.build(saver).is_err());
    }
}
