//! End to end: onboarding a machine with the one line `gsv token create node ID
//! --install` prints, against a real TLS gateway on loopback.
//!
//! Each "machine" is a temporary home directory, with `PATH=/usr/bin:/bin` (no gsv on
//! it) and an empty environment. The line runs through `sh -c` exactly as printed,
//! with `--user` added, and with `GSV_SERVICE=background`: the node starts as a
//! detached process instead of a unit of the real system's systemd (whose units are
//! checked on their own, with `systemd-analyze verify`). Checked: the node comes
//! online under its id, with nothing left to accept under `--pin-tools`, and serves
//! calls; the join token is nowhere in the gateway's log or files; a second run
//! changes nothing, a new build on the gateway upgrades, and `gsv node uninstall`
//! stops the node; a wrong pin, a build changed after the script was served and a
//! spent join token each stop the installer with a clear message and nothing
//! installed.
//!
//! curl and `systemd-analyze` (Debian `curl`, `systemd`) are installed by `.ci/run`;
//! elsewhere a test that needs a missing one says so and passes.

mod common;

use common::{eventually, gsv_bin, http_get, Gateway, TempDir};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether `program` is on PATH.
fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True (skip) when `program` is missing outside CI; in CI it must be there.
fn missing(program: &str, package: &str) -> bool {
    if have(program) {
        return false;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have {program} (Debian package {package}; .ci/run installs it)"
    );
    eprintln!("note: test skipped: {program} is not installed (Debian package {package})");
    true
}

/// A fresh machine: an empty home (and an empty TMPDIR). Kills the nodes the
/// installer started in the background when dropped.
struct Machine {
    home: TempDir,
    tmp: TempDir,
}

impl Machine {
    fn new() -> Machine {
        Machine {
            home: TempDir::new("home"),
            tmp: TempDir::new("tmp"),
        }
    }

    fn data(&self) -> PathBuf {
        self.home.path().join(".local/share/gsv")
    }

    fn bin(&self) -> PathBuf {
        self.home.path().join(".local/bin/gsv")
    }

