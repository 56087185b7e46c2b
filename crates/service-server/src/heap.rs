//! SPEC's heap warning: resident memory is sampled every SERVICE_HEAP_SAMPLE_MS
//! against the container's memory limit (cgroup v2, else v1), else the machine's
//! memory, and a warning is logged once per crossing above SERVICE_HEAP_WARN_PERCENT,
//! re-armed when usage drops back below it.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// SPEC's defaults.
pub(crate) const DEFAULT_WARN_PERCENT: f64 = 85.0;
pub(crate) const DEFAULT_SAMPLE: Duration = Duration::from_secs(30);

/// cgroup v1 reports "no limit" as a huge number near `i64::MAX` rounded to pages;
/// anything above this is no limit.
const UNLIMITED_ABOVE: u64 = 1 << 60;

/// Whether a sample is a new crossing of the threshold.
#[derive(Debug)]
pub(crate) struct Crossing {
    percent: f64,
    above: bool,
}

impl Crossing {
    pub(crate) fn new(percent: f64) -> Self {
        Self {
            percent,
            above: false,
        }
    }

    /// The share of `limit` used when this sample crosses above the threshold;
    /// `None` while below it or still above it since the last warning.
    pub(crate) fn observe(&mut self, resident: u64, limit: u64) -> Option<f64> {
        if limit == 0 {
            return None;
        }
        let share = resident as f64 * 100.0 / limit as f64;
        let above = share > self.percent;
        let crossed = above && !self.above;
        self.above = above;
        crossed.then_some(share)
    }
}

/// A cgroup limit file's content in bytes; `None` for no limit (`max`, or v1's huge
/// sentinel) or anything unreadable.
pub(crate) fn parse_limit(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|bytes| *bytes > 0 && *bytes < UNLIMITED_ABOVE)
}

/// A `kB` line of /proc's `status` or `meminfo` (`VmRSS:`, `MemTotal:`) in bytes.
pub(crate) fn parse_kb_field(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The memory this process may use: its cgroup's limit, else the machine's memory.
fn memory_limit() -> Option<u64> {
    read("/sys/fs/cgroup/memory.max")
        .as_deref()
        .and_then(parse_limit)
        .or_else(|| {
            read("/sys/fs/cgroup/memory/memory.limit_in_bytes")
                .as_deref()
                .and_then(parse_limit)
        })
        .or_else(|| {
            read("/proc/meminfo")
                .as_deref()
                .and_then(|text| parse_kb_field(text, "MemTotal:"))
        })
}

fn resident() -> Option<u64> {
    read("/proc/self/status")
        .as_deref()
        .and_then(|text| parse_kb_field(text, "VmRSS:"))
}

/// Samples until `stop`; a threshold of 0 or a system without /proc samples nothing.
pub(crate) fn spawn(percent: f64, every: Duration, stop: CancellationToken) {
    if percent <= 0.0 {
        return;
    }
    let (Some(limit), Some(_)) = (memory_limit(), resident()) else {
        tracing::info!("no memory limit or resident size readable here; the heap warning is off");
        return;
    };
    tokio::spawn(async move {
        let mut crossing = Crossing::new(percent);
        let mut ticks = tokio::time::interval(every);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let Some(used) = resident() else { return };
            if let Some(share) = crossing.observe(used, limit) {
                tracing::warn!(
                    resident_bytes = used,
                    limit_bytes = limit,
                    "resident memory is at {share:.0}% of the {limit}-byte limit, above SERVICE_HEAP_WARN_PERCENT={percent}"
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_per_crossing_and_rearms_below() {
        let mut crossing = Crossing::new(85.0);
        assert_eq!(crossing.observe(80, 100), None);
        assert_eq!(
            crossing.observe(85, 100),
            None,
            "at the threshold is not above"
        );
        assert_eq!(crossing.observe(90, 100), Some(90.0));
        assert_eq!(crossing.observe(95, 100), None, "still above: no repeat");
        assert_eq!(crossing.observe(50, 100), None);
        assert_eq!(crossing.observe(86, 100), Some(86.0), "re-armed below");
        assert_eq!(crossing.observe(1, 0), None, "no limit, no share");
    }

    #[test]
    fn cgroup_limits_parse_and_no_limit_is_none() {
        assert_eq!(parse_limit("536870912\n"), Some(536_870_912));
        assert_eq!(parse_limit("max\n"), None, "cgroup v2 without a limit");
        assert_eq!(
            parse_limit("9223372036854771712\n"),
            None,
            "cgroup v1 without a limit"
        );
        assert_eq!(parse_limit("0"), None);
        assert_eq!(parse_limit(""), None);
    }

    #[test]
    fn proc_kb_fields_parse_to_bytes() {
        let status = "Name:\tservice\nVmPeak:\t  2000 kB\nVmRSS:\t    1536 kB\n";
        assert_eq!(parse_kb_field(status, "VmRSS:"), Some(1536 * 1024));
        let meminfo = "MemTotal:       24576000 kB\nMemFree: 1 kB\n";
        assert_eq!(
            parse_kb_field(meminfo, "MemTotal:"),
            Some(24_576_000 * 1024)
        );
        assert_eq!(parse_kb_field(status, "MemTotal:"), None);
    }

    #[test]
    fn this_process_reads_its_resident_memory_and_a_limit() {
        let used = resident().expect("VmRSS on Linux");
        let limit = memory_limit().expect("a cgroup or machine limit on Linux");
        assert!(used > 0 && used < limit, "{used} of {limit}");
    }
}
