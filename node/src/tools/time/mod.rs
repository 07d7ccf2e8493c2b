//! The time tool: the node's clock, time zone, uptime and clock synchronisation.
//!
//! Agents that compare logs, schedule work or debug TLS and token expiry across a
//! fleet need each machine's own idea of "now" and whether to trust it. The tool
//! reports the wall clock in UTC and local time (RFC 3339), the time zone (its IANA
//! name when the system says, and the UTC offset), the time since boot from a
//! monotonic clock (`CLOCK_BOOTTIME` on Linux, which counts suspend; the monotonic
//! clock elsewhere), and whether the kernel considers the clock synchronised
//! (`adjtimex(2)` on Linux, read-only: the state NTP daemons — chrony, ntpd,
//! systemd-timesyncd — maintain; `null` where it cannot be read).
//!
//! Result (`structuredContent`): [`TimeOutput`].

pub mod on_host;

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use chrono::{Local, SecondsFormat, Utc};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// The time tool.
#[derive(Default)]
pub struct Time {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl Time {
    /// Time on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Time on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        Time { host: Some(host) }
    }
}

/// time's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeOutput {
    /// Now, RFC 3339 in UTC (milliseconds).
    pub utc: String,
    /// Now, RFC 3339 with the node's UTC offset.
    pub local: String,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
    /// The IANA time zone (e.g. `Europe/Paris`), when the system says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The local offset from UTC, in seconds (east positive).
    pub utc_offset_seconds: i32,
    /// Seconds since boot, from a monotonic clock.
    pub uptime_seconds: f64,
    /// The clock's synchronisation state.
    pub ntp: Ntp,
}

/// Whether the node's clock is synchronised.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ntp {
    /// `true` when the kernel's clock is synchronised, `false` when not, `null` when
    /// the state could not be read.
    pub synchronized: Option<bool>,
    /// Where the state came from (`adjtimex`), absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// The kernel's maximum error estimate, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_error_us: Option<i64>,
    /// The kernel's estimated error, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub est_error_us: Option<i64>,
}

#[async_trait::async_trait]
impl Tool for Time {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "time".to_owned(),
            description: "This node's clock: UTC and local time, time zone, uptime, NTP \
                          sync."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
            capability: Capability::SystemTime.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Node clock", true, false, false, false),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn check(
        &self,
        _args: &Value,
        _ctx: &ToolContext,
    ) -> Result<(), gsv_protocol::ErrorShape> {
        crate::tools::host_ready(&self.host).await
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Some(host) = &self.host {
            return on_host::OnHost::new(std::sync::Arc::clone(host))
                .execute(args, ctx)
                .await;
        }
        if let Err(message) = Args::new(&args, &[]) {
            return ToolResult::error(format!("time: {message}"));
        }
        // The time zone lookup may read files: off the connection's task.
        match tokio::task::spawn_blocking(now).await {
            Ok(out) => output::structured(&out),
            Err(e) => ToolResult::error(format!("time failed: {e}")),
        }
    }
}

/// Reads the clocks (blocking).
fn now() -> TimeOutput {
    let utc = Utc::now();
    let local = utc.with_timezone(&Local);
    TimeOutput {
        utc: utc.to_rfc3339_opts(SecondsFormat::Millis, true),
        local: local.to_rfc3339_opts(SecondsFormat::Millis, false),
        unix_ms: utc.timestamp_millis(),
        timezone: iana_time_zone::get_timezone().ok(),
        utc_offset_seconds: local.offset().local_minus_utc(),
        uptime_seconds: uptime_seconds(),
        ntp: ntp(),
    }
}

fn uptime_seconds() -> f64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let id = rustix::time::ClockId::Boottime;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let id = rustix::time::ClockId::Monotonic;
    let t = rustix::time::clock_gettime(id);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

#[cfg(target_os = "linux")]
// `c_long` is `i64` on 64-bit targets but `i32` on 32-bit ones (a Raspberry Pi).
#[allow(clippy::useless_conversion)]
fn ntp() -> Ntp {
    // SAFETY: `timex` is a plain C struct for which all-zero bytes are a valid value;
    // with `modes == 0` (zeroed) `adjtimex` only reads the kernel's clock state into
    // the struct we own and changes nothing (no privilege needed).
    let (state, tx) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        let state = libc::adjtimex(&mut tx);
        (state, tx)
    };
    if state < 0 {
        return Ntp {
            synchronized: None,
            source: None,
            max_error_us: None,
            est_error_us: None,
        };
    }
    Ntp {
        synchronized: Some(state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0),
        source: Some("adjtimex"),
        max_error_us: Some(i64::from(tx.maxerror)),
        est_error_us: Some(i64::from(tx.esterror)),
    }
}

#[cfg(not(target_os = "linux"))]
fn ntp() -> Ntp {
    Ntp {
        synchronized: None,
        source: None,
        max_error_us: None,
        est_error_us: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reports_the_clock() {
        let r = Time::new()
            .execute(json!({}), ToolContext::new("/", "1"))
            .await;
        assert!(!r.is_error, "{}", r.joined_text());
        let v = r.structured_content.unwrap();
        let utc = chrono::DateTime::parse_from_rfc3339(v["utc"].as_str().unwrap()).unwrap();
        let local = chrono::DateTime::parse_from_rfc3339(v["local"].as_str().unwrap()).unwrap();
        assert_eq!(utc, local);
        assert_eq!(utc.timestamp_millis(), v["unixMs"].as_i64().unwrap());
        assert_eq!(
            local.offset().local_minus_utc() as i64,
            v["utcOffsetSeconds"].as_i64().unwrap()
        );
        assert!(v["uptimeSeconds"].as_f64().unwrap() > 0.0);
        #[cfg(target_os = "linux")]
        assert!(v["ntp"]["synchronized"].is_boolean(), "{v}");
        let r = Time::new()
            .execute(json!({"x": 1}), ToolContext::new("/", "1"))
            .await;
        assert!(r.is_error);
    }
}
