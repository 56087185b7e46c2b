//! The log (SPEC "Logging"): one `tracing` subscriber per process, set up in
//! [`init`] from the boot's filter and format, the logger the embedder chose and any
//! extra layers; the text format prints a failed run's report and a graph's load
//! failure as multi-line blocks, the JSON format as one object per event with the
//! run's ids as fields.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;
use std::sync::Arc;

use serde_json::{Map, Value};
use service_engine::telemetry::{FAILURE_TARGET, LOAD_FAILURE_TARGET};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// How the server's own log lines read (SERVICE_LOG_FORMAT).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One line per event, failures as blocks (the default).
    #[default]
    Text,
    /// One JSON object per line, the event's fields at the top level.
    Json,
}

impl LogFormat {
    /// `text` or `json`, in any case.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// A logger an embedder hands the server (SPEC Logging 1): four levels, each taking
/// the message and the event's fields (`run_id`, `node`, `stack`, ... and `target`).
/// The server turns its `tracing` events into these calls; the filter (RUST_LOG,
/// `--verbose`) still decides which events come.
pub trait Logger: Send + Sync + 'static {
    /// Debug and trace events.
    fn debug(&self, message: &str, meta: &Map<String, Value>) {
        let _ = (message, meta);
    }
    /// Info events.
    fn info(&self, message: &str, meta: &Map<String, Value>);
    /// Warnings.
    fn warn(&self, message: &str, meta: &Map<String, Value>);
    /// Errors: failed runs, graphs that cannot load, failed deliveries.
    fn error(&self, message: &str, meta: &Map<String, Value>);
}

/// A [`Logger`] writing to stderr: events at `level` and above, each line starting
/// with `prefix` (SPEC's console logger helper).
#[derive(Clone, Debug)]
pub struct ConsoleLogger {
    level: Level,
    prefix: String,
}

impl ConsoleLogger {
    /// Logs `level` and above, each line after `prefix`.
    pub fn new(level: Level, prefix: impl Into<String>) -> Self {
        Self {
            level,
            prefix: prefix.into(),
        }
    }

    fn write(&self, level: Level, message: &str, meta: &Map<String, Value>) {
        if level > self.level {
            return;
        }
        let meta = if meta.is_empty() {
            String::new()
        } else {
            format!(" {}", Value::Object(meta.clone()))
        };
        eprintln!("{}{level} {message}{meta}", self.prefix);
    }
}

impl Logger for ConsoleLogger {
    fn debug(&self, message: &str, meta: &Map<String, Value>) {
        self.write(Level::DEBUG, message, meta);
    }
    fn info(&self, message: &str, meta: &Map<String, Value>) {
        self.write(Level::INFO, message, meta);
    }
    fn warn(&self, message: &str, meta: &Map<String, Value>) {
        self.write(Level::WARN, message, meta);
    }
    fn error(&self, message: &str, meta: &Map<String, Value>) {
        self.write(Level::ERROR, message, meta);
    }
}

/// Where a boot's log goes (SPEC Logging 2: an injected logger wins; `logger: false`
/// installs nothing; otherwise the default).
#[derive(Clone, Default)]
pub(crate) enum LoggerChoice {
    /// The server's own output on stdout, in the boot's [`LogFormat`].
    #[default]
    Default,
    /// No subscriber: the embedder's own, if it installed one, gets the events.
    Off,
    /// The embedder's logger.
    Injected(Arc<dyn Logger>),
}

impl fmt::Debug for LoggerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Default => "Default",
            Self::Off => "Off",
            Self::Injected(_) => "Injected",
        })
    }
}

/// A layer over the process's registry, as [`init`] takes extra ones (each brings
/// its own filter, if it wants one).
pub(crate) type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Installs the process's subscriber: the output `logger` chooses under `filter`,
/// beside `extra` layers. With nothing to install, nothing is; a subscriber already
/// installed (an embedder's, a test's) is kept.
pub(crate) fn init(filter: &str, format: LogFormat, logger: &LoggerChoice, extra: Vec<BoxedLayer>) {
    let mut layers = extra;
    let output: Option<BoxedLayer> = match logger {
        LoggerChoice::Off => None,
        LoggerChoice::Injected(logger) => Some(
            LoggerLayer(Arc::clone(logger))
                .with_filter(EnvFilter::new(filter))
                .boxed(),
        ),
        LoggerChoice::Default => Some(match format {
            // Colours only for a terminal, not for a file or a log collector.
            LogFormat::Text => tracing_subscriber::fmt::layer()
                .with_ansi(std::io::stdout().is_terminal())
                .event_format(Blocks::default())
                .with_filter(EnvFilter::new(filter))
                .boxed(),
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_span_list(false)
                .with_filter(EnvFilter::new(filter))
                .boxed(),
        }),
    };
    layers.extend(output);
    if layers.is_empty() {
        return;
    }
    let _ = tracing_subscriber::registry().with(layers).try_init();
}

