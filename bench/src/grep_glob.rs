//! `gsv bench grep` and `gsv bench glob`: the node's Grep and Glob tools against `rg`
//! and `fd` on the same tree (target: at most 1.3× their wall time).
//!
//! The tree is the cargo registry sources (`$CARGO_HOME/registry/src`, else
//! `~/.cargo/registry/src`) when present — a large, real, many-crate tree — and
//! otherwise a generated one; `--quick` always generates a small tree (~200 files).
//! Our tools run in-process (`Tool::execute`, as the node runs them, result JSON
//! built); the baselines are spawned and their output read through a pipe (never
//! `/dev/null`, which rg detects and treats as "stop at the first match").
//!
//! Both sides walk the same files: hidden files skipped, ignore files honoured outside
//! git repositories too (`--no-require-git`), symlinks followed by Grep (`rg -L`) and
//! not by Glob (fd's default), line numbers computed (`rg -n`), one walker thread
//! per core on both sides. Where our result is not truncated, its match count is
//! checked against the number of lines the baseline prints, so both sides provably
//! searched the same files (skipped for fd releases without `--no-require-git`). Each
//! figure is the median of N runs (5; `--quick`: 2)
//! after one warm-up run of each side, runs alternating between the two.
//!
//! Labelling matters: Grep stops once it has more than 100 matching lines and Glob
//! sorts every match by modification time (a `stat` each), so
//! - the *rare* rows (a pattern that matches nothing or almost nothing) are the honest
//!   comparison of searching and walking: both sides visit every file;
//! - the *many matches* Grep row is what a model sees in practice (we stop early, rg
//!   prints everything), reported but not a like-for-like race.

use super::report::{Report, Row};
use super::BenchOptions;
use gsv_node::tools::glob::Glob;
use gsv_node::tools::grep::Grep;
use gsv_node::{Tool, ToolContext};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Present in the generated trees a few times, absent from real sources.
const RARE_NEEDLE: &str = "GSV_RARE_NEEDLE";
/// Allowed ratio of our median to the baseline's.
const TARGET: f64 = 1.3;

/// `gsv bench grep`.
pub async fn grep(opts: &BenchOptions) -> Result<Report, String> {
    let rg = find_bin(&["rg"]).ok_or(
        "ripgrep (`rg`) is not installed: `apt-get install ripgrep` (Debian/Ubuntu) to run this benchmark",
    )?;
    let tree = Tree::pick(opts).await?;
    let runs = if opts.quick { 2 } else { 5 };
    // (figure label, baseline label, pattern, include)
    let cases = [
        (
            "rare literal, full scan",
            "rg, same pattern (count checked)",
            RARE_NEEDLE,
            None::<&str>,
        ),
        (
            "rare regex, full scan",
            "rg, same pattern (count checked)",
            r"\bfn\s+gsv_[a-z]+_bench\b",
            None,
        ),
        (
            "few: `unsafe impl Sync for`",
            "rg, same matches (count checked)",
            "unsafe impl Sync for",
            None,
        ),
        (
            "rare, include *.{rs,toml}",
            "rg -g '*.{rs,toml}'",
            RARE_NEEDLE,
            Some("*.{rs,toml}"),
        ),
        (
            r"many: `fn \w+` (stops at 100)",
            "rg, prints every match",
            r"fn \w+",
            None,
        ),
    ];
    let mut rows = Vec::new();
    for (label, baseline, pattern, include) in cases {
        let mut args = json!({ "pattern": pattern });
        let mut rg_args: Vec<String> = ["-n", "-L", "--no-require-git", "-e", pattern]
            .map(String::from)
            .into();
        if let Some(include) = include {
            args["include"] = json!(include);
            rg_args.extend(["-g".into(), include.into()]);
        }
        rg_args.push(tree.root.display().to_string());
        let (ours, theirs) =
            race(&Grep::new(), &tree.root, args, &rg, &rg_args, runs, true).await?;
        rows.push(Row::at_most(
            format!("Grep {label}, p50"),
            ours,
            format!("{baseline}, p50"),
            theirs,
            "ms",
            TARGET,
        ));
    }
    let workload = format!(
        "{}; {runs} runs per side after a warm-up, median wall time; rg flags: -n -L --no-require-git",
        tree.describe()
    );
    Ok(Report::new("grep", workload, rows))
}

