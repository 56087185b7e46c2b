//! A namespace's item vectors in one contiguous buffer. A semantic search reads every
//! candidate vector; kept apart in their own allocations they cost a cache miss each
//! (the scan was bound by memory latency), side by side the hardware streams them.

use service_store::semantic::{dot, similarity_from_parts};

/// Fixed-size slots of one dimensionality (the index's: every vector is checked
/// against it before it gets here); a freed slot is reused by the next insert.
#[derive(Debug, Default)]
pub(crate) struct VectorArena {
    dims: usize,
    data: Vec<f32>,
    /// Each slot's squared norm, computed once.
    norms: Vec<f32>,
    free: Vec<usize>,
}

/// A search's query vector with its squared norm.
pub(crate) struct Query<'a> {
    vector: &'a [f32],
    norm_squared: f32,
}

impl<'a> Query<'a> {
    pub(crate) fn new(vector: &'a [f32]) -> Self {
        Self {
            vector,
            norm_squared: dot(vector, vector),
        }
    }
}

impl VectorArena {
    /// Stores `vector`; its slot.
    pub(crate) fn insert(&mut self, vector: &[f32]) -> usize {
        if self.norms.is_empty() {
            self.dims = vector.len();
        }
        debug_assert_eq!(
            vector.len(),
            self.dims,
            "vectors are checked against the index's dims"
        );
        let norm = dot(vector, vector);
        match self.free.pop() {
            Some(slot) => {
                self.data[slot * self.dims..(slot + 1) * self.dims].copy_from_slice(vector);
                self.norms[slot] = norm;
                slot
            }
            None => {
                self.data.extend_from_slice(vector);
                self.norms.push(norm);
                self.norms.len() - 1
            }
        }
    }

    /// Frees `slot` for reuse.
    pub(crate) fn remove(&mut self, slot: usize) {
        self.free.push(slot);
    }

    /// The similarity of one slot to `query`.
    pub(crate) fn similarity(&self, slot: usize, query: &Query) -> f64 {
        let vector = &self.data[slot * self.dims..(slot + 1) * self.dims];
        similarity_from_parts(
            dot(vector, query.vector),
            self.norms[slot],
            query.norm_squared,
        )
    }

    /// Every slot's similarity to `query` (freed slots included, unread), in one
    /// sequential pass over the buffer.
    pub(crate) fn similarities(&self, query: &Query) -> Vec<f64> {
        if self.dims == 0 {
            return Vec::new();
        }
        self.data
            .chunks_exact(self.dims)
            .zip(&self.norms)
            .map(|(vector, norm)| {
                similarity_from_parts(dot(vector, query.vector), *norm, query.norm_squared)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use service_store::semantic::cosine_similarity;

    #[test]
    fn slots_score_as_cosine_similarity_and_freed_slots_are_reused() {
        let mut arena = VectorArena::default();
        let a = arena.insert(&[1.0, 0.0, 2.0]);
        let b = arena.insert(&[0.0, 3.0, 0.0]);
        let query = [1.0, 1.0, 1.0];
        let q = Query::new(&query);
        let all = arena.similarities(&q);
        assert_eq!(all.len(), 2);
        assert!((all[a] - cosine_similarity(&[1.0, 0.0, 2.0], &query)).abs() < 1e-9);
        assert!(
            (arena.similarity(b, &q) - cosine_similarity(&[0.0, 3.0, 0.0], &query)).abs() < 1e-9
        );
        arena.remove(a);
        let c = arena.insert(&[2.0, 2.0, 2.0]);
        assert_eq!(c, a, "the freed slot is reused");
        assert!((arena.similarity(c, &q) - 1.0).abs() < 1e-9);
        assert_eq!(arena.similarities(&q).len(), 2, "no slot was added");
    }
}
