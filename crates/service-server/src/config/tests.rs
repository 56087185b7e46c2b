use super::*;

#[test]
fn the_checkpointer_is_a_saver_name_or_a_block() {
    let named: ConfigFile = serde_json::from_str(r#"{"checkpointer": "default"}"#).unwrap();
    assert!(named.checkpointer.database_saver);
    let block: ConfigFile =
        serde_json::from_str(r#"{"checkpointer": {"serde": {"pickle_fallback": true}}}"#).unwrap();
    assert!(!block.checkpointer.database_saver);
    assert!(block.checkpointer.serde.is_some());
    for (text, says) in [
        (r#"{"checkpointer": "custom"}"#, "reserved"),
        (
            r#"{"checkpointer": "sqlite"}"#,
            "\"sqlite\" is not a checkpointer",
        ),
        (r#"{"checkpointer": {"tll": {}}}"#, "tll"),
    ] {
        let error = serde_json::from_str::<ConfigFile>(text).unwrap_err();
        assert!(error.to_string().contains(says), "{text}: {error}");
    }
}

#[test]
fn unknown_keys_are_refused() {
    let error = serde_json::from_str::<ConfigFile>(r#"{"grpahs": {}}"#).unwrap_err();
    assert!(error.to_string().contains("grpahs"));
}

#[test]
fn blocks_are_read_and_checked() {
    let config: ConfigFile = serde_json::from_str(
        r#"{"graphs": {"chat": "echo"}, "store": {"ttl": {"default_ttl": 5}}, "checkpointer": {"ttl": {"strategy": "delete"}},
            "service": {"webhooks": {"retries": {"max_attempts": 4}, "require_https": true}}}"#,
    )
    .unwrap();
    config.validate().unwrap();
    assert!(config.store.ttl.unwrap().refresh_on_read);
    assert_eq!(config.service.webhooks.retries.max_attempts, Some(4));
    let typo = serde_json::from_str::<ConfigFile>(r#"{"service": {"webhooks": {"secrets": "x"}}}"#);
    assert!(typo.unwrap_err().to_string().contains("secrets"));
}

#[test]
fn a_langgraph_json_is_read_as_users_write_it() {
    let config: ConfigFile = serde_json::from_str(
        r#"{"$schema": "https://langgra.ph/schema.json", "dependencies": ["."],
            "graphs": {"agent": "./agent.py:graph"}, "env": ".env",
            "python_version": "3.11", "dockerfile_lines": [], "image_distro": "wolfi",
            "webhooks": {"url": {"require_https": true, "allowed_domains": ["hooks.example.com"], "disable_loopback": false, "disable_private_ips": true}},
            "store": {"ttl": {"default_ttl": 5}}, "checkpointer": {"ttl": {"strategy": "delete"}}}"#,
    )
    .unwrap();
    config.validate().unwrap();
    let notices = config.notices();
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0].starts_with(
            "python_version, dockerfile_lines, image_distro only matter to image builds"
        ),
        "{notices:?}"
    );
    let policy = config.webhooks_policy().unwrap();
    assert_eq!(policy.require_https, Some(true));
    assert_eq!(
        policy.allowed_hosts,
        Some(vec!["hooks.example.com".to_owned()])
    );
    assert_eq!(policy.block_private_targets, Some(true));
}

#[test]
fn disable_loopback_is_honoured_only_with_the_private_address_guard() {
    let policy = |text: &str| {
        serde_json::from_str::<ConfigFile>(text)
            .unwrap()
            .webhooks_policy()
    };
    let alone = policy(r#"{"webhooks": {"url": {"disable_loopback": true}}}"#).unwrap_err();
    assert!(
        alone.0.contains("webhooks.url.disable_loopback")
            && alone.0.contains("disable_private_ips"),
        "{alone}"
    );
    let guarded =
        policy(r#"{"webhooks": {"url": {"disable_loopback": true, "disable_private_ips": true}}}"#)
            .unwrap();
    assert_eq!(guarded.block_private_targets, Some(true));
    let from_service = policy(
        r#"{"service": {"webhooks": {"block_private_targets": true}},
            "webhooks": {"url": {"disable_loopback": true, "disable_private_ips": false}}}"#,
    )
    .unwrap();
    assert_eq!(
        from_service.block_private_targets,
        Some(true),
        "service.webhooks wins"
    );
}

#[test]
fn langgraph_json_keys_this_server_cannot_honour_are_refused_naming_them() {
    // auth.path is refused by service-auth, which reads the auth block.
    for (text, says) in [
        (
            r#"{"encryption": {"path": "./crypt.py:crypt"}}"#,
            "encryption",
        ),
        (
            r#"{"checkpointer": {"path": "./saver.py:make"}}"#,
            "checkpointer.path",
        ),
        (
            r#"{"http": {"disable_assistants": true}}"#,
            "http.disable_assistants",
        ),
        (r#"{"http": {"disable_mcp": true}}"#, "http.disable_mcp"),
        (
            r#"{"http": {"cors": {"allow_origin_regex": "https://(a"}}}"#,
            "http.cors.allow_origin_regex",
        ),
        (
            r#"{"checkpointer": {"serde": {"pickle_fallbak": true}}}"#,
            "checkpointer.serde.pickle_fallbak",
        ),
    ] {
        let config: ConfigFile = serde_json::from_str(text).unwrap();
        let error = config.validate().unwrap_err();
        assert!(error.0.contains(says), "{text}: {error}");
    }
    for key in ["allowed_ports", "max_url_length"] {
        let config: ConfigFile =
            serde_json::from_str(&format!(r#"{{"webhooks": {{"url": {{"{key}": [443]}}}}}}"#))
                .unwrap();
        let error = config.webhooks_policy().unwrap_err();
        assert!(error.0.contains(&format!("webhooks.url.{key}")), "{error}");
    }
}

#[test]
fn every_key_langgraph_cli_reads_boots_with_one_notice_of_what_it_does_here() {
    // The keys langgraph-cli 0.4.40 reads (its config schema and `langgraph dev`),
    // each set as its docs show.
    let config: ConfigFile = serde_json::from_str(
        r#"{"$schema": "https://langgra.ph/schema.json", "python_version": "3.12", "node_version": "20",
            "api_version": "0.8", "base_image": "langchain/langgraph-api", "image_distro": "wolfi",
            "pip_config_file": "pip.conf", "pip_installer": "uv", "source": {"kind": "uv", "root": "."},
            "dependencies": ["."], "dockerfile_lines": [], "keep_pkg_tools": true,
            "_INTERNAL_docker_tag": "x", "project_root": ".", "package": "agent",
            "graphs": {"agent": {"path": "./agent.py:graph", "description": "An agent"}, "echo": "rust:echo"},
            "env": {"A": "1"},
            "store": {"index": {"embed": "openai:m", "dims": 8, "fields": ["$"]}, "ttl": {"refresh_on_read": true, "default_ttl": 5, "sweep_interval_minutes": 10}},
            "checkpointer": {"ttl": {"strategy": "delete", "default_ttl": 60, "sweep_interval_minutes": 10, "sweep_limit": 100},
                             "serde": {"allowed_json_modules": [["agent", "State"]], "allowed_msgpack_modules": null, "pickle_fallback": false}},
            "auth": {"disable_studio_auth": true, "openapi": {"securitySchemes": {}}, "cache": {"ttl_seconds": 60}},
            "priority": {"path": "./priority.py:decide"},
            "http": {"app": "./app.py:app", "disable_runs": false, "disable_assistants": false, "disable_mcp": false,
                     "configurable_headers": {"includes": ["x-user-*"]}, "logging_headers": {"excludes": ["authorization"]},
                     "middleware_order": "auth_first", "enable_custom_route_auth": true, "mount_prefix": "/api"},
            "webhooks": {"env_prefix": "LG_WEBHOOK_", "headers": {"x-token": "${{ env.TOKEN }}"}, "url": {"require_https": false}},
            "ui": {"agent": "./ui.tsx"}, "ui_config": {"shared": ["react"]}, "disable_persistence": true}"#,
    )
    .unwrap();
    config.validate().unwrap();
    assert_eq!(
        config.graph_targets().unwrap(),
        BTreeMap::from([
            ("agent".to_owned(), "./agent.py:graph".to_owned()),
            ("echo".to_owned(), "rust:echo".to_owned()),
        ])
    );
    let notices = config.notices();
    for key in [
        "api_version",
        "keep_pkg_tools",
        "disable_persistence",
        "priority",
        "graphs.*.description",
        "sweep_limit",
        "http.app",
        "http.mount_prefix",
        "http.logging_headers",
        "webhooks.headers",
        "auth.disable_studio_auth",
    ] {
        assert_eq!(
            notices.iter().filter(|notice| notice.contains(key)).count(),
            1,
            "{key}: {notices:?}"
        );
    }
    assert!(
        serde_json::from_str::<ConfigFile>(r#"{"graphs": {"a": "./a.py:g"}}"#)
            .unwrap()
            .notices()
            .is_empty()
    );
}

#[test]
fn http_cors_is_read_as_the_reference_server_reads_it() {
    let policy = |cors: &str| {
        serde_json::from_str::<ConfigFile>(&format!(r#"{{"http": {{"cors": {cors}}}}}"#))
            .unwrap()
            .http
            .cors
            .unwrap()
            .policy()
            .unwrap()
    };
    let defaults = policy("{}");
    assert_eq!(defaults.allow_origins, ["*"], "no origins listed: any");
    assert_eq!(defaults.allow_methods, ["GET"]);
    assert!(defaults.allow_headers.is_empty() && defaults.expose_headers.is_empty());
    assert!(!defaults.allow_credentials);
    assert_eq!(defaults.max_age, 600);
    let by_regex = policy(r#"{"allow_origin_regex": "https://.*\\.example\\.com"}"#);
    assert!(by_regex.allow_origins.is_empty(), "the regex alone decides");
    assert!(by_regex.allow_origin_regex.is_some());
    let full = policy(
        r#"{"allow_origins": ["https://a.example"], "allow_methods": ["GET", "POST"], "allow_headers": ["x-api-key"],
            "allow_credentials": true, "expose_headers": ["x-pagination-total"], "max_age": 60}"#,
    );
    assert_eq!(full.allow_origins, ["https://a.example"]);
    assert_eq!(full.allow_methods, ["GET", "POST"]);
    assert!(full.allow_credentials);
    assert_eq!(full.max_age, 60);
    let typo = serde_json::from_str::<ConfigFile>(r#"{"http": {"cors": {"allow_origin": []}}}"#);
    assert!(typo.unwrap_err().to_string().contains("allow_origin"));
}

#[test]
fn configurable_headers_take_either_spelling_of_their_patterns() {
    let copied = |block: &str| {
        serde_json::from_str::<ConfigFile>(&format!(
            r#"{{"http": {{"configurable_headers": {block}}}}}"#
        ))
        .unwrap()
        .http
        .configurable_headers
        .unwrap()
        .copied()
    };
    let plural = copied(r#"{"includes": ["x-*"], "excludes": ["x-secret"]}"#);
    assert_eq!(
        (plural.includes, plural.excludes),
        (vec!["x-*".to_owned()], vec!["x-secret".to_owned()])
    );
    let singular = copied(r#"{"include": ["user-agent"]}"#);
    assert_eq!(singular.includes, ["user-agent"]);
    assert!(singular.excludes.is_empty());
}

#[test]
fn store_index_is_read_as_langgraph_json_writes_it_and_checked() {
    let config: ConfigFile = serde_json::from_str(
        r#"{"store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text", "meta.title"]}}}"#,
    )
    .unwrap();
    config.validate().unwrap();
    let index = config.store.index.unwrap();
    assert_eq!(index.fields(), ["text", "meta.title"]);
    assert!(!index.hnsw, "exact by default");
    let whole: ConfigFile =
        serde_json::from_str(r#"{"store": {"index": {"embed": "openai:m", "dims": 8}}}"#).unwrap();
    assert_eq!(whole.store.index.unwrap().fields(), ["$"]);
    for (text, says) in [
        (r#"{"embed": "openai:m", "dims": 0}"#, "store.index.dims"),
        (
            r#"{"embed": "openai:m", "dims": 16001}"#,
            "store.index.dims",
        ),
        (
            r#"{"embed": "openai:m", "dims": 3072, "hnsw": true}"#,
            "store.index.hnsw",
        ),
        (
            r#"{"embed": "openai:m", "dims": 8, "fields": []}"#,
            "store.index.fields",
        ),
    ] {
        let config: ConfigFile =
            serde_json::from_str(&format!(r#"{{"store": {{"index": {text}}}}}"#)).unwrap();
        let error = config.validate().unwrap_err();
        assert!(error.0.contains(says), "{text}: {error}");
    }
    let typo = serde_json::from_str::<ConfigFile>(
        r#"{"store": {"index": {"embed": "openai:m", "dims": 8, "field": ["a"]}}}"#,
    );
    assert!(typo.unwrap_err().to_string().contains("field"));
}

#[test]
fn a_store_adapter_is_checked_with_the_store_block() {
    let config: ConfigFile =
        serde_json::from_str(r#"{"store": {"adapter": "./store.py:store"}}"#).unwrap();
    config.validate().unwrap();
    let config: ConfigFile = serde_json::from_str(
        r#"{"store": {"adapter": "./store.py:store", "index": {"embed": "openai:m", "dims": 8}}}"#,
    )
    .unwrap();
    let error = config.validate().unwrap_err();
    assert!(
        error
            .0
            .contains("store.index together with a store adapter"),
        "{error}"
    );
    let not_a_path = serde_json::from_str::<ConfigFile>(r#"{"store": {"adapter": {"path": "x"}}}"#);
    assert!(not_a_path.is_err());
}

#[test]
fn http_console_is_true_false_or_a_mount_path() {
    for (text, setting) in [
        ("{}", ConsoleSetting::Unset),
        (r#"{"http": {"console": false}}"#, ConsoleSetting::Off),
        (
            r#"{"http": {"console": true}}"#,
            ConsoleSetting::At("/console".into()),
        ),
        (
            r#"{"http": {"console": "/admin/"}}"#,
            ConsoleSetting::At("/admin".into()),
        ),
    ] {
        let config: ConfigFile = serde_json::from_str(text).unwrap();
        assert_eq!(config.console().unwrap(), setting, "{text}");
    }
    for text in [
        r#"{"http": {"console": "/"}}"#,
        r#"{"http": {"console": "/threads"}}"#,
        r#"{"http": {"console": "/ui"}}"#,
        r#"{"http": {"console": "/admin/ui"}}"#,
        r#"{"http": {"console": 1}}"#,
    ] {
        let config: ConfigFile = serde_json::from_str(text).unwrap();
        let error = config.validate().unwrap_err();
        assert!(error.0.contains("http.console"), "{error}");
    }
}
