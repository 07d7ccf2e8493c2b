//! What an SSH- or container-backed node reports about its host: the facts and the
//! binary probe describe the far host (where the tools run), never the machine the
//! node process runs on. One request collects both; the probe asks through
//! [`crate::probe::FarHost`], implemented here, so it names no transport.

use super::host::{Lane, RemoteHost};
use super::quote::quote;
use crate::facts::{meminfo_total, os_release_name, uptime_secs};
use crate::probe::FarHost;
pub use crate::probe::HostFacts;

/// The probe's view of the host ([`crate::probe::Probe::remote`]).
#[async_trait::async_trait]
impl FarHost for RemoteHost {
    async fn facts(
        &self,
        bins: &[String],
    ) -> Result<HostFacts, Box<dyn std::error::Error + Send + Sync>> {
        self.ready().await?;
        Ok(collect(self, bins).await?)
    }

    fn backend(&self) -> &'static str {
        RemoteHost::backend(self)
    }

    fn state_word(&self, up: bool) -> &'static str {
        RemoteHost::state_word(self, up)
    }

    fn shown(&self) -> String {
        RemoteHost::shown(self)
    }
}

/// Asks the host (one request).
pub async fn collect(host: &RemoteHost, bins: &[String]) -> Result<HostFacts, super::RemoteError> {
    let names: Vec<String> = bins.iter().filter_map(|b| quote(b)).collect();
    let script = format!(
        r#"gsv_o=
for gsv_b in {names}; do
  if command -v "$gsv_b" >/dev/null 2>&1; then gsv_o="$gsv_o 1:$gsv_b"; else gsv_o="$gsv_o 0:$gsv_b"; fi
done
gsv_text bins "$gsv_o"
gsv_text uname "$(uname -s 2>/dev/null)|$(uname -m 2>/dev/null)|$(uname -r 2>/dev/null)|$(uname -n 2>/dev/null)"
gsv_text cpus "$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)"
for gsv_f in /etc/os-release /usr/lib/os-release; do
  if [ -r "$gsv_f" ]; then head -c 8192 "$gsv_f" > "$GSV_D/f.$$"; gsv_file osrel "$GSV_D/f.$$"; break; fi
done
if [ -r /proc/meminfo ]; then head -c 8192 /proc/meminfo > "$GSV_D/f.$$"; gsv_file meminfo "$GSV_D/f.$$"; fi
if [ -r /proc/uptime ]; then gsv_text uptime "$(cat /proc/uptime)"; fi
if [ "$(uname -s 2>/dev/null)" = Darwin ]; then
  gsv_text memsize "$(sysctl -n hw.memsize 2>/dev/null)"
  gsv_text swvers "$(sw_vers -productVersion 2>/dev/null)"
fi
rm -f "$GSV_D/f.$$""#,
        names = if names.is_empty() {
            "''".to_owned()
        } else {
            names.join(" ")
        }
    );
    let reply = host.run(Lane::Control, None, &script, 1 << 20).await?;
    let mut out = HostFacts::default();
    for entry in reply.text("bins").unwrap_or_default().split_whitespace() {
        if let Some((flag, name)) = entry.split_once(':') {
            out.bins.insert(name.to_owned(), flag == "1");
        }
    }
    let uname = reply.text("uname").unwrap_or_default();
    let mut parts = uname.split('|');
    let (sys, machine, kernel, hostname) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let f = &mut out.facts;
    f.os = os_name(sys);
    f.arch = arch_name(machine);
    f.kernel = kernel.to_owned();
    f.hostname = hostname.to_owned();
    f.version = env!("CARGO_PKG_VERSION").to_owned();
    f.cpus = reply.text("cpus").and_then(|s| s.trim().parse().ok());
    f.os_release = reply
        .text("osrel")
        .as_deref()
        .and_then(os_release_name)
        .or_else(|| {
            reply
                .text("swvers")
                .filter(|v| !v.is_empty())
                .map(|v| format!("macOS {v}"))
        })
        .unwrap_or_default();
    f.memory_bytes = reply
        .text("meminfo")
        .as_deref()
        .and_then(meminfo_total)
        .or_else(|| reply.text("memsize").and_then(|s| s.trim().parse().ok()));
    f.uptime_secs = reply.text("uptime").as_deref().and_then(uptime_secs);
    Ok(out)
}

/// `uname -s` as Rust names operating systems (`linux`, `macos`, ...).
fn os_name(sys: &str) -> String {
    match sys {
        "Linux" => "linux".into(),
        "Darwin" => "macos".into(),
        "" => String::new(),
        other => other.to_ascii_lowercase(),
    }
}

/// `uname -m` as Rust names architectures.
fn arch_name(machine: &str) -> String {
    match machine {
        "arm64" => "aarch64".into(),
        "amd64" => "x86_64".into(),
        "i386" | "i486" | "i586" | "i686" => "x86".into(),
        other => other.to_owned(),
    }
}
