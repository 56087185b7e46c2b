//! Statistics helpers: latency percentiles within a run, median and spread across runs,
//! and an SSE frame counter that works across chunk boundaries.

/// The `q`-quantile (0..=1) of `sorted` by nearest rank; `None` when empty.
pub(crate) fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.saturating_sub(1).min(sorted.len() - 1)])
}

/// Median, minimum and maximum of some figures (the median of an even count is the
/// mean of the middle two); `None` when empty.
pub(crate) fn spread(values: &[f64]) -> Option<Spread> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: sorted[0],
        max: sorted[n - 1],
    })
}

/// Median and range of a figure over several runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

/// Microseconds to milliseconds.
pub(crate) fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// Counts SSE frames (event blocks ended by an empty line) in a byte stream fed in
/// arbitrary chunks. Accepts CR LF, LF or CR line ends; comment-only blocks
/// (heartbeats, `: ...`) are not counted.
#[derive(Debug, Default)]
pub(crate) struct SseCounter {
    frames: u64,
    /// The current line has no byte yet.
    line_empty: bool,
    /// The current line is a comment.
    comment: bool,
    /// The current block has a non-comment line.
    block_has_field: bool,
    /// The previous byte was CR (so a following LF ends nothing).
    after_cr: bool,
    started: bool,
}

impl SseCounter {
    /// Feeds bytes; returns the number of frames completed so far.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> u64 {
        if !self.started {
            self.started = true;
            self.line_empty = true;
        }
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    if self.line_empty {
                        if self.block_has_field {
                            self.frames += 1;
                        }
                        self.block_has_field = false;
                    }
                    self.line_empty = true;
                    self.comment = false;
                }
                _ => {
                    self.after_cr = false;
                    if self.line_empty {
                        self.line_empty = false;
                        self.comment = byte == b':';
                        if !self.comment {
                            self.block_has_field = true;
                        }
                    }
                }
            }
        }
        self.frames
    }

    /// Frames completed so far.
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 0.5), Some(50));
        assert_eq!(percentile(&sorted, 0.99), Some(99));
        assert_eq!(percentile(&sorted, 1.0), Some(100));
        assert_eq!(percentile(&sorted, 0.0), Some(1));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn spread_gives_median_and_range() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = spread(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[f64::NAN, 5.0]).unwrap().median, 5.0);
    }

    #[test]
    fn frames_are_counted_across_chunks_and_line_ends() {
        let text = b"event: metadata\r\ndata: {}\r\n\r\n: heartbeat\r\n\r\nevent: values\ndata: 1\n\nevent: x\rdata: 2\r\r";
        let mut whole = SseCounter::default();
        assert_eq!(whole.feed(text), 3);
        for split in 1..text.len() {
            let mut counter = SseCounter::default();
            counter.feed(&text[..split]);
            assert_eq!(counter.feed(&text[split..]), 3, "split at {split}");
        }
        let mut bytewise = SseCounter::default();
        for byte in text {
            bytewise.feed(std::slice::from_ref(byte));
        }
        assert_eq!(bytewise.frames(), 3);
    }

    #[test]
    fn an_unfinished_frame_is_not_counted() {
        let mut counter = SseCounter::default();
        assert_eq!(counter.feed(b"event: values\r\ndata: {}\r\n"), 0);
        assert_eq!(counter.feed(b"\r\n"), 1);
    }
}
