use super::*;
use std::collections::HashMap;

fn resolve(
    mode: Mode,
    args: &ServeArgs,
    vars: &[(&str, &str)],
) -> Result<ServerConfig, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    ServerConfig::resolve(
        mode,
        args,
        map.keys().cloned().collect::<Vec<_>>(),
        |name| map.get(name).cloned(),
    )
}

const DATABASE: (&str, &str) = ("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/db");

#[test]
fn store_index_builds_its_embedder_at_boot_or_fails_naming_what_is_missing() {
    let dir = std::env::temp_dir().join(format!("store-index-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("langgraph.json");
    std::fs::write(
        &path,
        r#"{"store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text"]}}}"#,
    )
    .unwrap();
    let args = ServeArgs {
        config: Some(path),
        ..ServeArgs::default()
    };
    let config = resolve(Mode::Dev, &args, &[("OPENAI_API_KEY", "sk-test")]).unwrap();
    let index = config.engine.store_index.expect("an index");
    assert_eq!(index.spec().dims, 1536);
    assert_eq!(index.fields(), ["text"]);
    let error = resolve(Mode::Dev, &args, &[]).unwrap_err();
    assert!(error.0.contains("OPENAI_API_KEY"), "{error}");
    std::fs::write(
        dir.join("langgraph.json"),
        r#"{"env": {"OPENAI_API_KEY": "sk-file"}, "store": {"index": {"embed": "openai:m", "dims": 8}}}"#,
    )
    .unwrap();
    let from_file = resolve(Mode::Dev, &args, &[]).expect("the key from langgraph.json's env");
    assert!(from_file.engine.store_index.is_some());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_flag_wins_over_its_variable_which_wins_over_the_default() {
    let flags = ServeArgs {
        port: Some(9001),
        concurrency: Some(3),
        host: Some("0.0.0.0".into()),
        ..ServeArgs::default()
    };
    let vars = [("PORT", "9000"), ("SERVICE_RUN_CONCURRENCY", "5")];
    let config = resolve(Mode::Dev, &flags, &vars).unwrap();
    assert_eq!(config.address, "0.0.0.0:9001");
    assert_eq!(config.engine.run_concurrency, 3);
    let config = resolve(Mode::Dev, &ServeArgs::default(), &vars).unwrap();
    assert_eq!(config.address, "127.0.0.1:9000");
    assert_eq!(config.engine.run_concurrency, 5);
    let config = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert_eq!(config.address, "127.0.0.1:8123");
    assert_eq!(config.engine.run_concurrency, 10);
}

#[test]
fn the_mode_sets_stacks_and_the_request_log() {
    let dev = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert!(dev.engine.expose_stacks && dev.request_log);
    let start = resolve(Mode::Start, &ServeArgs::default(), &[]).unwrap();
    assert!(!start.engine.expose_stacks && !start.request_log);
    let logged = resolve(
        Mode::Start,
        &ServeArgs::default(),
        &[("SERVICE_REQUEST_LOG", "on")],
    )
    .unwrap();
    assert!(logged.request_log);
}

#[test]
fn the_body_limit_is_a_setting_of_25_mib_by_default() {
    let default = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert_eq!(default.http.max_body_bytes, 25 * 1024 * 1024);
    let vars = [("SERVICE_MAX_BODY_BYTES", "1048576")];
    let set = resolve(Mode::Dev, &ServeArgs::default(), &vars).unwrap();
    assert_eq!(set.http.max_body_bytes, 1024 * 1024);
    let zero = [("SERVICE_MAX_BODY_BYTES", "0")];
    assert!(resolve(Mode::Dev, &ServeArgs::default(), &zero).is_err());
}

#[test]
fn the_client_caps_come_from_their_knobs_with_defaults() {
    let default = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert_eq!(default.http.limits, service_axum::ClientLimits::default());
    assert_eq!(default.http.limits.max_batch_runs, 100);
    assert_eq!(default.http.limits.max_ws_subscriptions, 100);
    assert_eq!(default.http.limits.max_streams_per_principal, 64);
    let vars = [
        ("SERVICE_MAX_BATCH_RUNS", "5"),
        ("SERVICE_MAX_WS_SUBSCRIPTIONS", "6"),
        ("SERVICE_WS_REPLAY_MAX_EVENTS", "7"),
        ("SERVICE_WS_REPLAY_MAX_BYTES", "8"),
        ("SERVICE_MAX_STREAMS_PER_PRINCIPAL", "9"),
        ("SERVICE_MAX_STREAMS_PER_ADDRESS", "0"),
        ("SERVICE_MAX_URI_BYTES", "10"),
        ("SERVICE_MAX_HEADERS", "11"),
        ("SERVICE_MAX_HEADER_BYTES", "12"),
        ("SERVICE_HEADER_READ_TIMEOUT_MS", "0"),
        ("SERVICE_BODY_READ_TIMEOUT_MS", "14"),
        ("SERVICE_SEND_TIMEOUT_MS", "13"),
    ];
    let set = resolve(Mode::Start, &ServeArgs::default(), &vars).unwrap();
    let expected = service_axum::ClientLimits {
        max_batch_runs: 5,
        max_ws_subscriptions: 6,
        ws_replay_events: 7,
        ws_replay_bytes: 8,
        max_streams_per_principal: 9,
        max_streams_per_address: 0,
        max_uri_bytes: 10,
        max_headers: 11,
        max_header_bytes: 12,
    };
    assert_eq!(set.http.limits, expected);
    let timeouts = (
        set.connections.header_read_timeout,
        set.connections.body_read_timeout,
        set.connections.send_timeout,
    );
    let millis = |n| Some(Duration::from_millis(n));
    assert_eq!(timeouts, (None, millis(14), millis(13)));
    let zero = [("SERVICE_MAX_STREAMS_PER_PRINCIPAL", "0")];
    let error = resolve(Mode::Dev, &ServeArgs::default(), &zero).unwrap_err();
    assert!(
        error.0.contains("SERVICE_MAX_STREAMS_PER_PRINCIPAL"),
        "{error}"
    );
}

#[test]
fn one_page_size_reaches_the_engine_and_the_database() {
    let vars = [
        DATABASE,
        ("SERVICE_MAX_PAGE_SIZE", "7"),
        ("DB_POOL_MAX", "20"),
    ];
    let config = resolve(Mode::Start, &ServeArgs::default(), &vars).unwrap();
    let database = config.database.unwrap();
    assert_eq!(config.engine.max_page_size, 7);
    assert_eq!(database.options.max_page_size, 7);
    assert_eq!(database.options.pool_max, 20);
}

#[test]
fn the_database_serves_start_only_and_is_otherwise_warned_about() {
    let dev = resolve(Mode::Dev, &ServeArgs::default(), &[DATABASE]).unwrap();
    assert!(dev.database.is_none());
    assert!(
        dev.warnings[0].contains("DATABASE_URL"),
        "{:?}",
        dev.warnings
    );
    let start = resolve(Mode::Start, &ServeArgs::default(), &[("DB_POOL_MAX", "4")]).unwrap();
    assert!(start.database.is_none());
    assert!(
        start
            .warnings
            .iter()
            .any(|warning| warning.contains("DB_POOL_MAX"))
    );
    let bad = resolve(
        Mode::Start,
        &ServeArgs::default(),
        &[("DATABASE_URL", "postgres://host:notaport/db")],
    );
    assert!(bad.unwrap_err().0.contains("DATABASE_URL"));
}

#[test]
fn the_checkpointer_setting_picks_the_saver() {
    let dir = std::env::temp_dir().join(format!("checkpointer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("langgraph.json");
    let args = ServeArgs {
        config: Some(path.clone()),
        ..ServeArgs::default()
    };
    // No setting: dev keeps checkpoints in memory even beside a DATABASE_URL.
    std::fs::write(&path, r#"{"checkpointer": {"ttl": {"default_ttl": 5}}}"#).unwrap();
    let unset = resolve(Mode::Dev, &args, &[DATABASE]).unwrap();
    assert!(unset.database.is_none() && unset.checkpoint_database.is_none());
    std::fs::write(&path, r#"{"checkpointer": "default"}"#).unwrap();
    let dev = resolve(Mode::Dev, &args, &[DATABASE]).unwrap();
    assert!(dev.database.is_none(), "the store stays in memory");
    assert!(
        dev.checkpoint_database.is_some(),
        "checkpoints in PostgreSQL"
    );
    let start = resolve(Mode::Start, &args, &[DATABASE]).unwrap();
    assert!(start.database.is_some() && start.checkpoint_database.is_none());
    assert!(
        dev.http.metrics && !start.http.metrics,
        "metrics: on in dev only"
    );
    let enabled = resolve(Mode::Start, &args, &[DATABASE, ("SERVICE_METRICS", "1")]);
    assert!(enabled.unwrap().http.metrics);
    for mode in [Mode::Dev, Mode::Start] {
        let error = resolve(mode, &args, &[]).unwrap_err();
        assert!(error.0.contains("DATABASE_URL"), "{error}");
    }
    std::fs::write(&path, r#"{"checkpointer": "custom"}"#).unwrap();
    let error = resolve(Mode::Dev, &args, &[DATABASE]).unwrap_err();
    assert!(error.0.contains("reserved"), "{error}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_zero_run_timeout_flag_turns_off_the_variables() {
    let vars = [("SERVICE_RUN_TIMEOUT_MS", "1500")];
    let config = resolve(Mode::Dev, &ServeArgs::default(), &vars).unwrap();
    assert_eq!(config.engine.run_timeout, Some(Duration::from_millis(1500)));
    let off = ServeArgs {
        run_timeout_ms: Some(0),
        ..ServeArgs::default()
    };
    let config = resolve(Mode::Dev, &off, &vars).unwrap();
    assert_eq!(config.engine.run_timeout, None);
}

#[test]
fn the_bus_limits_come_from_their_knobs() {
    let vars = [
        ("SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN", "64"),
        ("SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS", "2"),
        ("SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES", "1048576"),
    ];
    let config = resolve(Mode::Dev, &ServeArgs::default(), &vars).unwrap();
    assert_eq!(config.engine.bus.max_frames_per_topic, 64);
    assert_eq!(config.engine.bus.max_retained_topics, 2);
    assert_eq!(config.engine.bus.max_retained_bytes, 1024 * 1024);
    let default = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert_eq!(default.engine.bus.max_retained_bytes, 64 * 1024 * 1024);
    let zero = [("SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES", "0")];
    let error = resolve(Mode::Dev, &ServeArgs::default(), &zero).unwrap_err();
    assert!(
        error.0.contains("SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES"),
        "{error}"
    );
}

#[test]
fn the_console_is_on_in_dev_off_in_start_and_no_console_wins() {
    let no_console = ServeArgs {
        no_console: true,
        ..ServeArgs::default()
    };
    let dev = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert_eq!(dev.console.as_deref(), Some("/console"));
    assert_eq!(resolve(Mode::Dev, &no_console, &[]).unwrap().console, None);
    let start = resolve(Mode::Start, &ServeArgs::default(), &[]).unwrap();
    assert_eq!(start.console, None);
    let dir = std::env::temp_dir().join(format!("console-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.json");
    std::fs::write(&path, r#"{"http": {"console": "/admin"}}"#).unwrap();
    let with_file = |no_console| ServeArgs {
        config: Some(path.clone()),
        no_console,
        ..ServeArgs::default()
    };
    let start = resolve(Mode::Start, &with_file(false), &[]).unwrap();
    assert_eq!(start.console.as_deref(), Some("/admin"));
    assert_eq!(
        resolve(Mode::Start, &with_file(true), &[]).unwrap().console,
        None
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_log_filter_and_format_are_validated_and_verbose_logs_run_activity() {
    let verbose = ServeArgs {
        verbose: true,
        ..ServeArgs::default()
    };
    let config = resolve(Mode::Dev, &verbose, &[]).unwrap();
    assert_eq!(config.log_filter, "info");
    assert!(config.log_run_activity);
    assert_eq!(config.log_format, crate::log::LogFormat::Text);
    let config = resolve(Mode::Dev, &verbose, &[("RUST_LOG", "warn")]).unwrap();
    assert_eq!(config.log_filter, "warn");
    let json = resolve(Mode::Dev, &verbose, &[("SERVICE_LOG_FORMAT", "json")]).unwrap();
    assert_eq!(json.log_format, crate::log::LogFormat::Json);
    let error = resolve(Mode::Dev, &verbose, &[("SERVICE_LOG_FORMAT", "yaml")]).unwrap_err();
    assert!(error.0.contains("SERVICE_LOG_FORMAT"), "{error}");
    let error = resolve(Mode::Dev, &verbose, &[("RUST_LOG", "a=notalevel")]).unwrap_err();
    assert!(error.0.contains("RUST_LOG"), "{error}");
}

#[test]
fn the_boot_warns_of_a_small_pool_a_signed_custom_dispatcher_and_an_outbox_schedule() {
    let pool = |size: &str| {
        let config = resolve(
            Mode::Start,
            &ServeArgs::default(),
            &[DATABASE, ("DB_POOL_MAX", size)],
        )
        .unwrap();
        config
            .warnings
            .iter()
            .any(|warning| warning.contains("DB_POOL_MAX (4) is below the run concurrency (10)"))
    };
    assert!(pool("4"), "a pool smaller than the concurrency");
    assert!(!pool("10"));

    let outbox = |config: &ServerConfig| {
        crate::serve::boot_warnings(config, false)
            .iter()
            .any(|warning| warning.contains("scheduled from the PostgreSQL outbox"))
    };
    let durable = resolve(Mode::Start, &ServeArgs::default(), &[DATABASE]).unwrap();
    assert!(outbox(&durable), "a durable store, no durable schedule");
    let queued = ServeArgs {
        queue: Some("redis://127.0.0.1:6379".into()),
        ..ServeArgs::default()
    };
    let with_queue = resolve(Mode::Start, &queued, &[DATABASE]).unwrap();
    assert!(!outbox(&with_queue), "the queue keeps the schedule");
    let in_memory = resolve(Mode::Start, &ServeArgs::default(), &[]).unwrap();
    assert!(!outbox(&in_memory), "nothing is durable");

    let dispatcher = |config: &ServerConfig, custom| {
        crate::serve::boot_warnings(config, custom)
            .iter()
            .any(|warning| warning.contains("custom dispatcher"))
    };
    let signed = resolve(
        Mode::Dev,
        &ServeArgs::default(),
        &[("SERVICE_WEBHOOK_SECRET", "key-1")],
    )
    .unwrap();
    assert!(dispatcher(&signed, true), "a key and a custom dispatcher");
    assert!(!dispatcher(&signed, false));
    let unsigned = resolve(Mode::Dev, &ServeArgs::default(), &[]).unwrap();
    assert!(!dispatcher(&unsigned, true));
}

#[test]
fn a_store_adapter_is_loaded_by_the_workers_of_its_language() {
    let dir = std::env::temp_dir().join(format!("store-adapter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("langgraph.json");
    let args = ServeArgs {
        config: Some(path.clone()),
        ..ServeArgs::default()
    };
    std::fs::write(&path, r#"{"store": {"adapter": "./store.ts:store"}}"#).unwrap();
    let js = resolve(Mode::Dev, &args, &[]).unwrap();
    assert!(js.python.is_none(), "no Python workers for a JS adapter");
    let node = js.node.expect("Node workers for the adapter alone");
    assert!(node.graphs.is_empty());
    assert_eq!(node.store_adapter.as_deref(), Some("./store.ts:store"));
    std::fs::write(
        &path,
        r#"{"graphs": {"agent": "./agent.ts:graph"}, "store": {"adapter": "./store.py:store"}}"#,
    )
    .unwrap();
    let python = resolve(Mode::Dev, &args, &[]).unwrap();
    let options = python.python.expect("Python workers for a Python adapter");
    assert_eq!(options.store_adapter.as_deref(), Some("./store.py:store"));
    assert_eq!(
        python.node.expect("the JS graph's workers").store_adapter,
        None
    );
    let _ = std::fs::remove_dir_all(dir);
}
