//! Percentiles and rates over measured samples.

use std::time::Duration;

/// Summary of a set of durations.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

/// Summarises samples (empty input gives zeros).
pub fn summarize(samples: &[Duration]) -> Summary {
    if samples.is_empty() {
        return Summary {
            n: 0,
            mean_us: 0.0,
            p50_us: 0.0,
            p99_us: 0.0,
            min_us: 0.0,
            max_us: 0.0,
        };
    }
    let mut us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        let idx = ((us.len() as f64 - 1.0) * p).round() as usize;
        us[idx.min(us.len() - 1)]
    };
    Summary {
        n: us.len(),
        mean_us: us.iter().sum::<f64>() / us.len() as f64,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        min_us: us[0],
        max_us: us[us.len() - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let s = summarize(&samples);
        assert_eq!(s.n, 100);
        assert_eq!(s.min_us, 1.0);
        assert_eq!(s.max_us, 100.0);
        assert!((s.p50_us - 50.0).abs() <= 1.0);
        assert!((s.p99_us - 99.0).abs() <= 1.0);
        assert_eq!(summarize(&[]).n, 0);
    }
}
