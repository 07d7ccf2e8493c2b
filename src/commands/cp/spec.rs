//! `gsv cp`'s two operands: which is local and which is `NODE:PATH`.

use gsv_protocol::names::NodeId;
use std::path::PathBuf;

/// One operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    Local(PathBuf),
    Remote { node: String, path: String },
}

impl Side {
    /// `NODE:PATH` when the part before the first `:` is a node id
    /// (`^[a-z0-9][a-z0-9-]{0,31}$`), else a local path (write `./a:b` for a local
    /// file whose name has a colon).
    pub fn parse(arg: &str) -> Side {
        if let Some((node, path)) = arg.split_once(':') {
            if NodeId::parse(node).is_ok() {
                return Side::Remote {
                    node: node.to_owned(),
                    path: path.to_owned(),
                };
            }
        }
        Side::Local(PathBuf::from(arg))
    }
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Local file → node.
    Put {
        local: PathBuf,
        node: String,
        remote: String,
    },
    /// Node's file → local.
    Get {
        node: String,
        remote: String,
        local: PathBuf,
    },
    /// A node's file → a node (another or the same), through the gateway.
    Copy {
        from_node: String,
        from: String,
        to_node: String,
        to: String,
    },
}

impl Plan {
    /// `"put"` or `"get"`, as `--json` prints it.
    pub fn direction(&self) -> &'static str {
        match self {
            Plan::Put { .. } => "put",
            Plan::Get { .. } => "get",
            Plan::Copy { .. } => "copy",
        }
    }
}

/// Checks `SRC DST` of a single-file copy (`-r` is [`super::tree::plan`]); the message
/// of a usage error.
pub fn plan(src: &str, dst: &str) -> Result<Plan, String> {
    if src.is_empty() || dst.is_empty() {
        return Err("SRC and DST must not be empty".into());
    }
    match (Side::parse(src), Side::parse(dst)) {
        (
            Side::Remote {
                node: from_node,
                path: from,
            },
            Side::Remote {
                node: to_node,
                path: to,
            },
        ) => {
            if from.is_empty() || from.ends_with('/') {
                return Err(format!("{src}: name the file to copy after the colon"));
            }
            if to.is_empty() {
                return Err(format!(
                    "{dst}: name the destination after the colon (ending in / for a directory)"
                ));
            }
            Ok(Plan::Copy {
                from_node,
                from,
                to_node,
                to,
            })
        }
        (Side::Local(_), Side::Local(_)) => Err(
            "one of SRC and DST must be NODE:PATH (a local path with a colon is written ./a:b)"
                .into(),
        ),
        (Side::Local(local), Side::Remote { node, path }) => {
            if local.as_os_str().to_string_lossy().ends_with('/') || local.is_dir() {
                return Err(format!(
                    "{} is a directory: copy it with -r",
                    local.display()
                ));
            }
            Ok(Plan::Put {
                local,
                node,
                remote: path,
            })
        }
        (Side::Remote { node, path }, Side::Local(local)) => {
            if path.is_empty() {
                return Err(format!("{src}: name the file to copy after the colon"));
            }
            Ok(Plan::Get {
                node,
                remote: path,
                local,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(node: &str, path: &str) -> Side {
        Side::Remote {
            node: node.into(),
            path: path.into(),
        }
    }

    #[test]
    fn node_colon_path_is_remote_and_anything_else_local() {
        assert_eq!(Side::parse("box:a/b.txt"), remote("box", "a/b.txt"));
        assert_eq!(
            Side::parse("web-1:/etc/hosts"),
            remote("web-1", "/etc/hosts")
        );
        assert_eq!(Side::parse("box:a:b"), remote("box", "a:b"));
        assert_eq!(Side::parse("box:"), remote("box", ""));
        assert_eq!(Side::parse("./a:b"), Side::Local("./a:b".into()));
        assert_eq!(Side::parse("/tmp/a:b"), Side::Local("/tmp/a:b".into()));
        assert_eq!(Side::parse("Box:a"), Side::Local("Box:a".into()));
        assert_eq!(Side::parse("my_box:a"), Side::Local("my_box:a".into()));
        assert_eq!(Side::parse(":a"), Side::Local(":a".into()));
        assert_eq!(Side::parse("-box:a"), Side::Local("-box:a".into()));
        let long = format!("{}:a", "a".repeat(33));
        assert_eq!(Side::parse(&long), Side::Local(long.clone().into()));
        assert_eq!(Side::parse("plain.txt"), Side::Local("plain.txt".into()));
    }

    #[test]
    fn at_least_one_side_is_a_node() {
        assert_eq!(
            plan("box:logs/a.log", "out.log"),
            Ok(Plan::Get {
                node: "box".into(),
                remote: "logs/a.log".into(),
                local: "out.log".into()
            })
        );
        assert_eq!(
            plan("./a:b", "box:dir/"),
            Ok(Plan::Put {
                local: "./a:b".into(),
                node: "box".into(),
                remote: "dir/".into()
            })
        );
        assert_eq!(
            plan("a:x", "b:y/"),
            Ok(Plan::Copy {
                from_node: "a".into(),
                from: "x".into(),
                to_node: "b".into(),
                to: "y/".into()
            })
        );
        assert!(plan("a:", "b:y").is_err());
        assert!(plan("a:x", "b:").is_err());
        let e = plan("a.txt", "b.txt").expect_err("local to local");
        assert!(e.contains("NODE:PATH"), "{e}");
        assert!(plan("box:", "out").is_err());
        assert!(plan("/", "box:x").is_err());
    }
}
