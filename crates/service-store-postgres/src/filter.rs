//! SQL translations of the shared semantics: store filters (SPEC "Store filter
//! rules") on the `value` JSONB column, and namespace prefix/suffix matching
//! (SPEC "Namespace rules") on the `namespace text[]` / `ns_path` columns. The
//! conformance suite proves they agree with `StoreFilter::matches` and
//! `NamespaceQuery::matches`.

use serde_json::Value;
use service_store::filter::{Condition, FilterOp, Operand, StoreFilter};
use service_store::namespace::{WILDCARD, literal_prefix};
use service_types::Metadata;

use crate::db::Sql;

/// The metadata condition of a containment filter merged with an enforced one
/// (`merge_enforced`'s answer): `metadata @>` one of the alternatives. `Some(None)`:
/// no condition (one empty alternative); `None`: no row matches.
pub(crate) fn metadata_condition(
    sql: &mut Sql,
    alternatives: Vec<Metadata>,
) -> Option<Option<String>> {
    containment_condition(sql, "metadata", alternatives)
}

/// [`metadata_condition`] on another JSONB object column.
pub(crate) fn containment_condition(
    sql: &mut Sql,
    column: &str,
    alternatives: Vec<Metadata>,
) -> Option<Option<String>> {
    if alternatives.is_empty() {
        return None;
    }
    if alternatives.iter().any(Metadata::is_empty) {
        return Some(None);
    }
    let tests: Vec<String> = alternatives
        .into_iter()
        .map(|alternative| {
            let p = sql.bind(Value::Object(alternative));
            format!("{column} @> {p}::jsonb")
        })
        .collect();
    Some(Some(format!("({})", tests.join(" OR "))))
}

/// One SQL condition per filter condition, all on `column` (a JSONB object).
///
/// - `$eq` / bare scalar: the key is present and equal (`jsonb =` compares numbers
///   by value, so `1` equals `1.0`); an absent key gives NULL, i.e. no match. A
///   containment test (`@>`) goes with it so that a GIN index on the column can find
///   the candidates.
/// - `$ne`: `IS DISTINCT FROM`, so an absent key matches and a present JSON null is
///   a value like any other.
/// - `$in` / `$nin`: `= ANY(jsonb[])`, `$nin` negated with absent counting as a match.
/// - ordering operators: only when both sides are numbers (`jsonb_typeof`), so
///   strings, booleans, nulls, containers and absent keys never match.
pub(crate) fn store_filter(sql: &mut Sql, column: &str, filter: &StoreFilter) -> Vec<String> {
    filter
        .conditions()
        .iter()
        .map(|condition| one_condition(sql, column, condition))
        .collect()
}

fn one_condition(sql: &mut Sql, column: &str, condition: &Condition) -> String {
    if condition.op.is_ordering() && !matches!(condition.operand, Operand::Scalar(Value::Number(_)))
    {
        // Ordering operators compare numbers only: a non-number operand never matches.
        return "FALSE".to_owned();
    }
    let key = sql.bind(condition.key.clone());
    let field = format!("({column} -> {key}::text)");
    match (&condition.operand, condition.op) {
        (Operand::Scalar(operand), FilterOp::Eq) => {
            // The containment test is what a GIN index on the column answers; it
            // also holds for a key whose value is an array, which the equality
            // beside it excludes.
            let mut pair = Metadata::new();
            pair.insert(condition.key.clone(), operand.clone());
            let contains = sql.bind(Value::Object(pair));
            let value = sql.bind(operand.clone());
            format!("({column} @> {contains}::jsonb AND {field} = {value}::jsonb)")
        }
        (Operand::Scalar(operand), FilterOp::Ne) => {
            let value = sql.bind(operand.clone());
            format!("{field} IS DISTINCT FROM {value}::jsonb")
        }
        (Operand::Scalar(operand), op) => {
            let value = sql.bind(operand.clone());
            let symbol = match op {
                FilterOp::Gt => ">",
                FilterOp::Gte => ">=",
                FilterOp::Lt => "<",
                _ => "<=",
            };
            format!("(jsonb_typeof({field}) = 'number' AND {field} {symbol} {value}::jsonb)")
        }
        (Operand::List(list), op) => {
            let values = sql.bind(list.clone());
            let found = format!("{field} = ANY({values}::jsonb[])");
            if op == FilterOp::Nin {
                format!("NOT coalesce({found}, false)")
            } else {
                format!("coalesce({found}, false)")
            }
        }
    }
}

/// Conditions selecting namespaces under `prefix` (with `*` wildcards).
///
/// The literal head of the prefix (before the first `*`) becomes a range on
/// `ns_path` (the path joined with '.', labels never contain dots), which the
/// primary key (ns_path, key) serves as an index range scan; the remaining
/// segments are compared element-wise on `namespace`, and a prefix longer than the
/// namespace never matches. Everything runs in SQL.
pub(crate) fn namespace_prefix(sql: &mut Sql, prefix: &[String]) -> Vec<String> {
    let mut conditions = Vec::new();
    if prefix.is_empty() {
        return conditions;
    }
    let literal = literal_prefix(prefix);
    conditions.extend(ns_path_range(sql, prefix, "ns_path"));
    let length = sql.bind(i32::try_from(prefix.len()).unwrap_or(i32::MAX));
    conditions.push(format!("cardinality(namespace) >= {length}"));
    for (index, segment) in prefix.iter().enumerate().skip(literal.len()) {
        if segment != WILDCARD {
            let value = sql.bind(segment.clone());
            conditions.push(format!("namespace[{}] = {value}", index + 1));
        }
    }
    conditions
}

/// The condition on a `column` holding the dotted namespace path that keeps the paths
/// under the prefix's literal head (the segments before its first wildcard), which a
/// btree on that column answers as a range; `None` when the prefix starts with a
/// wildcard.
pub(crate) fn ns_path_range(sql: &mut Sql, prefix: &[String], column: &str) -> Option<String> {
    let literal = literal_prefix(prefix);
    if literal.is_empty() {
        return None;
    }
    let path = literal.join(".");
    let exact = sql.bind(path.clone());
    let low = sql.bind(format!("{path}."));
    let high = sql.bind(format!("{path}/"));
    Some(format!(
        "({column} = {exact} OR ({column} >= {low} AND {column} < {high}))"
    ))
}

/// Conditions selecting namespaces ending with `suffix` (with `*` wildcards).
pub(crate) fn namespace_suffix(sql: &mut Sql, suffix: &[String]) -> Vec<String> {
    let mut conditions = Vec::new();
    if suffix.is_empty() {
        return conditions;
    }
    let length = sql.bind(i32::try_from(suffix.len()).unwrap_or(i32::MAX));
    conditions.push(format!("cardinality(namespace) >= {length}"));
    for (from_end, segment) in suffix.iter().rev().enumerate() {
        if segment != WILDCARD {
            let value = sql.bind(segment.clone());
            conditions.push(format!(
                "namespace[cardinality(namespace) - {from_end}] = {value}"
            ));
        }
    }
    conditions
}
