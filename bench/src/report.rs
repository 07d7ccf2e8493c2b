//! A benchmark's result: rows of figure vs baseline, printed as a table or JSON.

use serde::Serialize;

/// One measured figure against its baseline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// What is measured, e.g. "Bash tool `true`, p50".
    pub figure: String,
    /// The measured value.
    pub value: f64,
    /// What the baseline is, e.g. "`sh -c true` spawned directly, p50".
    pub baseline: String,
    pub baseline_value: f64,
    /// Unit of both values (e.g. "µs", "ms", "calls/s", "KiB").
    pub unit: String,
    /// value / baseline_value.
    pub ratio: f64,
    /// The target, as text (e.g. "≤ 1.2×").
    pub target: String,
    /// Whether the ratio meets the target.
    pub met: bool,
}

impl Row {
    /// A row whose target is "ratio at most `max_ratio`".
    pub fn at_most(
        figure: impl Into<String>,
        value: f64,
        baseline: impl Into<String>,
        baseline_value: f64,
        unit: &str,
        max_ratio: f64,
    ) -> Row {
        let ratio = if baseline_value > 0.0 {
            value / baseline_value
        } else {
            f64::INFINITY
        };
        Row {
            figure: figure.into(),
            value,
            baseline: baseline.into(),
            baseline_value,
            unit: unit.to_owned(),
            ratio,
            target: format!("≤ {max_ratio}×"),
            met: ratio <= max_ratio,
        }
    }

    /// The same row, reported for information (no target).
    pub fn for_info(mut self) -> Row {
        self.target = "(info)".into();
        self.met = true;
        self
    }

    /// A row whose target is "ratio at least `min_ratio`".
    pub fn at_least(
        figure: impl Into<String>,
        value: f64,
        baseline: impl Into<String>,
        baseline_value: f64,
        unit: &str,
        min_ratio: f64,
    ) -> Row {
        let ratio = if baseline_value > 0.0 {
            value / baseline_value
        } else {
            0.0
        };
        Row {
            figure: figure.into(),
            value,
            baseline: baseline.into(),
            baseline_value,
            unit: unit.to_owned(),
            ratio,
            target: format!("≥ {min_ratio}×"),
            met: ratio >= min_ratio,
        }
    }
}

/// A scenario's whole result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    /// Workload description (sizes, counts) so a reader can reproduce it.
    pub workload: String,
    pub rows: Vec<Row>,
    /// Cores and memory of the machine that ran it.
    pub machine: String,
}

/// "N cores, M GiB" of this machine (Linux; "unknown" elsewhere).
pub fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0);
    format!("{cores} cores, {:.0} GiB", mem_kib / 1024.0 / 1024.0)
}

impl Report {
    pub fn new(scenario: &str, workload: impl Into<String>, rows: Vec<Row>) -> Report {
        Report {
            scenario: scenario.to_owned(),
            workload: workload.into(),
            rows,
            machine: machine(),
        }
    }

    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "scenario: {}\nworkload: {}\nmachine:  {}\n\n",
            self.scenario, self.workload, self.machine
        );
        out.push_str(&format!(
            "{:<44} {:>12} {:<40} {:>12} {:>8} {:>8} {}\n",
            "figure", "value", "baseline", "baseline", "ratio", "target", "met"
        ));
        for r in &self.rows {
            out.push_str(&format!(
                "{:<44} {:>9.1} {:<2} {:<40} {:>9.1} {:<2} {:>7.2}× {:>8} {}\n",
                r.figure,
                r.value,
                r.unit,
                r.baseline,
                r.baseline_value,
                r.unit,
                r.ratio,
                r.target,
                if r.met { "yes" } else { "NO" }
            ));
        }
        out
    }
}
