//! The store search filter (service-store's filter semantics, SPEC "Store filter
//! rules") and JSON containment (the `metadata`/`values` filters). The input is JSON
//! `[filter, value]`: the filter is parsed as a search request's is, and every
//! condition evaluated against the value's keys; the operators' complements must
//! hold (`$eq`/`$ne`, `$in`/`$nin`, and on two numbers `$gt`/`$lte`, `$lt`/`$gte`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use service_store::StoreFilter;
use service_store::containment::{contains, contains_object};
use service_store::filter::{Condition, FilterOp};

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Array(pair)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok([filter, value]) = <[Value; 2]>::try_from(pair) else {
        return;
    };
    let Ok(parsed) = StoreFilter::parse(&filter) else {
        return;
    };
    let Value::Object(object) = &value else {
        return;
    };
    let all = parsed.matches(object);
    let each = parsed
        .conditions()
        .iter()
        .all(|condition| condition.matches(object.get(&condition.key)));
    assert_eq!(all, each, "a filter is its conditions ANDed");
    for condition in parsed.conditions() {
        complements_hold(condition, object.get(&condition.key));
    }

    // Containment (`jsonb @>`) is reflexive, and holds for any part of an object.
    assert!(contains(&value, &value), "{value} does not contain itself");
    if let Value::Object(wanted) = &filter {
        let part = object
            .iter()
            .filter(|(key, _)| wanted.contains_key(*key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        assert!(contains_object(object, &part));
        contains_object(object, wanted);
    }
});

fn with(condition: &Condition, op: FilterOp) -> Condition {
    Condition {
        op,
        ..condition.clone()
    }
}

fn complements_hold(condition: &Condition, value: Option<&Value>) {
    use FilterOp::{Eq, Gt, Gte, In, Lt, Lte, Ne, Nin};
    let opposite = |op| match op {
        Eq => Some(Ne),
        Ne => Some(Eq),
        In => Some(Nin),
        Nin => Some(In),
        Gt => Some(Lte),
        Lte => Some(Gt),
        Lt => Some(Gte),
        Gte => Some(Lt),
    };
    let both_numbers = matches!(
        (value, &condition.operand),
        (
            Some(Value::Number(_)),
            service_store::filter::Operand::Scalar(Value::Number(_))
        )
    );
    if condition.op.is_ordering() && !both_numbers {
        // Ordering compares numbers only: neither side matches anything else.
        assert!(!condition.matches(value));
        return;
    }
    if let Some(other) = opposite(condition.op) {
        assert_ne!(
            condition.matches(value),
            with(condition, other).matches(value),
            "{condition:?} and its complement agree on {value:?}"
        );
    }
}
