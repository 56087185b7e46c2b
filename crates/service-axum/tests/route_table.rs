//! The hostile-input suite (e2e/hostile) sends bad input to every route in its table;
//! this test keeps that table equal to the routes the router declares, so a new route
//! cannot be left out of it.

use std::collections::BTreeSet;

const TABLE: &str = include_str!("../../../e2e/hostile/routes.txt");

const SOURCES: [&str; 6] = [
    include_str!("../src/routes/assistants.rs"),
    include_str!("../src/routes/crons.rs"),
    include_str!("../src/routes/meta.rs"),
    include_str!("../src/routes/runs.rs"),
    include_str!("../src/routes/store.rs"),
    include_str!("../src/routes/threads.rs"),
];

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// `METHOD /path` of every `.route("/path", get(..).post(..))` call in `source`.
fn declared(source: &str) -> Vec<String> {
    let mut routes = Vec::new();
    for call in source.split(".route(").skip(1) {
        let mut quoted = call.splitn(3, '"');
        let (Some(_), Some(path), Some(rest)) = (quoted.next(), quoted.next(), quoted.next())
        else {
            panic!("a route call without a path: {call}");
        };
        // The handlers run to the call's closing parenthesis (they nest one level).
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find_map(|(index, char)| {
                match char {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(index)
            })
            .expect("a closed route call");
        let handlers = &rest[..end];
        for method in METHODS {
            let called = handlers
                .match_indices(&format!("{method}("))
                .any(|(at, _)| {
                    at == 0 || !handlers[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
            if called {
                routes.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    routes
}

#[test]
fn the_hostile_route_table_lists_every_route() {
    let router: BTreeSet<String> = SOURCES.iter().flat_map(|source| declared(source)).collect();
    let table: BTreeSet<String> = TABLE
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    assert!(router.len() > 50, "the parser found the routes: {router:?}");
    let missing: Vec<_> = router.difference(&table).collect();
    let stale: Vec<_> = table.difference(&router).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "e2e/hostile/routes.txt misses {missing:?} and lists routes that are gone: {stale:?}"
    );
}
