//! Sort keys and ties: every search orders by its key, then by the row id, both in the
//! requested direction, so pages never overlap or skip rows with equal keys.

use std::cmp::Ordering;

use service_types::{SortOrder, Timestamp};
use uuid::Uuid;

/// A field rows of type `Row` can be sorted by: the value a row sorts by.
pub trait SortField<Row> {
    /// The value `row` sorts by.
    fn key(self, row: &Row) -> SortKey;
}

/// A value a row is sorted by. Variants are only compared within one sort field.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    /// Text, compared bytewise (drivers use a binary collation for these columns).
    Text(String),
    /// An instant.
    Time(Timestamp),
    /// An optional instant; absent sorts after every present one (SQL's NULLS LAST
    /// ascending, NULLS FIRST descending).
    MaybeTime(NullsLast<Timestamp>),
    /// An id.
    Id(Uuid),
    /// An optional id; absent sorts last ascending.
    MaybeId(NullsLast<Uuid>),
}

/// An optional value ordered with absent values largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NullsLast<T>(bool, Option<T>);

impl<T> From<Option<T>> for NullsLast<T> {
    fn from(value: Option<T>) -> Self {
        Self(value.is_none(), value)
    }
}

impl From<Option<Timestamp>> for SortKey {
    fn from(at: Option<Timestamp>) -> Self {
        Self::MaybeTime(at.into())
    }
}

impl From<Option<Uuid>> for SortKey {
    fn from(id: Option<Uuid>) -> Self {
        Self::MaybeId(id.into())
    }
}

/// Compares two rows by (key, id) in `order`.
pub fn compare_rows(a: (&SortKey, Uuid), b: (&SortKey, Uuid), order: SortOrder) -> Ordering {
    let ascending = a.0.cmp(b.0).then_with(|| a.1.cmp(&b.1));
    match order {
        SortOrder::Asc => ascending,
        SortOrder::Desc => ascending.reverse(),
    }
}

/// Sorts rows by `key` (which yields the sort value and the row id) in `order`.
pub fn sort_rows<T>(rows: &mut [T], order: SortOrder, key: impl Fn(&T) -> (SortKey, Uuid)) {
    rows.sort_by_cached_key(|row| {
        let (value, id) = key(row);
        Directed(value, id, order)
    });
}

/// A sort value with the direction folded in, for `sort_by_cached_key`.
#[derive(PartialEq, Eq)]
struct Directed(SortKey, Uuid, SortOrder);

impl PartialOrd for Directed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Directed {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_rows((&self.0, self.1), (&other.0, other.1), self.2)
    }
}
