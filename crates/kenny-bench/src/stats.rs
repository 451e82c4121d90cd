//! Percentiles over recorded latencies.

use std::time::Duration;

pub(crate) struct Summary {
    pub count: usize,
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub max: Duration,
}

pub(crate) fn summarize(samples: &mut [Duration]) -> Summary {
    samples.sort_unstable();
    let at = |q: f64| {
        if samples.is_empty() {
            Duration::ZERO
        } else {
            samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1]
        }
    };
    Summary {
        count: samples.len(),
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
        max: samples.last().copied().unwrap_or_default(),
    }
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_right_ranks() {
        let mut v: Vec<_> = (1..=100).map(Duration::from_millis).collect();
        let s = summarize(&mut v);
        assert_eq!(
            (s.p50, s.p95, s.p99, s.max),
            (
                Duration::from_millis(50),
                Duration::from_millis(95),
                Duration::from_millis(99),
                Duration::from_millis(100)
            )
        );
        assert_eq!(summarize(&mut []).p50, Duration::ZERO);
    }
}
