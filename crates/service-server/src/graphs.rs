//! The graphs a boot serves: the program's graph source, optionally renamed or
//! narrowed by the configuration file's `graphs` block, and the Python and JS graphs
//! that block names (served by the bridges).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use service_graph::{AgentGraph, Checkpointer, GraphError, GraphResolver, GraphSource};
use service_node::NodeOptions;
use service_python::{Bridge, BridgeOptions};
use service_types::GraphSchema;

use crate::env::ConfigError;

/// The `graphs` block split by runtime: the program's own graphs (served id → the
/// program's id), the Python ones (served id → `file.py:attr` or `module:attr`) and
/// the JS ones (served id → `./file.ts:export`).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct GraphPlan {
    /// `None`: no block, every program graph under its own id.
    pub program: Option<BTreeMap<String, String>>,
    /// Served id → Python target.
    pub python: BTreeMap<String, String>,
    /// Served id → JS target.
    pub node: BTreeMap<String, String>,
}

const JS_FILES: [&str; 6] = [".ts", ".mts", ".cts", ".js", ".mjs", ".cjs"];

/// Whether `file` is one the Node workers load (a `.ts` or `.js` file).
pub(crate) fn is_js_file(file: &str) -> bool {
    JS_FILES.iter().any(|extension| file.ends_with(extension))
}

impl GraphPlan {
    /// Reads the block: `rust:<id>` or a plain id is a program graph, a `.ts`/`.js`
    /// file (`:export`, or its default export) a JS one, `<path or module>:<attr>` a
    /// Python one.
    pub(crate) fn of(block: Option<BTreeMap<String, String>>) -> Result<Self, ConfigError> {
        let Some(block) = block else {
            return Ok(Self::default());
        };
        let mut plan = Self {
            program: Some(BTreeMap::new()),
            python: BTreeMap::new(),
            node: BTreeMap::new(),
        };
        for (id, target) in block {
            if let Some(program) = target.strip_prefix("rust:") {
                plan.program
                    .get_or_insert_default()
                    .insert(id, program.to_owned());
                continue;
            }
            let file = target
                .rsplit_once(':')
                .map_or(target.as_str(), |(file, _)| file);
            if is_js_file(file) {
                if target.ends_with(':') {
                    return Err(ConfigError(format!(
                        "graphs.{id}: {target:?} must be './file.ts:export' (or the file alone for its default export)"
                    )));
                }
                plan.node.insert(id, target);
                continue;
            }
            match target.rsplit_once(':') {
                Some((path, attr)) if !path.is_empty() && !attr.is_empty() => {
                    plan.python.insert(id, target);
                }
                Some(_) => {
                    return Err(ConfigError(format!(
                        "graphs.{id}: {target:?} must be './file.py:attribute', 'package.module:attribute' or 'rust:<graph>'"
                    )));
                }
                None if file.ends_with(".py") => {
                    return Err(ConfigError(format!(
                        "graphs.{id}: {target:?} names a file but no graph in it: write '{target}:<variable>'"
                    )));
                }
                None => {
                    plan.program.get_or_insert_default().insert(id, target);
                }
            }
        }
        Ok(plan)
    }
}

/// The bridge's options for `python` graphs of a config file in `base`: its
/// `dependencies` paths and `env`, the interpreter and pool size from the environment.
pub(crate) fn bridge_options(
    python: BTreeMap<String, String>,
    base: &Path,
    dependencies: &[String],
    env: Option<&serde_json::Value>,
    interpreter: Option<&str>,
    workers: Option<usize>,
) -> Result<BridgeOptions, ConfigError> {
    let mut options = BridgeOptions::new(python, base);
    if let Some(interpreter) = interpreter {
        options.python = interpreter.into();
    }
    if let Some(workers) = workers {
        options.workers = workers;
    }
    options.paths = dependencies
        .iter()
        .filter(|dependency| dependency.starts_with('.') || dependency.starts_with('/'))
        .map(|dependency| base.join(dependency))
        .collect();
    options.env = config_env(base, env)?;
    Ok(options)
}