/// `gsv bench glob`.
pub async fn glob(opts: &BenchOptions) -> Result<Report, String> {
    let fd = find_bin(&["fd", "fdfind"]).ok_or(
        "fd is not installed: `apt-get install fd-find` (Debian/Ubuntu; the binary is `fdfind`) to run this benchmark",
    )?;
    // fd before 9 has no `--no-require-git` (and then honours .gitignore only in git
    // repositories, which makes it walk slightly more than we do on such trees).
    let no_require_git = help_mentions(&fd, "--no-require-git");
    let tree = Tree::pick(opts).await?;
    let runs = if opts.quick { 2 } else { 5 };
    let cases = [
        ("rare name (full walk)", "**/*.gsvbench", "*.gsvbench"),
        ("**/Cargo.toml", "**/Cargo.toml", "Cargo.toml"),
        ("**/*.rs (many matches)", "**/*.rs", "*.rs"),
    ];
    let mut rows = Vec::new();
    for (label, pattern, fd_glob) in cases {
        let mut fd_args: Vec<String> = vec!["-g".into(), fd_glob.into()];
        if no_require_git {
            fd_args.push("--no-require-git".into());
        }
        fd_args.extend(["-t", "f", "-t", "l"].map(String::from));
        fd_args.push(tree.root.display().to_string());
        let args = json!({ "pattern": pattern });
        let (ours, theirs) = race(
            &Glob::new(),
            &tree.root,
            args,
            &fd,
            &fd_args,
            runs,
            no_require_git,
        )
        .await?;
        rows.push(Row::at_most(
            format!("Glob {label}, p50"),
            ours,
            format!("fd -g {fd_glob}, p50"),
            theirs,
            "ms",
            TARGET,
        ));
    }
    let workload =
        format!(
        "{}; {runs} runs per side after a warm-up, median wall time; fd flags: -g GLOB{} -t f -t l",
        tree.describe(),
        if no_require_git { " --no-require-git" } else { "" }
    );
    Ok(Report::new("glob", workload, rows))
}

/// Runs our tool and the baseline `runs` times each (alternating, after a warm-up) and
/// returns their median wall times in milliseconds. With `check`, an untruncated result
/// of ours must have as many matches as the baseline prints lines (same files walked).
async fn race(
    tool: &dyn Tool,
    root: &Path,
    args: Value,
    bin: &Path,
    bin_args: &[String],
    runs: usize,
    check: bool,
) -> Result<(f64, f64), String> {
    let mut ours = Vec::with_capacity(runs);
    let mut theirs = Vec::with_capacity(runs);
    for i in 0..=runs {
        let started = Instant::now();
        let result = tool
            .execute(args.clone(), ToolContext::new(root, "bench"))
            .await;
        let elapsed = started.elapsed();
        if result.is_error {
            return Err(format!("our tool failed: {}", result.joined_text()));
        }
        let (baseline, lines) = spawn_timed(bin, bin_args).await?;
        let structured = result.structured_content.unwrap_or_default();
        let truncated = structured.get("truncated").is_some();
        let count = structured["count"].as_u64().unwrap_or(0) as usize;
        if check && !truncated && count != lines {
            return Err(format!(
                "our tool found {count} matches, {} printed {lines} lines for {}: the two do \
                 not search the same files",
                bin.display(),
                bin_args.join(" ")
            ));
        }
        if i > 0 {
            ours.push(elapsed);
            theirs.push(baseline);
        }
    }
    Ok((median_ms(&mut ours), median_ms(&mut theirs)))
}

