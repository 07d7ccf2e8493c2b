//! `gsv cp`'s progress line on a terminal's stderr: bytes, rate and time left, redrawn
//! at most ten times a second. Nothing when stderr is not a terminal.

use std::io::Write;
use std::time::{Duration, Instant};

/// Least time between two redraws.
const EVERY: Duration = Duration::from_millis(100);

/// Whether stderr is a terminal (progress is drawn only then).
pub fn stderr_is_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// Erases the progress line.
pub fn clear_line(on: bool) {
    if on {
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    }
}

/// The progress line's state.
pub struct Progress {
    on: bool,
    started: Instant,
    /// Bytes done when the first update came (a resumed copy's head start).
    first: Option<u64>,
    last_draw: Option<Instant>,
    drawn: bool,
}

impl Progress {
    pub fn new(on: bool) -> Progress {
        Progress {
            on,
            started: Instant::now(),
            first: None,
            last_draw: None,
            drawn: false,
        }
    }

    /// `done` of `total` bytes are copied.
    pub fn update(&mut self, done: u64, total: u64) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        let first = *self.first.get_or_insert(done);
        if self
            .last_draw
            .is_some_and(|t| now.duration_since(t) < EVERY && done < total)
        {
            return;
        }
        self.last_draw = Some(now);
        let line = line(done, total, done - first.min(done), now - self.started);
        eprint!("\r\x1b[2K{line}");
        let _ = std::io::stderr().flush();
        self.drawn = true;
    }

    /// Erases the line so a message can be printed; the next update draws it again.
    pub fn interrupt(&mut self) {
        if self.drawn {
            clear_line(self.on);
            self.drawn = false;
            self.last_draw = None;
        }
    }

    /// Ends the line (the copy is over, whichever way).
    pub fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

/// `12.0 MiB / 64.0 MiB  18%  40.2 MiB/s  ETA 1s`: `moved` bytes went in `elapsed`.
pub fn line(done: u64, total: u64, moved: u64, elapsed: Duration) -> String {
    let pct = (done.min(total).saturating_mul(100))
        .checked_div(total)
        .unwrap_or(100);
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { moved as f64 / secs } else { 0.0 };
    let eta = if done >= total {
        "done".to_owned()
    } else if rate > 0.0 {
        format!("ETA {}", duration((total - done) as f64 / rate))
    } else {
        "ETA --".to_owned()
    };
    format!(
        "{} / {}  {pct}%  {}/s  {eta}",
        bytes(done as f64),
        bytes(total as f64),
        bytes(rate)
    )
}

/// `512 B`, `1.5 KiB`, `3.2 MiB`, `1.0 GiB`.
fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{} B", v as u64)
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `42s`, `3m05s`, `2h10m`.
fn duration(secs: f64) -> String {
    let s = secs.ceil() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_bytes_rate_and_time_left() {
        let mib = 1024 * 1024;
        assert_eq!(
            line(16 * mib, 64 * mib, 16 * mib, Duration::from_secs(2)),
            "16.0 MiB / 64.0 MiB  25%  8.0 MiB/s  ETA 6s"
        );
        assert_eq!(
            line(64 * mib, 64 * mib, 64 * mib, Duration::from_secs(4)),
            "64.0 MiB / 64.0 MiB  100%  16.0 MiB/s  done"
        );
        assert_eq!(
            line(0, 10, 0, Duration::ZERO),
            "0 B / 10 B  0%  0 B/s  ETA --"
        );
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(7300.0), "2h01m");
    }
}