/// The Node bridge's options for `node` graphs of a config file in `base`: its `env`
/// and `node_version`, the interpreter and pool size from the environment.
pub(crate) fn node_options(
    node: BTreeMap<String, String>,
    base: &Path,
    env: Option<&serde_json::Value>,
    node_version: Option<&serde_json::Value>,
    interpreter: Option<&str>,
    workers: Option<usize>,
) -> Result<NodeOptions, ConfigError> {
    let mut options = NodeOptions::new(node, base);
    if let Some(interpreter) = interpreter {
        options.node = interpreter.into();
    }
    if let Some(workers) = workers {
        options.workers = workers;
    }
    options.env = config_env(base, env)?;
    options.node_version = match node_version {
        None => None,
        Some(serde_json::Value::String(version)) => Some(version.clone()),
        Some(serde_json::Value::Number(version)) => Some(version.to_string()),
        Some(other) => {
            return Err(ConfigError(format!(
                "node_version must be a Node major version such as \"20\", got {other}"
            )));
        }
    };
    Ok(options)
}

/// The config file's `env` (langgraph.json): a map of variables, or the path of a
/// `.env` file relative to `base`.
pub(crate) fn config_env(
    base: &Path,
    env: Option<&serde_json::Value>,
) -> Result<Vec<(String, String)>, ConfigError> {
    match env {
        None => Ok(Vec::new()),
        Some(serde_json::Value::Object(vars)) => Ok(vars
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                (name.clone(), value)
            })
            .collect()),
        Some(serde_json::Value::String(file)) => dotenv(&base.join(file)),
        Some(other) => Err(ConfigError(format!(
            "env must be a map of variables or the path of a .env file, got {other}"
        ))),
    }
}

/// `NAME=value` lines of a .env file (`export`, quotes and comments allowed).
fn dotenv(path: &PathBuf) -> Result<Vec<(String, String)>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigError(format!("cannot read env file {}: {error}", path.display()))
    })?;
    let mut vars = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            return Err(ConfigError(format!(
                "{} line {}: expected NAME=value",
                path.display(),
                number + 1
            )));
        };
        let value = value.trim();
        let unquoted = ['"', '\'']
            .iter()
            .find_map(|quote| value.strip_prefix(*quote)?.strip_suffix(*quote))
            .unwrap_or(value);
        vars.push((name.trim().to_owned(), unquoted.to_owned()));
    }
    Ok(vars)
}

/// Starts the Python workers; a graph that fails to import stays listed (its routes
/// answer `graph_load_failed`) and is reported with the others by the boot's probe.
pub(crate) async fn start_bridge(options: BridgeOptions) -> Result<Bridge, ConfigError> {
    let workers = options.workers;
    let bridge = Bridge::start(options)
        .await
        .map_err(|error| ConfigError(error.to_string()))?;
    let (python, langgraph) = bridge.versions();
    tracing::info!("Python graphs: {workers} worker(s), Python {python}, langgraph {langgraph}");
    Ok(bridge)
}

/// Starts the Node workers; like [`start_bridge`], a graph that fails to load stays
/// listed.
pub(crate) async fn start_node(options: NodeOptions) -> Result<Bridge, ConfigError> {
    let workers = options.workers;
    let bridge = service_node::start(options)
        .await
        .map_err(|error| ConfigError(error.to_string()))?;
    let (node, langgraph) = bridge.versions();
    tracing::info!("JS graphs: {workers} worker(s), Node {node}, @langchain/langgraph {langgraph}");
    Ok(bridge)
}

/// `source` as the plan says: the program's graphs (renamed or narrowed by the block,
/// if given) and the Python and JS graphs of `bridges`.
pub(crate) fn served(
    source: Box<dyn GraphSource>,
    aliases: Option<BTreeMap<String, String>>,
    bridges: Vec<Bridge>,
) -> Box<dyn GraphSource> {
    let program = match aliases {
        Some(aliases) => Box::new(Aliased { source, aliases }),
        None => source,
    };
    if bridges.is_empty() {
        program
    } else {
        Box::new(WithBridges { program, bridges })
    }
}

/// The program's graphs and the bridges' ones, side by side.
struct WithBridges {
    program: Box<dyn GraphSource>,
    bridges: Vec<Bridge>,
}

