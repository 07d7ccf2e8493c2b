//! `gsv bench ssh-backend`: a node that works on another host over SSH, against
//! plain `ssh` to the same host, both through a warm ControlMaster, in the same run.
//!
//! - gsv: `gsv gateway` and `gsv node --id far --ssh USER@127.0.0.1:PORT` as child
//!   processes; the node keeps its own master connection and shells on the harness's
//!   sshd. Each sample is a whole `gsv call` process: `far__Bash` `true`, and
//!   `far__Read` of a 1 MiB text file (the whole page comes back).
//! - ssh: `ssh … 127.0.0.1 true` and `ssh … 127.0.0.1 cat FILE` as mux clients of
//!   a master opened first, to the same sshd: with the user's rc file read (as plain
//!   ssh does; the target rows) and skipped (the stricter rows).
//!
//! Samples alternate one by one and the order flips each round. Targets: each gsv
//! p50 at most 1.2× its ssh p50. Nothing leaves 127.0.0.1.

use super::fleet::{ProcessRig, TempDir};
use super::report::{Report, Row};
use super::ssh_call::{time_process, SshClient};
use super::sshd::{SshBins, Sshd};
use super::stats::{summarize, Summary};
use super::BenchOptions;
use std::ffi::OsString;
use std::process::Command;

/// Each gsv figure may take at most this multiple of its ssh baseline.
pub const TARGET_RATIO: f64 = 1.2;
/// The node id of the SSH-backed node.
const NODE_ID: &str = "far";
/// Size of the file read.
const FILE_BYTES: usize = 1 << 20;

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let (n, warm) = if opts.quick { (5, 2) } else { (200, 20) };
    let bins = SshBins::find()?;
    let dir = TempDir::new(opts, "ssh-backend")?;
    let sshd = Sshd::start(&bins, &dir.0).await?;
    let known = dir.0.join("node_known_hosts");
    std::fs::write(&known, sshd.known_hosts_line()?).map_err(|e| format!("known_hosts: {e}"))?;
    let mut flags: Vec<OsString> = vec![
        "--ssh".into(),
        format!("{}@127.0.0.1:{}", sshd.user, sshd.port).into(),
    ];
    for o in [
        format!("UserKnownHostsFile={}", known.display()),
        "GlobalKnownHostsFile=/dev/null".into(),
        format!("IdentityFile={}", sshd.client_key.display()),
        "IdentitiesOnly=yes".into(),
        "IdentityAgent=none".into(),
    ] {
        flags.push("--ssh-option".into());
        flags.push(o.into());
    }
    let rig = ProcessRig::start_with(&dir.0, NODE_ID, false, &flags).await?;
    // The file, in the node's workspace (a path on the host: here, the same machine).
    let file = dir.0.join("workspace").join("big.txt");
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    let text = line.repeat(FILE_BYTES / line.len());
    std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
    let client = SshClient::new(&bins, &sshd, &dir.0, false)?;
    let client_rc = SshClient::new(&bins, &sshd, &dir.0, true)?;
    let file_arg = file.display().to_string();
    let outcome = async {
        client.open_master()?;
        client_rc.open_master()?;
        let mut cmds = Commands {
            gsv_true: rig.call_command(&format!("{NODE_ID}__Bash"), r#"{"command":"true"}"#)?,
            gsv_read: rig.call_command(
                &format!("{NODE_ID}__Read"),
                &serde_json::json!({"path": file_arg}).to_string(),
            )?,
            ssh_true: client.true_command(),
            ssh_true_rc: client_rc.true_command(),
            ssh_cat: client.command(&[], &["cat", &file_arg]),
            ssh_cat_rc: client_rc.command(&[], &["cat", &file_arg]),
        };
        tokio::task::spawn_blocking(move || measure(&mut cmds, n, warm))
            .await
            .map_err(|e| format!("measuring: {e}"))?
    }
    .await;
    client.close_master();
    client_rc.close_master();
    rig.stop().await;
    drop(sshd);
    let m = outcome?;
    let strict = |mut r: Row| {
        r.target = format!("(stricter) {}", r.target);
        r
    };
    let rc = "warm ControlMaster, user's ~/.bashrc read (as plain ssh does)";
    let bare = "warm ControlMaster, rc file skipped";
    Ok(Report::new(
        "ssh-backend",
        format!(
            "{n} runs of each after {warm} warm-up runs, interleaved; each a whole process \
             (spawn to exit): `gsv call` against `gsv gateway` + `gsv node --ssh` on \
             127.0.0.1 (the node's own master connection to the harness's sshd), and `ssh` \
             to the same sshd through a warm master; the file is {FILE_BYTES} bytes of text \
             lines; means: gsv true {:.0} µs, read {:.0} µs; ssh true {:.0} µs, cat {:.0} µs",
            m.gsv_true.mean_us, m.gsv_read.mean_us, m.ssh_true.mean_us, m.ssh_cat.mean_us
        ),
        vec![
            Row::at_most(
                "`gsv call far__Bash` `true` via an SSH-backed node, p50",
                m.gsv_true.p50_us,
                format!("`ssh … true`, {rc}, p50"),
                m.ssh_true_rc.p50_us,
                "µs",
                TARGET_RATIO,
            ),
            strict(Row::at_most(
                "`gsv call far__Bash` `true` via an SSH-backed node, p50",
                m.gsv_true.p50_us,
                format!("`ssh … true`, {bare}, p50"),
                m.ssh_true.p50_us,
                "µs",
                TARGET_RATIO,
            )),
            Row::at_most(
                "`gsv call far__Read` of a 1 MiB file via an SSH-backed node, p50",
                m.gsv_read.p50_us,
                format!("`ssh … cat FILE`, {rc}, p50"),
                m.ssh_cat_rc.p50_us,
                "µs",
                TARGET_RATIO,
            ),
            strict(Row::at_most(
                "`gsv call far__Read` of a 1 MiB file via an SSH-backed node, p50",
                m.gsv_read.p50_us,
                format!("`ssh … cat FILE`, {bare}, p50"),
                m.ssh_cat.p50_us,
                "µs",
                TARGET_RATIO,
            )),
        ],
    ))
}

