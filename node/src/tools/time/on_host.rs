//! time on a remote host: the host's clock (`date`), time zone (`$TZ`,
//! `/etc/timezone` or the `/etc/localtime` link), uptime (`/proc/uptime`) and
//! synchronisation state (`timedatectl`, systemd hosts; `null` elsewhere), in the
//! local tool's shape. `source` says where the synchronisation state came from.

use crate::remote::{Lane, RemoteHost};
use crate::tool::ToolContext;
use crate::tools::args::Args;
use crate::tools::output;
use crate::tools::time::{Ntp, TimeOutput};
use chrono::{DateTime, FixedOffset, SecondsFormat, Utc};
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::sync::Arc;

/// The far-host body of [`super::Time`] (made with `Time::on`): time on the host of an
/// SSH- or container-backed node. Not a tool of its own: the tool dispatches here.
pub(crate) struct OnHost {
    host: Arc<RemoteHost>,
}

impl OnHost {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        OnHost { host }
    }
}

const SCRIPT: &str = r#"gsv_text now "$(date +%s%N 2>/dev/null)"
gsv_text secs "$(date +%s)"
gsv_text offset "$(date +%z)"
if [ -n "$TZ" ]; then gsv_text tz "$TZ"
elif [ -r /etc/timezone ]; then gsv_text tz "$(head -n 1 /etc/timezone)"
else gsv_text tz "$(readlink /etc/localtime 2>/dev/null | sed -n 's|.*zoneinfo/||p')"; fi
[ -r /proc/uptime ] && gsv_text uptime "$(cat /proc/uptime)"
if command -v timedatectl >/dev/null 2>&1; then gsv_text ntp "$(timedatectl show -p NTPSynchronized --value 2>/dev/null)"; fi"#;

impl OnHost {
    pub(crate) async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Err(message) = Args::new(&args, &[]) {
            return ToolResult::error(format!("time: {message}"));
        }
        match self
            .host
            .run(Lane::Work, ctx.owner(), SCRIPT, 64 * 1024)
            .await
        {
            Ok(reply) => match parse(
                reply.text("now").as_deref(),
                reply.text("secs").as_deref(),
                reply.text("offset").as_deref().unwrap_or("+0000"),
            ) {
                Some((utc, offset)) => {
                    let local = utc.with_timezone(&offset);
                    output::structured(&TimeOutput {
                        utc: utc.to_rfc3339_opts(SecondsFormat::Millis, true),
                        local: local.to_rfc3339_opts(SecondsFormat::Millis, false),
                        unix_ms: utc.timestamp_millis(),
                        timezone: reply.text("tz").filter(|t| !t.is_empty()),
                        utc_offset_seconds: offset.local_minus_utc(),
                        uptime_seconds: reply
                            .text("uptime")
                            .and_then(|u| u.split_whitespace().next()?.parse().ok())
                            .unwrap_or(0.0),
                        ntp: Ntp {
                            synchronized: match reply.text("ntp").as_deref() {
                                Some("yes") => Some(true),
                                Some("no") => Some(false),
                                _ => None,
                            },
                            source: reply
                                .text("ntp")
                                .filter(|v| v == "yes" || v == "no")
                                .map(|_| "timedatectl"),
                            max_error_us: None,
                            est_error_us: None,
                        },
                    })
                }
                None => ToolResult::error("time: the host's date gave no usable answer"),
            },
            Err(e) => ToolResult::error(format!("time: {e}")),
        }
    }
}

/// The host's now (`date +%s%N` where `%N` works, else `date +%s`) and its UTC
/// offset (`date +%z`).
fn parse(
    nanos: Option<&str>,
    secs: Option<&str>,
    offset: &str,
) -> Option<(DateTime<Utc>, FixedOffset)> {
    let utc = match nanos.filter(|n| n.len() > 10 && n.bytes().all(|b| b.is_ascii_digit())) {
        Some(n) => {
            let ns: i64 = n.parse().ok()?;
            DateTime::from_timestamp(
                ns.div_euclid(1_000_000_000),
                ns.rem_euclid(1_000_000_000) as u32,
            )?
        }
        None => DateTime::from_timestamp(secs?.trim().parse().ok()?, 0)?,
    };
    let (sign, digits) = match offset.trim().split_at_checked(1)? {
        ("+", d) => (1, d),
        ("-", d) => (-1, d),
        _ => return None,
    };
    let (h, m) = (
        digits.get(..2)?.parse::<i32>().ok()?,
        digits.get(2..4)?.parse::<i32>().ok()?,
    );
    Some((utc, FixedOffset::east_opt(sign * (h * 3600 + m * 60))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_answers_are_read() {
        let (utc, off) = parse(Some("1700000000123456789"), Some("1700000000"), "+0130").unwrap();
        assert_eq!(utc.timestamp_millis(), 1_700_000_000_123);
        assert_eq!(off.local_minus_utc(), 5400);
        // busybox date prints %N literally: the seconds are used.
        let (utc, off) = parse(Some("1700000000%N"), Some("1700000000"), "-0500").unwrap();
        assert_eq!(utc.timestamp(), 1_700_000_000);
        assert_eq!(off.local_minus_utc(), -18000);
        assert!(parse(None, Some("x"), "+0000").is_none());
        assert!(parse(None, Some("1"), "0000").is_none());
    }
}