impl GraphSource for WithBridges {
    fn build(
        self: Box<Self>,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Arc<dyn GraphResolver>, GraphError> {
        let program = self.program.build(Arc::clone(&checkpointer))?;
        let bridged = self
            .bridges
            .iter()
            .map(|bridge| bridge.resolver(Arc::clone(&checkpointer)))
            .collect();
        Ok(Arc::new(Combined { program, bridged }))
    }
}

/// Finds a graph among the bridges', then the program's (the block's ids are unique,
/// so an id has one owner).
struct Combined {
    program: Arc<dyn GraphResolver>,
    bridged: Vec<Arc<dyn GraphResolver>>,
}

impl Combined {
    fn owner(&self, graph_id: &str) -> &Arc<dyn GraphResolver> {
        self.bridged
            .iter()
            .find(|bridged| bridged.graph_ids().iter().any(|id| id == graph_id))
            .unwrap_or(&self.program)
    }
}

#[async_trait]
impl GraphResolver for Combined {
    fn graph_ids(&self) -> Vec<String> {
        let mut ids = self.program.graph_ids();
        for bridged in &self.bridged {
            ids.extend(bridged.graph_ids());
        }
        ids.sort();
        ids
    }

    async fn load(&self, graph_id: &str) -> Result<Arc<dyn AgentGraph>, GraphError> {
        self.owner(graph_id).load(graph_id).await
    }

    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError> {
        self.owner(graph_id).schemas(graph_id).await
    }
}

/// A source served under the `graphs` block's ids only.
struct Aliased {
    source: Box<dyn GraphSource>,
    aliases: BTreeMap<String, String>,
}

impl GraphSource for Aliased {
    fn build(
        self: Box<Self>,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Arc<dyn GraphResolver>, GraphError> {
        let graphs = self.source.build(checkpointer)?;
        let known = graphs.graph_ids();
        if let Some((id, target)) = self
            .aliases
            .iter()
            .find(|(_, target)| !known.contains(target))
        {
            return Err(GraphError::NotFound(format!(
                "graphs.{id}: unknown graph {target:?}; this program's graphs: {}",
                known.join(", ")
            )));
        }
        Ok(Arc::new(AliasedGraphs {
            graphs,
            aliases: self.aliases,
        }))
    }
}

/// Serves `served id → source id` over the source's resolver.
struct AliasedGraphs {
    graphs: Arc<dyn GraphResolver>,
    aliases: BTreeMap<String, String>,
}

impl AliasedGraphs {
    fn target(&self, graph_id: &str) -> Result<&str, GraphError> {
        self.aliases
            .get(graph_id)
            .map(String::as_str)
            .ok_or_else(|| GraphError::NotFound(format!("Graph '{graph_id}' not found")))
    }
}

#[async_trait]
impl GraphResolver for AliasedGraphs {
    fn graph_ids(&self) -> Vec<String> {
        self.aliases.keys().cloned().collect()
    }

