//! The exporter's side of `service_graph::trace_context` (docs/performance.md §17):
//! the ids and sampling of new traces, each ended span encoded into the batch being
//! filled, and a `tracing` layer turning the service's warnings and errors logged in
//! a sampled span into its events. The spans are not `tracing` spans, so the layer
//! sees no span and keeps nothing per span.

use std::sync::Arc;
use std::time::SystemTime;

use service_graph::trace_context::{self, Ended, SpanContext, SpanEvent, Tracer};
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};

use super::export::{Spans, write_span};

/// The tracer the exporter installs.
#[derive(Debug)]
pub(super) struct Exporter {
    pub(super) spans: Arc<Spans>,
    pub(super) sampler: Sampler,
}

impl Tracer for Exporter {
    fn start_trace(&self, remote: Option<&SpanContext>) -> (u128, bool) {
        let trace_id = remote.map_or_else(|| fastrand::u128(1..), |remote| remote.trace_id);
        (trace_id, self.sampler.samples(trace_id, remote))
    }

    fn span_id(&self) -> u64 {
        fastrand::u64(1..)
    }

    fn export(&self, span: &Ended<'_>) {
        self.spans.push(|out| write_span(out, span));
    }
}

/// The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, as the
/// OpenTelemetry SDKs read them: `always_on`, `always_off`, `traceidratio` and their
/// `parentbased_` forms (the default `parentbased_always_on`), which follow a remote
/// parent's sampled flag and decide only a trace begun here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Sampler {
    parent_based: bool,
    /// A trace is sampled when the low 63 bits of its id's lower half (the SDKs'
    /// `traceidratio`) are below this.
    below: u64,
}

impl Sampler {
    /// The sampler the variables describe; a sampler not built in, or a ratio that is
    /// not a number, is an error naming the variable.
    pub(super) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let ratio = || {
            let arg = var("OTEL_TRACES_SAMPLER_ARG");
            match arg.as_deref().map(|arg| arg.trim().parse::<f64>()) {
                // The SDKs' default.
                None => Ok(1.0),
                Some(Ok(ratio)) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
                Some(_) => Err(format!(
                    "OTEL_TRACES_SAMPLER_ARG={} is not a ratio from 0 to 1",
                    arg.unwrap_or_default()
                )),
            }
        };
        let (parent_based, ratio) = match var("OTEL_TRACES_SAMPLER").as_deref().map(str::trim) {
            None | Some("parentbased_always_on") => (true, 1.0),
            Some("always_on") => (false, 1.0),
            Some("always_off") => (false, 0.0),
            Some("parentbased_always_off") => (true, 0.0),
            Some("traceidratio") => (false, ratio()?),
            Some("parentbased_traceidratio") => (true, ratio()?),
            Some(other) => {
                return Err(format!(
                    "OTEL_TRACES_SAMPLER={other} is not supported: always_on, always_off, traceidratio and their parentbased_ forms are"
                ));
            }
        };
        Ok(Self {
            parent_based,
            below: match ratio {
                ratio if ratio >= 1.0 => u64::MAX,
                ratio => (ratio * (1_u64 << 63) as f64) as u64,
            },
        })
    }

    fn samples(&self, trace_id: u128, remote: Option<&SpanContext>) -> bool {
        match remote {
            Some(remote) if self.parent_based => remote.sampled,
            _ => (trace_id as u64 >> 1) < self.below,
        }
    }
}

/// The layer: a warning or error logged in a sampled span is its event (an error also
/// marks it failed).
#[derive(Debug)]
pub(super) struct SpanEvents;

/// The layer's filter: the service's warnings and errors.
#[derive(Debug)]
pub(super) struct Wanted;

impl Wanted {
    fn wants(meta: &Metadata<'_>) -> bool {
        meta.is_event() && meta.target().starts_with("service_") && *meta.level() <= Level::WARN
    }
}

impl<S> Filter<S> for Wanted {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        match Self::wants(meta) {
            true => Interest::always(),
            false => Interest::never(),
        }
    }
}

impl<S: Subscriber> Layer<S> for SpanEvents {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        trace_context::record_current(|span| {
            let mut fields = EventFields::default();
            event.record(&mut fields);
            let level = event.metadata().level();
            if *level == Level::ERROR {
                span.error = Some(fields.message.clone());
            }
            fields.attributes.push(("level", level.as_str().into()));
            span.events.push(SpanEvent {
                time: SystemTime::now(),
                name: fields.message,
                attributes: fields.attributes,
            });
        });
    }
}

/// An event's message and other fields.
#[derive(Default)]
struct EventFields {
    message: String,
    attributes: Vec<(&'static str, trace_context::Value)>,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            name => self.attributes.push((name, value.to_owned().into())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            name => self.attributes.push((name, format!("{value:?}").into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn try_sampler(vars: &'static [(&'static str, &'static str)]) -> Result<Sampler, String> {
        Sampler::from_vars(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    fn sampler(vars: &'static [(&'static str, &'static str)]) -> Sampler {
        try_sampler(vars).unwrap()
    }

    #[test]
    fn the_sampler_is_the_one_the_sdks_read_from_the_variables() {
        let caller = |sampled| SpanContext {
            trace_id: u128::MAX,
            span_id: 1,
            sampled,
        };
        // Low half 0x..0002: below any ratio above 0; 0xff..ff: above any below 1.
        let (low, high) = (2_u128, u128::MAX);
        let default = sampler(&[]);
        assert!(default.samples(high, None));
        assert!(default.samples(high, Some(&caller(true))));
        assert!(!default.samples(high, Some(&caller(false))));
        let always_on = sampler(&[("OTEL_TRACES_SAMPLER", "always_on")]);
        assert!(always_on.samples(high, Some(&caller(false))));
        let off = sampler(&[("OTEL_TRACES_SAMPLER", "parentbased_always_off")]);
        assert!(!off.samples(low, None));
        assert!(off.samples(low, Some(&caller(true))));
        let ratio = sampler(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
        ]);
        assert!(ratio.samples(low, None));
        assert!(!ratio.samples(high, None));
        assert!(!ratio.samples(high, Some(&caller(true))));
        // The SDKs' bound: the ratio of 2^63.
        assert_eq!(ratio.below, (0.01 * (1_u64 << 63) as f64) as u64);
        let parent_ratio = sampler(&[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
        ]);
        assert!(parent_ratio.samples(high, Some(&caller(true))));
        assert_eq!(
            sampler(&[("OTEL_TRACES_SAMPLER", "traceidratio")]).below,
            u64::MAX
        );
        for wrong in [
            &[("OTEL_TRACES_SAMPLER", "xray")][..],
            &[
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "half"),
            ],
            &[
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ],
        ] {
            let message = try_sampler(wrong).unwrap_err();
            assert!(message.contains(wrong.last().unwrap().1), "{message}");
        }
    }
}