/// Runs `bin args`, reading its output through a pipe; returns the wall time and the
/// number of lines printed.
async fn spawn_timed(bin: &Path, args: &[String]) -> Result<(Duration, usize), String> {
    let bin = bin.to_path_buf();
    let args = args.to_vec();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let output = Command::new(&bin)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let elapsed = started.elapsed();
        // rg exits 1 for "no match"; anything else is a failure.
        match output.status.code() {
            Some(0 | 1) => Ok((elapsed, output.stdout.split(|&b| b == b'\n').count() - 1)),
            _ => Err(format!(
                "{} {} failed: {}",
                bin.display(),
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            )),
        }
    })
    .await
    .map_err(|e| format!("baseline task failed: {e}"))?
}

fn median_ms(samples: &mut [Duration]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

/// The first of `names` that runs (`NAME --version`), as a path or bare name.
fn find_bin(names: &[&str]) -> Option<PathBuf> {
    names.iter().map(PathBuf::from).find(|name| {
        Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Whether `bin --help` mentions `flag`.
fn help_mentions(bin: &Path, flag: &str) -> bool {
    Command::new(bin)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(flag))
}

/// The tree searched, and whether it was generated (and so is removed on drop).
struct Tree {
    root: PathBuf,
    generated: bool,
    files: usize,
    bytes: u64,
}

impl Tree {
    /// The cargo registry sources, or a generated tree (always with `quick`).
    async fn pick(opts: &BenchOptions) -> Result<Tree, String> {
        let opts = opts.clone();
        tokio::task::spawn_blocking(move || {
            let registry = cargo_registry_src().filter(|_| !opts.quick);
            let (root, generated) = match registry {
                Some(root) => (root, false),
                None => {
                    let parent = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
                    let root = parent.join(format!(
                        "gsv-bench-grep-glob-{}-{}",
                        std::process::id(),
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos())
                    ));
                    let files = if opts.quick { 200 } else { 20_000 };
                    generate(&root, files)
                        .map_err(|e| format!("cannot build the tree in {}: {e}", root.display()))?;
                    (root, true)
                }
            };
            let (files, bytes) = measure(&root);
            Ok(Tree {
                root,
                generated,
                files,
                bytes,
            })
        })
        .await
        .map_err(|e| format!("tree task failed: {e}"))?
    }

    fn describe(&self) -> String {
        format!(
            "{} tree {} ({} files, {:.0} MiB)",
            if self.generated {
                "generated"
            } else {
                "cargo registry"
            },
            self.root.display(),
            self.files,
            self.bytes as f64 / (1024.0 * 1024.0)
        )
    }
}

/// A generated tree is removed however the run ends.
impl Drop for Tree {
    fn drop(&mut self) {
        if self.generated {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

fn cargo_registry_src() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = cargo_home.join("registry").join("src");
    src.is_dir().then_some(src)
}

/// Writes `files` source-like files in nested directories under `root`, a few of them
/// containing [`RARE_NEEDLE`].
fn generate(root: &Path, files: usize) -> std::io::Result<()> {
    for i in 0..files {
        let dir = root
            .join(format!("crate{:03}", i % 50))
            .join(format!("mod{:02}", (i / 50) % 20));
        std::fs::create_dir_all(&dir)?;
        let ext = ["rs", "toml", "md", "txt"][i % 4];
        let mut body = String::with_capacity(8 * 1024);
        for line in 0..120 {
            body.push_str(&format!(
                "fn function_{i}_{line}(value: u64) -> u64 {{ value.wrapping_mul({line}) + {i} }}\n"
            ));
        }
        if i % 97 == 0 {
            body.push_str(&format!("// {RARE_NEEDLE} here\n"));
        }
        std::fs::write(dir.join(format!("file{i}.{ext}")), body)?;
    }
    Ok(())
}

/// Files and bytes under `root` (symlinks not followed).
fn measure(root: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => {
                    files += 1;
                    bytes += entry.metadata().map_or(0, |m| m.len());
                }
                _ => {}
            }
        }
    }
    (files, bytes)
}