    async fn load(&self, graph_id: &str) -> Result<Arc<dyn AgentGraph>, GraphError> {
        self.graphs.load(self.target(graph_id)?).await
    }

    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError> {
        let mut schema = self.graphs.schemas(self.target(graph_id)?).await?;
        schema.graph_id = Some(graph_id.to_owned());
        Ok(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use service_graph::{GraphRegistry, InMemorySaver};

    fn source(_: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
        let mut registry = GraphRegistry::new();
        for id in ["echo", "steps"] {
            registry.register(
                id,
                GraphSchema::default(),
                Arc::new(|| Box::pin(async { Err(GraphError::NotFound("not loaded".into())) })),
            );
        }
        Ok(registry)
    }

    fn build(aliases: &[(&str, &str)]) -> Result<Arc<dyn GraphResolver>, GraphError> {
        let aliases = aliases
            .iter()
            .map(|(id, target)| ((*id).to_owned(), (*target).to_owned()))
            .collect();
        served(Box::new(source), Some(aliases), Vec::new()).build(Arc::new(InMemorySaver::new()))
    }

    #[tokio::test]
    async fn the_graphs_block_renames_and_narrows_the_source() {
        let graphs = build(&[("chat", "echo")]).unwrap();
        assert_eq!(graphs.graph_ids(), ["chat"]);
        let schema = graphs.schemas("chat").await.unwrap();
        assert_eq!(schema.graph_id.as_deref(), Some("chat"));
        assert!(graphs.schemas("steps").await.is_err());
    }

    #[test]
    fn an_alias_of_a_graph_the_source_lacks_names_its_key() {
        let error = build(&[("chat", "echo"), ("talk", "parrot")])
            .err()
            .unwrap();
        assert!(error.to_string().contains("graphs.talk"), "{error}");
        assert!(error.to_string().contains("echo, steps"), "{error}");
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    fn block(entries: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            entries
                .iter()
                .map(|(id, target)| ((*id).to_owned(), (*target).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn a_langgraph_json_graphs_block_splits_into_python_js_and_program_graphs() {
        let plan = GraphPlan::of(block(&[
            ("agent", "./src/agent.py:graph"),
            ("pkg", "my_pkg.graphs:make_graph"),
            ("ts", "./src/agent.ts:graph"),
            ("built", "./dist/agent.mjs"),
            ("fast", "rust:echo"),
            ("chat", "echo"),
        ]))
        .unwrap();
        assert_eq!(
            plan.python.keys().collect::<Vec<_>>(),
            ["agent", "pkg"],
            "{plan:?}"
        );
        assert_eq!(plan.node["ts"], "./src/agent.ts:graph");
        assert_eq!(plan.node["built"], "./dist/agent.mjs");
        let program = plan.program.unwrap();
        assert_eq!(program["fast"], "echo");
        assert_eq!(program["chat"], "echo");
        assert_eq!(GraphPlan::of(None).unwrap(), GraphPlan::default());
    }

    #[test]
    fn malformed_targets_are_refused_naming_the_graph() {
        for (target, says) in [
            ("./src/agent.ts:", "./file.ts:export"),
            ("./src/agent.py", "names a file but no graph"),
            ("./src/agent.py:", "must be"),
        ] {
            let error = GraphPlan::of(block(&[("agent", target)])).unwrap_err();
            assert!(error.0.contains("graphs.agent"), "{error}");
            assert!(error.0.contains(says), "{error}");
        }
    }

    #[test]
    fn dependencies_paths_and_env_come_from_the_config_file() {
        let dir = std::env::temp_dir().join(format!("graphs-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(".env"),
            "# comment\nexport OPENAI_API_KEY=\"sk-1\"\nPLAIN = two words\n\nQUOTED='x=y'\n",
        )
        .unwrap();
        let python = block(&[("agent", "./agent.py:graph")]).unwrap();
        let dependencies = [
            ".".to_owned(),
            "./lib".to_owned(),
            "langchain_openai".to_owned(),
        ];
        let options = bridge_options(
            python.clone(),
            &dir,
            &dependencies,
            Some(&serde_json::json!(".env")),
            Some("/opt/venv/bin/python"),
            Some(3),
        )
        .unwrap();
        assert_eq!(options.paths, [dir.join("."), dir.join("./lib")]);
        assert_eq!(
            options.env,
            [
                ("OPENAI_API_KEY".to_owned(), "sk-1".to_owned()),
                ("PLAIN".to_owned(), "two words".to_owned()),
                ("QUOTED".to_owned(), "x=y".to_owned()),
            ]
        );
        assert_eq!(options.python, "/opt/venv/bin/python");
        assert_eq!(options.workers, 3);
        let map = bridge_options(
            python.clone(),
            &dir,
            &[],
            Some(&serde_json::json!({"A": "1", "B": 2})),
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            map.env,
            [
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "2".to_owned())
            ]
        );
        assert_eq!(map.python, "python3");
        let missing = bridge_options(
            python,
            &dir,
            &[],
            Some(&serde_json::json!("nope.env")),
            None,
            None,
        );
        assert!(missing.unwrap_err().0.contains("nope.env"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Whether `store.index.embed` names Python: a file or module attribute
/// (`./embed.py:embeddings`), or a LangChain `provider:model` string for a provider
/// this server has no native embedder of (`openai:` and `local:` are its own).
pub(crate) fn embedded_by_python(embed: &str) -> bool {
    let Some((head, _)) = embed.rsplit_once(':') else {
        return false;
    };
    let provider = embed.split_once(':').map_or("", |(provider, _)| provider);
    head.ends_with(".py") || head.contains('/') || !matches!(provider, "openai" | "local")
}

#[cfg(test)]
mod embed_tests {
    use super::embedded_by_python;

    #[test]
    fn python_serves_files_modules_and_other_langchain_providers() {
        for embed in [
            "./embed.py:embeddings",
            "src/embed.py:make",
            "my_pkg.embed:embeddings",
            "cohere:embed-english-v3.0",
        ] {
            assert!(embedded_by_python(embed), "{embed}");
        }
        for embed in [
            "openai:text-embedding-3-small",
            "local:/models/minilm",
            "nonsense",
        ] {
            assert!(!embedded_by_python(embed), "{embed}");
        }
    }
}