struct Commands {
    gsv_true: Command,
    gsv_read: Command,
    ssh_true: Command,
    ssh_true_rc: Command,
    ssh_cat: Command,
    ssh_cat_rc: Command,
}

struct Measured {
    gsv_true: Summary,
    gsv_read: Summary,
    ssh_true: Summary,
    ssh_true_rc: Summary,
    ssh_cat: Summary,
    ssh_cat_rc: Summary,
}

/// Every command `warm` times, then `n` times each, one after the other with the
/// order flipping every round.
fn measure(c: &mut Commands, n: usize, warm: usize) -> Result<Measured, String> {
    let mut all: [(&mut Command, &str, Vec<std::time::Duration>); 6] = [
        (&mut c.gsv_true, "gsv call Bash", Vec::new()),
        (&mut c.ssh_true, "ssh true", Vec::new()),
        (&mut c.ssh_true_rc, "ssh true (rc read)", Vec::new()),
        (&mut c.gsv_read, "gsv call Read", Vec::new()),
        (&mut c.ssh_cat, "ssh cat", Vec::new()),
        (&mut c.ssh_cat_rc, "ssh cat (rc read)", Vec::new()),
    ];
    for _ in 0..warm {
        for (cmd, what, _) in all.iter_mut() {
            time_process(cmd, what)?;
        }
    }
    for round in 0..n {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..all.len()).collect()
        } else {
            (0..all.len()).rev().collect()
        };
        for i in order {
            let (cmd, what, samples) = &mut all[i];
            samples.push(time_process(cmd, what)?);
        }
    }
    let [a, b, c2, d, e, f] = all;
    Ok(Measured {
        gsv_true: summarize(&a.2),
        ssh_true: summarize(&b.2),
        ssh_true_rc: summarize(&c2.2),
        gsv_read: summarize(&d.2),
        ssh_cat: summarize(&e.2),
        ssh_cat_rc: summarize(&f.2),
    })
}
