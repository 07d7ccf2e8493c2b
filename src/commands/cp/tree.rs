//! `gsv cp -r SRC DST`: copies a directory tree between this machine and a node, like
//! `cp -r` (`docs/operations.md`, "Copying directories"): modes and mtimes kept,
//! symlinks copied as links and never followed, each file checked by SHA-256, a
//! progress line over the whole tree's bytes, `--json` counts at the end. A dropped
//! connection is retried like a single file's copy ([`super::retry`]): the next try
//! goes into the top the first one made, and the file under way resumes.

use super::spec::Side;
use super::{progress, retry};
use crate::commands::client::{print_json, Target};
use crate::exit;
use crate::terminal::safe;
use gsv_client::AgentClient;
use gsv_protocol::transfer::Place;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::time::Duration;

/// What `-r` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreePlan {
    /// Local directory → node.
    Put {
        local: PathBuf,
        node: String,
        remote: String,
    },
    /// Node's directory → local.
    Get {
        node: String,
        remote: String,
        local: PathBuf,
    },
    /// One node's directory → another node (or elsewhere on the same one), through
    /// the gateway.
    Copy { from: Place, to: Place },
}

/// What `--json` prints on success.
#[derive(serde::Serialize)]
struct Summary<'a> {
    path: &'a str,
    files: u64,
    dirs: u64,
    symlinks: u64,
    bytes: u64,
    direction: &'a str,
    /// Tries after the first (a dropped connection, a restarting gateway).
    retries: u32,
}

/// Checks `SRC DST` for `-r`; the message of a usage error.
pub fn plan(src: &str, dst: &str) -> Result<TreePlan, String> {
    if src.is_empty() || dst.is_empty() {
        return Err("SRC and DST must not be empty".into());
    }
    match (Side::parse(src), Side::parse(dst)) {
        (
            Side::Remote { node, path },
            Side::Remote {
                node: to_node,
                path: to,
            },
        ) => Ok(TreePlan::Copy {
            from: Place {
                node,
                path: if path.is_empty() { ".".into() } else { path },
            },
            to: Place {
                node: to_node,
                path: to,
            },
        }),
        (Side::Local(_), Side::Local(_)) => Err(
            "one of SRC and DST must be NODE:PATH (a local path with a colon is written ./a:b)"
                .into(),
        ),
        (Side::Local(local), Side::Remote { node, path }) => {
            if !local.is_dir() {
                return Err(format!(
                    "{} is not a directory: -r copies directories (copy a file without -r)",
                    local.display()
                ));
            }
            Ok(TreePlan::Put {
                local,
                node,
                remote: path,
            })
        }
        (Side::Remote { node, path }, Side::Local(local)) => Ok(TreePlan::Get {
            node,
            remote: if path.is_empty() { ".".into() } else { path },
            local,
        }),
    }
}

/// `gsv cp -r SRC DST [--json] [--retry-for SECS]`. The exit code.
pub async fn run(target: Target, src: &str, dst: &str, json: bool, retry_for: Duration) -> u8 {
    let plan = match plan(src, dst) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("error: invalid_args: {}", safe(&message));
            return exit::USAGE;
        }
    };
    let dialer = match target.resolve() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let on = progress::stderr_is_terminal();
    let bar = RefCell::new(progress::Progress::new(on));
    // Where the tree goes, once the first try has made its top: later tries go into
    // it (`put_tree` / `get_tree` set it).
    let remote_top: Cell<Option<String>> = Cell::new(None);
    let local_top: Cell<Option<PathBuf>> = Cell::new(None);
    let outcome = retry::run(
        &dialer,
        retry_for,
        crate::commands::shutdown_signal(),
        async |client: &AgentClient, attempt: &retry::Attempt| {
            let report = |d: u64, t: u64| {
                attempt.at(d);
                bar.borrow_mut().update(d, t);
            };
            match &plan {
                TreePlan::Put {
                    local,
                    node,
                    remote,
                } => {
                    let mut top = remote_top.take();
                    let copied = client.put_tree(node, local, remote, &mut top, report).await;
                    remote_top.set(top);
                    copied
                }
                TreePlan::Get {
                    node,
                    remote,
                    local,
                } => {
                    let mut top = local_top.take();
                    let copied = client.get_tree(node, remote, local, &mut top, report).await;
                    local_top.set(top);
                    copied
                }
                TreePlan::Copy { from, to } => {
                    let mut top = remote_top.take();
                    let copied = client.copy_tree(from, to, &mut top, report).await;
                    remote_top.set(top);
                    copied
                }
            }
        },
        |n: &retry::Notice<'_>| super::say_retry(&bar, n),
    )
    .await;
    match outcome {
        retry::Outcome::Cancelled => {
            progress::clear_line(on);
            eprintln!(
                "error: cancelled: interrupted; the copy was cancelled and what it copied stays. To finish it, copy SRC/. into the directory it was filling (DST, or DST/NAME if DST existed before): with DST there now, the same command would copy into DST/NAME. Files are copied again; a partly copied one resumes"
            );
            exit::INTERRUPTED
        }
        retry::Outcome::Done {
            value: done,
            retries,
        } => {
            bar.borrow_mut().finish();
            if json {
                print_json(&Summary {
                    path: &done.root,
                    files: done.files,
                    dirs: done.dirs,
                    symlinks: done.symlinks,
                    bytes: done.bytes,
                    direction: match plan {
                        TreePlan::Put { .. } => "put",
                        TreePlan::Get { .. } => "get",
                        TreePlan::Copy { .. } => "copy",
                    },
                    retries,
                });
            }
            exit::OK
        }
        retry::Outcome::Failed {
            error,
            retries,
            gave_up,
        } => super::failed(
            &bar,
            (&error, retries, gave_up),
            retry_for,
            "copy SRC/. into the directory it was filling to finish it",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_side_is_a_node_and_a_local_source_is_a_directory() {
        let dir = std::env::temp_dir();
        let src = dir.display().to_string();
        assert_eq!(
            plan(&src, "box:dest"),
            Ok(TreePlan::Put {
                local: dir.clone(),
                node: "box".into(),
                remote: "dest".into()
            })
        );
        assert_eq!(
            plan("box:", "out"),
            Ok(TreePlan::Get {
                node: "box".into(),
                remote: ".".into(),
                local: "out".into()
            })
        );
        assert_eq!(
            plan("a:x", "b:"),
            Ok(TreePlan::Copy {
                from: Place {
                    node: "a".into(),
                    path: "x".into()
                },
                to: Place {
                    node: "b".into(),
                    path: "".into()
                }
            })
        );
        assert!(plan("a", "b").expect_err("local").contains("NODE:PATH"));
        let e = plan("/definitely/not/here", "box:x").expect_err("no dir");
        assert!(e.contains("not a directory"), "{e}");
    }
}
