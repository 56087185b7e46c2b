use std::sync::Mutex;

use uuid::Uuid;

static LAST: Mutex<u128> = Mutex::new(0);

/// A new checkpoint id: UUID v7 text, strictly greater than every id minted before
/// in this process, so ids sort in write order.
pub fn new_checkpoint_id() -> String {
    let fresh = Uuid::now_v7().as_u128();
    // A poisoned lock still holds a valid last id.
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Within one millisecond v7's random bits need not increase: step past the last.
    let next = if fresh > *last { fresh } else { *last + 1 };
    *last = next;
    Uuid::from_u128(next).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_increase_strictly_as_text() {
        let ids: Vec<String> = (0..1000).map(|_| new_checkpoint_id()).collect();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
