//! The hostile-input suite (e2e/hostile) sends bad input to every route in its table;
//! this test keeps that table equal to the routes the router serves, so a new route
//! cannot be left out of it.

use std::collections::BTreeSet;

use service_axum::RouterOptions;

const TABLE: &str = include_str!("../../../e2e/hostile/routes.txt");

#[test]
fn the_hostile_route_table_lists_every_route() {
    let router: BTreeSet<String> = service_axum::routes(&RouterOptions::default())
        .iter()
        .map(|route| format!("{} {}", route.method, route.path))
        .collect();
    let table: BTreeSet<String> = TABLE
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    assert!(router.len() > 50, "the router lists its routes: {router:?}");
    let missing: Vec<_> = router.difference(&table).collect();
    let stale: Vec<_> = table.difference(&router).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "e2e/hostile/routes.txt misses {missing:?} and lists routes that are gone: {stale:?}"
    );
}

#[test]
fn disable_runs_leaves_out_the_run_delivery_and_mcp_routes() {
    let options = RouterOptions {
        disable_runs: true,
        ..RouterOptions::default()
    };
    let routes = service_axum::routes(&options);
    let runs: Vec<_> = routes
        .iter()
        .filter(|route| {
            (route.path.starts_with("/runs") && !route.path.starts_with("/runs/crons"))
                || route.path.contains("/runs/{run_id}")
                || route.path.ends_with("/runs")
                || route.path.ends_with("/runs/stream")
                || route.path.ends_with("/runs/wait")
        })
        .collect();
    assert!(runs.is_empty(), "run routes still served: {runs:?}");
    let protocol: Vec<_> = routes
        .iter()
        .filter(|route| route.path.ends_with("/commands") || route.path.ends_with("/stream/events"))
        .collect();
    assert!(
        protocol.is_empty(),
        "protocol v2 routes still served: {protocol:?}"
    );
    assert!(
        routes
            .iter()
            .any(|route| route.path == "/threads/{thread_id}")
    );
    assert!(routes.iter().any(|route| route.path == "/runs/crons"));
    // MCP's tools are runs.
    assert!(!routes.iter().any(|route| route.path == "/mcp"));
}
