//! `gsv cp -r SRC DST`: copies a directory tree between this machine and a node, like
//! `cp -r` (`docs/operations.md`, "Copying directories"): modes and mtimes kept,
//! symlinks copied as links and never followed, each file checked by SHA-256, a
//! progress line over the whole tree's bytes, `--json` counts at the end.

use super::progress;
use super::spec::Side;
use crate::commands::agent::{client_error, connect, print_json, Target};
use crate::exit;
use crate::terminal::safe;
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
}

/// Checks `SRC DST` for `-r`; the message of a usage error.
pub fn plan(src: &str, dst: &str) -> Result<TreePlan, String> {
    if src.is_empty() || dst.is_empty() {
        return Err("SRC and DST must not be empty".into());
    }
    match (Side::parse(src), Side::parse(dst)) {
        (Side::Remote { .. }, Side::Remote { .. }) => Err(
            "copying a directory from one node to another is not supported: copy it to this machine, then to the other node"
                .into(),
        ),
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

/// `gsv cp -r SRC DST [--json]`. The exit code.
pub async fn run(target: Target, src: &str, dst: &str, json: bool) -> u8 {
    let plan = match plan(src, dst) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("error: invalid_args: {}", safe(&message));
            return exit::USAGE;
        }
    };
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let on = progress::stderr_is_terminal();
    let mut bar = progress::Progress::new(on);
    let copy = async {
        match &plan {
            TreePlan::Put {
                local,
                node,
                remote,
            } => {
                client
                    .put_tree(node, local, remote, |d, t| bar.update(d, t))
                    .await
            }
            TreePlan::Get {
                node,
                remote,
                local,
            } => {
                client
                    .get_tree(node, remote, local, |d, t| bar.update(d, t))
                    .await
            }
        }
    };
    let outcome = tokio::select! {
        biased;
        outcome = copy => outcome,
        _ = crate::commands::shutdown_signal() => {
            client.flush(Duration::from_secs(3)).await;
            progress::clear_line(on);
            eprintln!(
                "error: cancelled: interrupted; the copy was cancelled and what it copied stays. To finish it, copy SRC/. into the directory it was filling (DST, or DST/NAME if DST existed before): with DST there now, the same command would copy into DST/NAME. Files are copied again; a partly copied one resumes"
            );
            return exit::INTERRUPTED;
        }
    };
    bar.finish();
    match outcome {
        Ok(done) => {
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
                    },
                });
            }
            exit::OK
        }
        Err(e) => client_error(&e),
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
        assert!(plan("a:x", "b:y")
            .expect_err("node to node")
            .contains("not supported"));
        assert!(plan("a", "b").expect_err("local").contains("NODE:PATH"));
        let e = plan("/definitely/not/here", "box:x").expect_err("no dir");
        assert!(e.contains("not a directory"), "{e}");
    }
}
