//! Store namespaces (SPEC "Namespace rules"): the dotted text of `GET /store/items`
//! split into labels, the write rules (the engine's and every driver's), and a
//! listing's prefix/suffix matching, `max_depth` truncation and paging over stored
//! namespaces, with the properties the rules promise.
//!
//! Input, one field a line: a dotted namespace; the listing's prefix and suffix,
//! dotted (empty: none); `max_depth limit offset max_page_size` (a missing or bad
//! number: none, or 0); then the stored namespaces, dotted, one a line.

#![no_main]

use libfuzzer_sys::fuzz_target;
use service_store::PageLimits;
use service_store::namespace::{
    NamespaceQuery, from_dotted, literal_prefix, matches_prefix, matches_suffix, truncate,
    validate_namespace,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let dotted = lines.next().unwrap_or_default();
    let pattern = |line: Option<&str>| line.filter(|line| !line.is_empty()).map(from_dotted);
    let prefix = pattern(lines.next());
    let suffix = pattern(lines.next());
    let numbers: Vec<Option<usize>> = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .map(|number| number.parse().ok())
        .chain(std::iter::repeat(None))
        .take(4)
        .collect();
    let stored: Vec<Vec<String>> = lines.map(from_dotted).collect();

    let labels = from_dotted(dotted);
    assert_eq!(labels.join("."), dotted, "the dotted form round-trips");
    let valid = validate_namespace(&labels).is_ok();
    assert_eq!(
        valid,
        !dotted.contains('\0') && labels.iter().all(|label| !label.is_empty()),
        "{labels:?}"
    );
    if valid {
        assert!(service_engine::validate_namespace(&labels).is_ok());
    }

    // A namespace matches each of its own prefixes and suffixes.
    for cut in 0..=labels.len() {
        assert!(matches_prefix(&labels, &labels[..cut]));
        assert!(matches_suffix(&labels, &labels[cut..]));
    }
    if let Some(prefix) = &prefix
        && matches_prefix(&labels, prefix)
    {
        assert!(labels.starts_with(literal_prefix(prefix)));
    }

    let query = NamespaceQuery {
        prefix,
        suffix,
        max_depth: numbers[0],
        limit: numbers[1],
        offset: numbers[2].unwrap_or(0),
    };
    let limits = PageLimits::new(numbers[3].unwrap_or(0));
    let Ok(listed) = query.collect(stored.iter().map(Vec::as_slice), limits) else {
        assert!(query.validate().is_err());
        return;
    };
    assert!(listed.len() <= limits.namespaces(query.limit));
    assert!(
        listed.windows(2).all(|pair| pair[0] < pair[1]),
        "sorted and unique"
    );
    for namespace in &listed {
        assert!(stored.iter().any(|candidate| query.matches(candidate)
            && truncate(candidate, query.max_depth) == namespace.as_slice()));
    }
});