    /// `sh` with this machine's environment, as its user.
    fn sh(&self) -> Command {
        let mut cmd = Command::new("sh");
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.home.path())
            .env("TMPDIR", self.tmp.path())
            .env("GSV_SERVICE", "background")
            .current_dir(self.home.path())
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `line` with `extra` appended; returns its exit code and stderr.
    fn run(&self, line: &str, extra: &str) -> (i32, String) {
        let out = self
            .sh()
            .arg("-c")
            .arg(format!("{line} {extra}"))
            .output()
            .expect("run sh");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The pid of node `id` running in the background, from its pid file.
    fn pid(&self, id: &str) -> Option<u32> {
        std::fs::read_to_string(self.data().join(format!("node-{id}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Nothing was installed: the home is empty and the temporary files are gone.
    fn assert_untouched(&self, what: &str) {
        let left = |d: &Path| std::fs::read_dir(d).map(|e| e.count()).unwrap_or(0);
        assert_eq!(left(self.home.path()), 0, "{what}: something was installed");
        assert_eq!(
            left(self.tmp.path()),
            0,
            "{what}: temporary files were left"
        );
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.data()) else {
            return;
        };
        for e in entries.filter_map(Result::ok) {
            if e.path().extension().is_some_and(|x| x == "pid") {
                if let Some(pid) = std::fs::read_to_string(e.path())
                    .ok()
                    .and_then(|p| p.trim().parse::<i32>().ok())
                {
                    // SAFETY: signalling a pid has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
    }
}

/// `gsv token create node ID --install` against `gw`: the line and its token.
fn install_line(gw: &Gateway, id: &str) -> (String, String) {
    let (code, out, err) = gw.cli(&["token", "create", "node", id, "--install"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "one line on stdout: {out}");
    let line = out.trim_end().to_owned();
    let token = line
        .rsplit_once("--token '")
        .map(|(_, t)| t.trim_end_matches('\'').to_owned())
        .expect("the token is an argument");
    assert!(token.starts_with("gsv_join_"), "{line}");
    assert!(err.contains("join token"), "{err}");
    (line, token)
}

/// The gateway's curl pin, as the line carries it.
fn pin_of(gw: &Gateway) -> String {
    gsv_gateway::tls::public_key_pin_pem_file(&gw.data.path().join("tls-cert.pem"))
        .expect("the self-signed certificate")
}

#[tokio::test]
async fn a_fresh_machine_joins_with_the_printed_line() {
    if missing("curl", "curl") {
        return;
    }
    let logs = TempDir::new("gwlog");
    let log = logs.path().join("gateway.log");
    let gw = Gateway::start_logged(&["--tls-self-signed", "--pin-tools"], &log).await;
    let (line, token) = install_line(&gw, "web1");
    assert_eq!(
        line,
        format!(
            "curl -fsSL -k --pinnedpubkey '{}' '{}/v1/install/web1' | sh -s -- --token '{token}'",
            pin_of(&gw),
            gw.url()
        )
    );
    for dir in ["/usr/bin", "/bin"] {
        assert!(!Path::new(dir).join("gsv").exists(), "gsv in {dir}");
    }

    let machine = Machine::new();
    std::fs::write(machine.home.path().join("hello.txt"), "hi from web1\n").unwrap();
    let (code, err) = machine.run(&line, "--user");
    assert_eq!(code, 0, "{err}");
    for step in [
        "SHA-256 checked",
        "enrolled as web1",
        "installed ",
        "started the node in the background",
        "node web1 installed",
    ] {
        assert!(err.contains(step), "{step:?} missing from: {err}");
    }
    // The gateway's own build, in ~/.local/bin; the token in a 0600 file beside the
    // credential, and the unit's command line names only the file.
    assert_eq!(
        std::fs::read(machine.bin()).unwrap(),
        std::fs::read(gsv_bin()).unwrap()
    );
    let token_file = machine.data().join("node-web1.token");
    assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(machine.data().join("node-web1.credential").exists());
    let pid = machine.pid("web1").expect("pid file");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(cmdline.contains("--token-file"), "{cmdline}");
    assert!(
        !cmdline.contains(&token),
        "the token is not on the command line"
    );

    // Online under its id, with the machine's home as its workspace. The enrollment
    // was its first registration, with the offer the service makes: under
    // --pin-tools nothing is left to accept.
    gw.wait_online("web1").await;
    let agent = gw.agent().await;
    let nodes = agent.list_nodes().await.unwrap();
    let web1 = nodes.iter().find(|n| n.id == "web1").expect("web1 listed");
    assert!(web1.unaccepted.is_none(), "{:?}", web1.unaccepted);
    assert!(web1.tools.iter().any(|t| t == "Bash"), "{:?}", web1.tools);
    let read = agent
        .call("web1__Read", json!({ "path": "hello.txt" }), None)
        .await
        .unwrap();
    assert!(!read.is_error, "{read:?}");
    assert!(read.joined_text().contains("hi from web1"), "{read:?}");

    // The join token reached neither the gateway's log nor its files.
    // `gsv_join_ID_SECRET`: the secret is URL-safe base64 and may hold `_` itself
    // (cut at its last `_`, a tail of a few characters turned up in a PEM by chance).
    let secret = token.splitn(4, '_').nth(3).expect("gsv_KIND_ID_SECRET");
    assert!(secret.len() >= 32, "{token}");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("served the installer script"),
        "{log_text}"
    );
    assert!(
        !log_text.contains(secret),
        "the join token is in the gateway's log"
    );
    for e in std::fs::read_dir(gw.data.path())
        .unwrap()
        .filter_map(Result::ok)
    {
        if let Ok(bytes) = std::fs::read(e.path()) {
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "the join token is in {}", e.path().display());
        }
    }
}

#[tokio::test]
async fn a_second_run_changes_nothing_and_a_new_build_upgrades() {
    if missing("curl", "curl") {
        return;
    }
    let gw = Gateway::start_with(&["--tls-self-signed"]).await;
    let (line, _) = install_line(&gw, "web2");
    let machine = Machine::new();
    let (code, err) = machine.run(&line, "--user");
    assert_eq!(code, 0, "{err}");
    gw.wait_online("web2").await;
    let first = machine.pid("web2").expect("pid file");

    // Again: same build, enrolled, same command: nothing happens (the join token,
    // spent, is not presented again).
    let (code, err) = machine.run(&line, "--user");
    assert_eq!(code, 0, "{err}");
    for step in [
        "already the gateway's gsv build",
        "already enrolled",
        "already runs in the background",
        "nothing changed",
    ] {
        assert!(err.contains(step), "{step:?} missing from: {err}");
    }
    assert_eq!(machine.pid("web2"), Some(first));
    let (_, tokens, _) = gw.cli(&["token", "list", "--json"]);
    let tokens: serde_json::Value = serde_json::from_str(&tokens).unwrap();
    let credentials = tokens
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "node" && t["subject"] == "web2")
        .count();
    assert_eq!(credentials, 1, "enrolled once: {tokens}");

    // A new build on the gateway (the same program with bytes appended, so another
    // SHA-256): the run downloads it, replaces the executable and restarts the node.
    let dist = gw.data.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    let build = dist.join(gsv_gateway::install::own_target());
    let mut bytes = std::fs::read(gsv_bin()).unwrap();
    bytes.extend_from_slice(b"\ngsv build 2\n");
    std::fs::write(&build, &bytes).unwrap();
    let (code, err) = machine.run(&line, "--user");
    assert_eq!(code, 0, "{err}");
    for step in [
        "SHA-256 checked",
        "already enrolled",
        "upgraded",
        "stopping the node running in the background",
        "node web2 installed",
    ] {
        assert!(err.contains(step), "{step:?} missing from: {err}");
    }
    assert_eq!(std::fs::read(machine.bin()).unwrap(), bytes);
    let second = machine.pid("web2").expect("pid file");
    assert_ne!(second, first, "restarted");
    tokio::time::sleep(Duration::from_millis(200)).await;
    gw.wait_online("web2").await;

    // Uninstalled: stopped, pid and token files gone, the credential kept, so the same
    // line (its token spent) brings the node back.
    let out = machine
        .sh()
        .arg("-c")
        .arg(format!(
            "'{}' node uninstall --user",
            machine.bin().display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("node web2 uninstalled"), "{err}");
    assert!(machine.pid("web2").is_none());
    assert!(!machine.data().join("node-web2.token").exists());
    assert!(machine.data().join("node-web2.credential").exists());
    let (url, admin, tls) = (gw.url(), gw.admin_token(), gw.tls_options());
    eventually("web2 offline", Duration::from_secs(30), || {
        let (url, admin, tls) = (url.clone(), admin.clone(), tls.clone());
        async move {
            let c = gsv_client::AgentClient::connect_with(&url, &admin, &tls)
                .await
                .ok()?;
            let nodes = c.list_nodes().await.ok()?;
            nodes
                .iter()
                .any(|n| n.id == "web2" && !n.online)
                .then_some(())
        }
    })
    .await;
    let (code, err) = machine.run(&line, "--user");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("already enrolled"), "{err}");
    gw.wait_online("web2").await;
}

#[tokio::test]
async fn a_wrong_pin_a_changed_build_and_a_spent_token_install_nothing() {
    if missing("curl", "curl") {
        return;
    }
    let gw = Gateway::start_with(&["--tls-self-signed"]).await;
    let (line, token) = install_line(&gw, "web3");
    let pin = pin_of(&gw);

    // A pin of another key: curl stops before any script runs.
    let other = format!("sha256//{}=", "A".repeat(43));
    let machine = Machine::new();
    let (_, err) = machine.run(&line.replace(&pin, &other), "--user");
    assert!(err.contains("pinned public key"), "{err}");
    machine.assert_untouched("wrong pin");

    // The build changes after the script was served: its SHA-256 no longer matches.
    let scripts = TempDir::new("script");
    let script = scripts.path().join("install.sh");
    let fetched = Command::new("curl")
        .args(["-fsSL", "-k", "--pinnedpubkey", &pin, "-o"])
        .arg(&script)
        .arg(format!("{}/v1/install/web3", gw.url()))
        .status()
        .unwrap();
    assert!(fetched.success());
    let dist = gw.data.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    let build = dist.join(gsv_gateway::install::own_target());
    std::fs::write(&build, b"#!/bin/sh\necho pwned\n").unwrap();
    let machine = Machine::new();
    let out = machine
        .sh()
        .arg(&script)
        .args(["--token", &token, "--user"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("SHA-256"), "{err}");
    assert!(err.contains("nothing was installed"), "{err}");
    machine.assert_untouched("changed build");
    std::fs::remove_file(&build).unwrap();

    // Neither spent the token: it enrolls a machine now, and then it is spent.
    let first = Machine::new();
    let (code, err) = first.run(&line, "--user");
    assert_eq!(code, 0, "{err}");
    let machine = Machine::new();
    let (code, err) = machine.run(&line, "--user");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("refused the enrollment"), "{err}");
    assert!(err.contains("nothing was installed"), "{err}");
    machine.assert_untouched("spent token");
}

#[tokio::test]
async fn the_installer_endpoints() {
    let gw = Gateway::start().await;
    // Plain HTTP is served to loopback; no pin then.
    let (status, script) = http_get(&gw.addr, "/v1/install/web4", None).await;
    assert_eq!(status, 200, "{script}");
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains(&format!("url='http://{}'", gw.addr)),
        "{script}"
    );
    assert!(script.contains("curl_pin=''"), "{script}");
    let sha = gsv_gateway::install::sha256_file(Path::new(gsv_bin())).unwrap();
    let own = gsv_gateway::install::own_target();
    assert!(script.contains(&format!("{own} {sha}\n")), "{script}");

    let (status, body) = http_get(&gw.addr, "/v1/install/Bad_Id", None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = http_get(&gw.addr, "/v1/dist/nope-nope", None).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains(&own), "{body}");
    let (status, body) = http_get(&gw.addr, "/v1/dist/..%2Fgsv.db", None).await;
    assert_eq!(status, 400, "{body}");

    // A Host header cannot put shell code into the script.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(&gw.addr).await.unwrap();
    s.write_all(b"GET /v1/install/web4 HTTP/1.1\r\nHost: x'$(id)\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // The build itself: its length, announced.
    let mut s = tokio::net::TcpStream::connect(&gw.addr).await.unwrap();
    let request = format!(
        "GET /v1/dist/{own} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        gw.addr
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut head = vec![0u8; 1024];
    let n = s.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
    let len = std::fs::metadata(gsv_bin()).unwrap().len();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {len}\r\n")),
        "{head}"
    );

    // The line for a plain loopback gateway has no pin; --install is for node tokens.
    let (code, out, err) = gw.cli(&["token", "create", "node", "web4", "--install"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "curl -fsSL 'http://{}/v1/install/web4' | sh -s -- --token 'gsv_join_",
            gw.addr
        )),
        "{out}"
    );
    let (code, _, err) = gw.cli(&["token", "create", "agent", "a", "--allow", "*", "--install"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = gw.cli(&["token", "create", "node", "web5"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.trim().starts_with("gsv_join_"),
        "the token alone: {out}"
    );
    let (code, _, err) = gw.cli(&[
        "token",
        "create",
        "node",
        "web5",
        "--install",
        "--gateway",
        "http://10.0.0.1:8787",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("plain http://"), "{err}");
}

/// `gsv node install --print` with tricky flags.
fn print_install(manager: &str, scope: &str, data: &Path) -> (String, String) {
    let out = Command::new(gsv_bin())
        .args(["node", "install", "--print", "--service", manager, scope])
        .args(["--gateway", "https://gw.example:8787", "--id", "web1"])
        .args(["--token", "gsv_join_unused_secret"])
        .arg("--data")
        .arg(data)
        .args(["--workspace", "/srv/my work"])
        .args(["--approve-shell", r"^ls( -l)?$"])
        .args(["--approve-shell", r#"^echo "50% \w+" & <x>$"#])
        .args(["--pin", &"ab".repeat(32), "--keep-sessions-on-exit"])
        .env_remove("GSV_TOKEN")
        .env_remove("GSV_SERVICE")
        .output()
        .expect("run gsv node install --print");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !text.contains("secret"),
        "the token is never in a unit: {text}"
    );
    (text, err)
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    if missing("systemd-analyze", "systemd") {
        return;
    }
    let dir = TempDir::new("units");
    let runtime = TempDir::new("runtime");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    for scope in ["--system", "--user"] {
        let (unit, err) = print_install("systemd", scope, &dir.path().join("data"));
        assert!(err.contains("gsv-node-web1.service"), "{err}");
        for part in [
            "Restart=on-failure",
            "RestartPreventExitStatus=2 3",
            "KillMode=process",
            "--token-file",
            r#""^ls( -l)?$$""#,
            r#""^echo \"50%% \\w+\" & <x>$$""#,
            r#"--workspace "/srv/my work""#,
        ] {
            assert!(unit.contains(part), "{part} missing from:\n{unit}");
        }
        let file = dir.path().join("gsv-node-web1.service");
        std::fs::write(&file, &unit).unwrap();
        let mut verify = Command::new("systemd-analyze");
        if scope == "--user" {
            verify
                .arg("--user")
                .env("XDG_RUNTIME_DIR", runtime.path())
                .env("HOME", dir.path());
        }
        let out = verify.arg("verify").arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{scope}:\n{unit}\n{stderr}");
        let ours: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("gsv-node-web1"))
            .collect();
        assert!(
            ours.is_empty(),
            "{scope}: warnings about the unit:\n{unit}\n{stderr}"
        );
    }
}

#[test]
fn the_launchd_plist_parses_with_every_argument_intact() {
    if missing("python3", "python3") {
        return;
    }
    let dir = TempDir::new("plist");
    let (plist, _) = print_install("launchd", "--user", &dir.path().join("data"));
    let file = dir.path().join("gsv.node.web1.plist");
    std::fs::write(&file, &plist).unwrap();
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, plistlib, sys; p = plistlib.load(open(sys.argv[1], 'rb')); print(json.dumps(p))",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(parsed["Label"], "gsv.node.web1");
    let args: Vec<&str> = parsed["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(
        args[0],
        std::fs::canonicalize(gsv_bin()).unwrap().to_str().unwrap()
    );
    assert_eq!(args[1], "node");
    assert!(args.contains(&r#"^echo "50% \w+" & <x>$"#), "{args:?}");
    assert!(args.contains(&"/srv/my work"), "{args:?}");
    assert_eq!(parsed["KeepAlive"]["SuccessfulExit"], false);
    assert_eq!(parsed["AbandonProcessGroup"], true);
}
