//! The hostile-input suite (e2e/hostile) sends bad input to every route in its table;
//! this test keeps that table equal to the routes the router declares, so a new route
//! cannot be left out of it.

use std::collections::BTreeSet;

const TABLE: &str = include_str!("../../../e2e/hostile/routes.txt");

/// Every route module's source, read from `src/routes`, so a module added later is
/// covered without being listed here.
fn sources() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/routes");
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/routes") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            sources.push(std::fs::read_to_string(&path).expect("a route module"));
        }
    }
    assert!(sources.len() >= 7, "route modules found: {}", sources.len());
    sources
}

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
    let router: BTreeSet<String> = sources()
        .iter()
        .flat_map(|source| declared(source))
        .collect();
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
