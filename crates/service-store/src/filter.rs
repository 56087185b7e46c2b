//! Store search filters (SPEC "Store filter rules" 1-9), parsed once into a typed form
//! a SQL driver can translate and the memory driver evaluates with [`StoreFilter::matches`].

use std::cmp::Ordering;

use serde_json::Value;
use service_types::Metadata;

use crate::containment::{compare_numbers, scalar_equals};
use crate::text::refuse_nul;
use crate::{StoreError, StoreResult};

/// A comparison operator of a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterOp {
    /// Equal (also a bare scalar).
    Eq,
    /// Not equal; an absent key matches.
    Ne,
    /// Greater than (numbers only).
    Gt,
    /// Greater than or equal (numbers only).
    Gte,
    /// Less than (numbers only).
    Lt,
    /// Less than or equal (numbers only).
    Lte,
    /// Equal to one of a list.
    In,
    /// Equal to none of a list; an absent key matches.
    Nin,
}

impl FilterOp {
    /// Parses a `$`-operator name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "$eq" => Self::Eq,
            "$ne" => Self::Ne,
            "$gt" => Self::Gt,
            "$gte" => Self::Gte,
            "$lt" => Self::Lt,
            "$lte" => Self::Lte,
            "$in" => Self::In,
            "$nin" => Self::Nin,
            _ => return None,
        })
    }

    /// True for the ordering operators, which compare numbers only.
    pub fn is_ordering(self) -> bool {
        matches!(self, Self::Gt | Self::Gte | Self::Lt | Self::Lte)
    }
}

/// The right-hand side of a condition: a scalar (string, number, boolean, null), or a
/// list of scalars for `$in` / `$nin`.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// One scalar.
    Scalar(Value),
    /// Scalars for `$in` / `$nin`.
    List(Vec<Value>),
}

/// One condition on one top-level key of an item's value.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// A top-level key, taken literally (a dotted name is not a path).
    pub key: String,
    /// The operator.
    pub op: FilterOp,
    /// The operand.
    pub operand: Operand,
}

/// A parsed search filter: conditions ANDed together. The empty filter matches all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoreFilter {
    conditions: Vec<Condition>,
}

impl StoreFilter {
    /// Parses a request's `filter` object; unknown operators and non-scalar operands are
    /// `Invalid` (HTTP 400). `null` is the empty filter.
    pub fn parse(filter: &Value) -> StoreResult<Self> {
        match filter {
            Value::Null => Ok(Self::default()),
            Value::Object(map) => Self::from_object(map),
            _ => Err(StoreError::invalid("Filter must be an object")),
        }
    }

    /// Parses a filter already known to be an object; a NUL in it is `Invalid`.
    pub fn from_object(map: &Metadata) -> StoreResult<Self> {
        refuse_nul("filter", map)?;
        let mut conditions = Vec::new();
        for (key, spec) in map {
            match spec {
                Value::Object(ops) => {
                    for (name, operand) in ops {
                        let op = FilterOp::parse(name).ok_or_else(|| {
                            StoreError::invalid(format!(
                                "Unknown filter operator '{name}' on key '{key}'"
                            ))
                        })?;
                        conditions.push(Condition {
                            key: key.clone(),
                            op,
                            operand: parse_operand(key, op, operand)?,
                        });
                    }
                }
                bare => conditions.push(Condition {
                    key: key.clone(),
                    op: FilterOp::Eq,
                    operand: parse_operand(key, FilterOp::Eq, bare)?,
                }),
            }
        }
        Ok(Self { conditions })
    }

    /// The ANDed conditions, in request order.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// True when the filter has no condition.
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// True when `value` (an item's value object) satisfies every condition.
    pub fn matches(&self, value: &Metadata) -> bool {
        self.conditions
            .iter()
            .all(|condition| condition.matches(value.get(&condition.key)))
    }
}

impl Condition {
    /// True when the key's value (`None` when absent) satisfies this condition.
    pub fn matches(&self, value: Option<&Value>) -> bool {
        match (&self.operand, value) {
            (Operand::Scalar(_), None) => self.op == FilterOp::Ne,
            (Operand::List(_), None) => self.op == FilterOp::Nin,
            (Operand::Scalar(operand), Some(value)) => match self.op {
                FilterOp::Eq => scalar_equals(value, operand),
                FilterOp::Ne => !scalar_equals(value, operand),
                op => order_matches(op, value, operand),
            },
            (Operand::List(list), Some(value)) => {
                let found = list.iter().any(|candidate| scalar_equals(value, candidate));
                found == (self.op == FilterOp::In)
            }
        }
    }
}

/// Ordering operators compare numbers on both sides; anything else never matches.
fn order_matches(op: FilterOp, value: &Value, operand: &Value) -> bool {
    let (Value::Number(have), Value::Number(want)) = (value, operand) else {
        return false;
    };
    let Some(ordering) = compare_numbers(have, want) else {
        return false;
    };
    match op {
        FilterOp::Gt => ordering == Ordering::Greater,
        FilterOp::Gte => ordering != Ordering::Less,
        FilterOp::Lt => ordering == Ordering::Less,
        FilterOp::Lte => ordering != Ordering::Greater,
        _ => false,
    }
}

fn parse_operand(key: &str, op: FilterOp, operand: &Value) -> StoreResult<Operand> {
    let non_scalar =
        || StoreError::invalid(format!("Filter operand for key '{key}' must be a scalar"));
    match op {
        FilterOp::In | FilterOp::Nin => match operand {
            Value::Array(items) if items.iter().all(is_scalar) => Ok(Operand::List(items.clone())),
            _ => Err(StoreError::invalid(format!(
                "Filter operand of $in/$nin for key '{key}' must be a list of scalars"
            ))),
        },
        _ if is_scalar(operand) => Ok(Operand::Scalar(operand.clone())),
        _ => Err(non_scalar()),
    }
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}