/// Turns events into [`Logger`] calls.
struct LoggerLayer(Arc<dyn Logger>);

impl<S: Subscriber> Layer<S> for LoggerLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.message.take().unwrap_or_default();
        let mut meta = fields.meta;
        meta.insert(
            "target".into(),
            Value::String(event.metadata().target().into()),
        );
        match *event.metadata().level() {
            Level::ERROR => self.0.error(&message, &meta),
            Level::WARN => self.0.warn(&message, &meta),
            Level::INFO => self.0.info(&message, &meta),
            _ => self.0.debug(&message, &meta),
        }
    }
}

/// An event's message and other fields.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    meta: Map<String, Value>,
}

impl Fields {
    fn text(&self, name: &str) -> Option<&str> {
        self.meta.get(name).and_then(Value::as_str)
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(text) => text,
                other => other.to_string(),
            });
        } else {
            self.meta.insert(field.name().to_owned(), value);
        }
    }
}

/// The text format: tracing's own line, except for a failed run's report and a
/// graph's load failure, which print as blocks (SPEC Logging 5).
#[derive(Default)]
struct Blocks {
    line: Format,
}

impl<S, N> FormatEvent<S, N> for Blocks
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let target = event.metadata().target();
        if target != FAILURE_TARGET && target != LOAD_FAILURE_TARGET {
            return self.line.format_event(ctx, writer, event);
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        SystemTime.format_time(&mut writer)?;
        let block = if target == FAILURE_TARGET {
            failure_block(&fields)
        } else {
            load_failure_block(&fields)
        };
        writeln!(writer, " {} {block}", event.metadata().level())
    }
}

/// A failed run's block: its ids, node, error, causes, code frame and stack, each
/// left out when unknown.
fn failure_block(fields: &Fields) -> String {
    let mut block = String::from("run failed");
    for (label, name) in [
        ("run", "run_id"),
        ("assistant", "assistant_id"),
        ("thread", "thread_id"),
        ("graph", "graph_id"),
        ("node", "node"),
        ("error", "error"),
    ] {
        if let Some(value) = fields.text(name).filter(|value| !value.is_empty()) {
            let _ = write!(block, "\n  {label:<10} {value}");
        }
    }
    if let Some(cause) = fields.text("cause") {
        for link in cause.lines() {
            let _ = write!(block, "\n  {:<10} {link}", "caused by");
        }
    }
    for (label, name) in [("code frame", "code_frame"), ("stack", "stack")] {
        if let Some(text) = fields.text(name) {
            let _ = write!(block, "\n  {label}");
            for line in text.lines() {
                let _ = write!(block, "\n    {line}");
            }
        }
    }
    block
}

/// A graph's load-failure block: its id and the reason (a runtime's traceback, when
/// it gave one).
fn load_failure_block(fields: &Fields) -> String {
    let graph = fields.text("graph_id").unwrap_or_default();
    let mut block = format!("graph {graph} failed to load; the other graphs keep serving");
    for line in fields.text("error").unwrap_or_default().lines() {
        let _ = write!(block, "\n    {line}");
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields {
            message: None,
            meta: pairs
                .iter()
                .map(|(name, value)| ((*name).to_owned(), Value::String((*value).to_owned())))
                .collect(),
        }
    }

    #[test]
    fn the_failure_block_names_each_part_and_leaves_out_the_unknown() {
        let block = failure_block(&fields(&[
            ("run_id", "r1"),
            ("assistant_id", "a1"),
            ("thread_id", "t1"),
            ("graph_id", "fail"),
            ("error", "ValueError: boom"),
            ("cause", "RuntimeError: root cause"),
            ("stack", "ValueError: boom\n    at node explode"),
        ]));
        assert_eq!(
            block,
            "run failed\n  run        r1\n  assistant  a1\n  thread     t1\n  graph      fail\n  error      ValueError: boom\n  caused by  RuntimeError: root cause\n  stack\n    ValueError: boom\n        at node explode"
        );
    }

    #[test]
    fn log_formats_parse_in_any_case() {
        assert_eq!(LogFormat::parse("JSON"), Some(LogFormat::Json));
        assert_eq!(LogFormat::parse(" text "), Some(LogFormat::Text));
        assert_eq!(LogFormat::parse("yaml"), None);
    }
}
