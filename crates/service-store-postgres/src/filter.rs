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

/// Longest field name and value text (bytes) `store_item_fields` keeps (migration 0012).
const FIELD_BYTES: usize = 200;

/// The first equality condition of `filter` whose items `store_item_fields` holds
/// (migration 0012), by its position, with its key and value: a key of at most
/// [`FIELD_BYTES`] bytes and a scalar whose JSON text in PostgreSQL is at most as long
/// (a number written without an exponent, so its text is its digits). Every item whose
/// field equals it then has its row there.
pub(crate) fn indexed_equality(filter: &StoreFilter) -> Option<(usize, String, Value)> {
    filter
        .conditions()
        .iter()
        .enumerate()
        .find_map(|(position, condition)| {
            let Operand::Scalar(operand) = &condition.operand else {
                return None;
            };
            let kept = match operand {
                Value::Null | Value::Bool(_) => true,
                Value::Number(number) => {
                    let text = number.to_string();
                    text.len() <= 40 && !text.contains(['e', 'E'])
                }
                Value::String(text) => json_text_bytes(text) <= FIELD_BYTES,
                Value::Array(_) | Value::Object(_) => false,
            };
            (condition.op == FilterOp::Eq && kept && condition.key.len() <= FIELD_BYTES)
                .then(|| (position, condition.key.clone(), operand.clone()))
        })
}

/// The length of a string's JSON text as PostgreSQL writes it (`escape_json`).
fn json_text_bytes(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
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
///
/// `walked`: the position of the condition a search answers by walking
/// `store_item_fields` ([`indexed_equality`]), which the rows it reads meet already; it
/// is left out, and so are the `@>` tests: the planner is offered no GIN path, nor a
/// condition it would count twice, either of which made it sort every item with the
/// value instead of stopping at the page.
pub(crate) fn store_filter(
    sql: &mut Sql,
    column: &str,
    filter: &StoreFilter,
    walked: Option<usize>,
) -> Vec<String> {
    filter
        .conditions()
        .iter()
        .enumerate()
        .filter(|(position, _)| Some(*position) != walked)
        .map(|(_, condition)| one_condition(sql, column, condition, walked.is_none()))
        .collect()
}

fn one_condition(sql: &mut Sql, column: &str, condition: &Condition, containment: bool) -> String {
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
            if !containment {
                let value = sql.bind(operand.clone());
                return format!("{field} = {value}::jsonb");
            }
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
