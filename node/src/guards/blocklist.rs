//! The shell blocklist: commands a node refuses to run, whoever asks.
//!
//! A gateway decides which agent may call which tool, but a gateway can be
//! misconfigured (a token allowed `*`, no `confirm` globs) or compromised. The
//! blocklist is the node's own last word on a handful of commands whose only plausible
//! effect is to destroy the machine: wiping the root file system or a home directory,
//! formatting or overwriting a disk, powering the machine off, a fork bomb. It is always
//! on, in every mode, for every Bash call (`pty` and background ones included); there is
//! no flag to turn it off and no approval that overrides it. A refused call ends with
//! the protocol error `denied` and nothing runs.
//!
//! **It is a seat belt, not a sandbox.** It catches the obvious spellings (quotes and
//! backslashes inside words, brace and glob spellings of paths (`/{etc,usr}`, `/[e]tc`,
//! `/e*`), `sudo`/`env`/`chroot`/`nsenter`/`flock`/… prefixes, chained commands,
//! `$(…)`/backtick bodies, `bash -c '…'`, `eval`, `find / -delete`), and nothing that
//! needs the shell to run first: variables (`x=rm; $x -rf /`), aliases, functions,
//! scripts in files, other interpreters (`python -c …`), text piped into a shell,
//! relative paths that only the working directory makes dangerous
//! (`cd / && rm -rf *`), or data written to a running program's stdin through the
//! Process tool. A node that must contain a hostile agent needs an OS-level sandbox (a
//! container, a VM, a dedicated user), not this list.
//!
//! # Rules
//!
//! | Rule | Refused | Not refused |
//! |---|---|---|
//! | `rm-root` | recursive `rm` of `/`, `/*`, a top-level system directory (`/etc`, `/usr`, `/home`, …, and vital second levels such as `/usr/lib`, `/var/lib`), a whole home directory (`~`, `~/`, `~/*`, `$HOME`, `~user`, `/home/user`, `/root`), or any `rm --no-preserve-root`; also when a brace expression or glob could name one (`/{etc,usr}`, `/[e]tc`, `/e*`, `/*/*`), or braces expand to more than 1024 words | `rm -rf ./build`, `rm -rf /tmp/x`, `rm -rf ~/project/target`, `rm -rf /tmp/{a,b}`, `rm -rf /tmp/build-*` |
//! | `chmod-root` | recursive `chmod`/`chown`/`chgrp` of the same paths, or `--no-preserve-root` | `chmod -R u+w ./src` |
//! | `mv-root` | `mv` of one of those paths | `mv a b` |
//! | `find-delete-root` | `find` (after `-H`/`-L`/`-P`/`-D`/`-O`) starting at one of those paths with `-delete` or `-exec`/`-execdir`/`-ok` `rm`/`shred`/`unlink`/`rmdir`; the command of every `-exec` is checked by all the rules | `find . -delete`, `find / -name x` |
//! | `disk-format` | `mkfs`, `mkfs.*`, `mke2fs`, `mkswap`, `newfs*`, `wipefs`, `blkdiscard`, `diskutil erase…`/`zeroDisk`/`partitionDisk` | `lsblk` |
//! | `disk-partition` | `fdisk`, `sfdisk`, `cfdisk`, `gdisk`, `sgdisk`, `cgdisk`, `parted` in any spelling not known to only print (interactive use included) | `fdisk -l`, `sfdisk --dump /dev/sda`, `sgdisk -p /dev/sda`, `parted -l`, `parted /dev/sda print` |
//! | `raw-disk-write` | writing to a disk device (`/dev/sd*`, `/dev/nvme*`, `/dev/vd*`, `/dev/xvd*`, `/dev/mmcblk*`, `/dev/disk*`, `/dev/mapper/*`, `/dev/md*`, `/dev/mem`, …): `dd of=`, a redirection (`>`, `>>`, `&>`, `<>`), `tee`, `cp` to it, `shred` | `dd if=/dev/sda of=disk.img`, `ls /dev/sda`, `> /dev/null` |
//! | `power` | `shutdown`, `reboot`, `halt`, `poweroff`, `init 0`/`6`, `telinit 0`/`6`, `systemctl`/`loginctl` `poweroff`/`reboot`/`halt`/`kexec` | `echo reboot`, `grep shutdown log.txt`, `systemctl status` |
//! | `kill-all` | `kill` of pid `-1` (every process the user may signal) or `1` (init: SIGINT reboots a systemd host), with any signal; `killall5` | `kill -1 1234` (SIGHUP to 1234), `kill -l 1`, `killall firefox` |
//! | `fork-bomb` | a function that pipes or backgrounds itself twice: `:(){ :\|:& };:` and its spaced and renamed variants | `f() { echo hi; }` |
//! | `nesting` | command substitutions or `-c` strings nested deeper than 8 levels (too deep to check) | |
//!
//! The home directory is protected as a whole (`rm -rf ~` is the classic accident and
//! never what an agent means); its contents are not: `rm -rf ~/build` runs.
//!
//! Each rule looks at *simple commands* as the `shell` lexer splits them, after the
//! wrappers that run their arguments as a command (`sudo`, `doas`, `env`, `nice`,
//! `nohup`, `timeout`, `xargs`, `command`, `exec`, `time`, `stdbuf`, `setsid`,
//! `chroot`, `nsenter`, `unshare`, `setpriv`, `flock`, `runuser`, `chrt`, `taskset`,
//! `fakeroot`, `strace`, …: see `wrappers`) and leading `VAR=value` assignments are
//! skipped, with the program's base name (`/sbin/reboot` is `reboot`). Nested command
//! lines (`$(…)`, backticks, process substitutions, `sh -c`, `su -c`, `eval`,
//! `flock -c`, `script -c`, `runuser -c`, `env -S`, `watch`, `sg`, here-documents fed to
//! a shell) are checked the same way.

use super::partition::edits_partitions;
use super::pattern::{expand_braces, glob_matches};
use super::shell::{lex, SimpleCommand, Token};
use super::wrappers::{basename, unwrap};
use regex::Regex;
use std::fmt;
use std::sync::LazyLock;
use thiserror::Error;

/// How deep nested command lines are followed before the command is refused.
pub const MAX_NESTING: usize = 8;

/// Which rule refused a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    RmRoot,
    ChmodRoot,
    MvRoot,
    FindDeleteRoot,
    DiskFormat,
    DiskPartition,
    RawDiskWrite,
    Power,
    KillAll,
    ForkBomb,
    Nesting,
}

impl Rule {
    /// The rule's name, as shown in refusals.
    pub fn name(self) -> &'static str {
        match self {
            Rule::RmRoot => "rm-root",
            Rule::ChmodRoot => "chmod-root",
            Rule::MvRoot => "mv-root",
            Rule::FindDeleteRoot => "find-delete-root",
            Rule::DiskFormat => "disk-format",
            Rule::DiskPartition => "disk-partition",
            Rule::RawDiskWrite => "raw-disk-write",
            Rule::Power => "power",
            Rule::KillAll => "kill-all",
            Rule::ForkBomb => "fork-bomb",
            Rule::Nesting => "nesting",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A command the blocklist refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("blocked by the node's shell blocklist ({rule}): this is a seat belt against obvious destruction, not a sandbox")]
pub struct Blocked {
    pub rule: Rule,
}

/// Checks one Bash command line; `Err` names the rule it breaks.
pub fn check(command: &str) -> Result<(), Blocked> {
    scan(command, 0).map_err(|rule| Blocked { rule })
}

fn scan(text: &str, depth: usize) -> Result<(), Rule> {
    if depth > MAX_NESTING {
        return Err(Rule::Nesting);
    }
    if is_fork_bomb(text) {
        return Err(Rule::ForkBomb);
    }
    let script = lex(text);
    for command in &script.commands {
        check_command(command, depth)?;
    }
    for nested in &script.nested {
        scan(nested, depth + 1)?;
    }
    Ok(())
}

fn check_command(command: &SimpleCommand, depth: usize) -> Result<(), Rule> {
    if command
        .redirects()
        .any(|r| r.writes() && is_raw_disk(&r.target))
    {
        return Err(Rule::RawDiskWrite);
    }
    let words = command.words();
    let unwrapped = unwrap(&words);
    for line in &unwrapped.command_lines {
        scan(line, depth + 1)?;
    }
    let Some((&program, args)) = unwrapped.words.split_first() else {
        return Ok(());
    };
    match basename(program) {
        "shutdown" | "reboot" | "halt" | "poweroff" => Err(Rule::Power),
        "init" | "telinit" if matches!(args.first(), Some(&"0") | Some(&"6")) => Err(Rule::Power),
        "systemctl" | "loginctl" => match args.iter().find(|a| !a.starts_with('-')) {
            Some(&("poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot")) => Err(Rule::Power),
            _ => Ok(()),
        },
        "mke2fs" | "mkswap" | "wipefs" | "blkdiscard" => Err(Rule::DiskFormat),
        p @ ("fdisk" | "sfdisk" | "cfdisk" | "gdisk" | "sgdisk" | "cgdisk" | "parted")
            if edits_partitions(p, args) =>
        {
            Err(Rule::DiskPartition)
        }
        n if n == "mkfs" || n.starts_with("mkfs.") || n.starts_with("newfs") => {
            Err(Rule::DiskFormat)
        }
        "diskutil" => match args.iter().find(|a| !a.starts_with('-')) {
            Some(verb)
                if verb.starts_with("erase")
                    || verb.starts_with("secureErase")
                    || ["zeroDisk", "randomDisk", "partitionDisk", "reformat"].contains(verb) =>
            {
                Err(Rule::DiskFormat)
            }
            _ => Ok(()),
        },
        "dd" => {
            let target = args.iter().find_map(|a| a.strip_prefix("of="));
            if target.is_some_and(is_raw_disk) {
                Err(Rule::RawDiskWrite)
            } else {
                Ok(())
            }
        }
        "tee" | "shred" => {
            if operands(args).iter().any(|a| is_raw_disk(a)) {
                Err(Rule::RawDiskWrite)
            } else {
                Ok(())
            }
        }
        "cp" => {
            // Only the destination is written.
            if operands(args).last().is_some_and(|a| is_raw_disk(a)) {
                Err(Rule::RawDiskWrite)
            } else {
                Ok(())
            }
        }
        "rm" => {
            if args.contains(&"--no-preserve-root") {
                return Err(Rule::RmRoot);
            }
            if is_recursive(args, &['r', 'R']) && operands(args).iter().any(|a| is_protected(a)) {
                return Err(Rule::RmRoot);
            }
            Ok(())
        }
        "chmod" | "chown" | "chgrp" => {
            if args.contains(&"--no-preserve-root") {
                return Err(Rule::ChmodRoot);
            }
            if is_recursive(args, &['R']) && operands(args).iter().any(|a| is_protected(a)) {
                return Err(Rule::ChmodRoot);
            }
            Ok(())
        }
        "mv" => {
            let ops = operands(args);
            // Every operand but the last is a source.
            match ops.split_last() {
                Some((_, sources)) if sources.iter().any(|a| is_protected(a)) => Err(Rule::MvRoot),
                _ => Ok(()),
            }
        }
        "find" => check_find(args, depth),
        "kill" => check_kill(args),
        "killall5" => Err(Rule::KillAll),
        "eval" => scan(&args.join(" "), depth + 1),
        "su" => match command_string(args, &["-c", "--command"]) {
            Some(inner) => scan(inner, depth + 1),
            None => Ok(()),
        },
        shell if is_shell(shell) => {
            if let Some(inner) = shell_command_string(args) {
                return scan(inner, depth + 1);
            }
            // `bash <<EOF …` / `bash <<< '…'`: the shell runs its stdin.
            if operands(args).is_empty() {
                for text in &command.stdin_texts {
                    scan(text, depth + 1)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn is_shell(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "yash" | "fish"
    )
}

/// The command string of `sh -c STRING` (also `-lc`, `-ec`, `-c` after other options).
fn shell_command_string<'w>(args: &[&'w str]) -> Option<&'w str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if matches!(*arg, "-o" | "+o" | "-O" | "+O") {
            // `bash -o pipefail -c …`: an option name follows.
            iter.next();
            continue;
        }
        if arg.starts_with('-') && !arg.starts_with("--") && arg.contains('c') {
            return iter.find(|a| !a.starts_with('-')).copied();
        }
        if !arg.starts_with('-') && !arg.starts_with('+') {
            // A script file: its contents are out of reach.
            return None;
        }
    }
    None
}

/// The value of the first of `options` (`-c CMD`, `--command CMD`, `--command=CMD`).
fn command_string<'w>(args: &[&'w str], options: &[&str]) -> Option<&'w str> {
    for (i, arg) in args.iter().enumerate() {
        if options.contains(arg) {
            return args.get(i + 1).copied();
        }
        for option in options {
            if let Some(value) = arg
                .strip_prefix(option)
                .and_then(|rest| rest.strip_prefix('='))
            {
                return Some(value);
            }
        }
    }
    None
}

/// The arguments that are not options (all of them after `--`).
fn operands<'w>(args: &[&'w str]) -> Vec<&'w str> {
    let mut out = Vec::new();
    let mut options_done = false;
    for arg in args {
        if options_done {
            out.push(*arg);
        } else if *arg == "--" {
            options_done = true;
        } else if !(arg.starts_with('-') && arg.len() > 1) {
            out.push(*arg);
        }
    }
    out
}

/// Whether the options ask for recursion: a short-option cluster with one of `letters`
/// (`-rf`, `-fr`, `-R`), or `--recursive`.
fn is_recursive(args: &[&str], letters: &[char]) -> bool {
    for arg in args {
        if *arg == "--" {
            break;
        }
        if *arg == "--recursive" {
            return true;
        }
        if !arg.starts_with("--")
            && arg.starts_with('-')
            && arg.chars().skip(1).any(|c| letters.contains(&c))
        {
            return true;
        }
    }
    false
}

/// `find [-H|-L|-P] [-D LIST] [-OLEVEL] PATH… EXPR`: a protected starting point with a
/// deleting action (`-delete`, `-exec rm …`) is refused; the commands of `-exec`,
/// `-execdir`, `-ok` and `-okdir` are checked like any other.
fn check_find(args: &[&str], depth: usize) -> Result<(), Rule> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match *arg {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            "--" => {
                i += 1;
                break;
            }
            o if o.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let args = args.get(i..).unwrap_or(&[]);
    let protected_start = args
        .iter()
        .take_while(|a| !a.starts_with('-') && **a != "(" && **a != "!")
        .any(|a| is_protected(a));
    let mut deletes = false;
    for (i, arg) in args.iter().enumerate() {
        match *arg {
            "-delete" => deletes = true,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let inner: Vec<&str> = args[i + 1..]
                    .iter()
                    .copied()
                    .take_while(|a| *a != ";" && *a != "+")
                    .collect();
                let unwrapped = unwrap(&inner);
                if unwrapped
                    .words
                    .first()
                    .is_some_and(|p| matches!(basename(p), "rm" | "shred" | "unlink" | "rmdir"))
                {
                    deletes = true;
                }
                let command = SimpleCommand {
                    tokens: inner.iter().map(|w| Token::Word((*w).to_owned())).collect(),
                    stdin_texts: Vec::new(),
                };
                check_command(&command, depth + 1)?;
            }
            _ => {}
        }
    }
    if protected_start && deletes {
        Err(Rule::FindDeleteRoot)
    } else {
        Ok(())
    }
}

/// `kill [-SIG] PID…` where a PID is `-1` (every process the user may signal) or `1`
/// (init: SIGINT reboots a systemd machine, SIGRTMIN+4 powers it off).
fn check_kill(args: &[&str]) -> Result<(), Rule> {
    let mut rest = args;
    match rest.first() {
        // `kill -l 1` names signal 1.
        Some(&("-l" | "-L" | "--list" | "--table")) => return Ok(()),
        Some(&("-s" | "-n")) => rest = rest.get(2..).unwrap_or(&[]),
        Some(&"--") => {}
        Some(first) if first.starts_with('-') && rest.len() > 1 => rest = &rest[1..],
        _ => {}
    }
    if rest.first() == Some(&"--") {
        rest = &rest[1..];
    }
    let everything_or_init = |pid: &&str| matches!(pid.parse::<i64>(), Ok(-1) | Ok(1));
    if rest.iter().any(everything_or_init) {
        Err(Rule::KillAll)
    } else {
        Ok(())
    }
}

/// Top-level directories whose loss breaks the system (Linux and macOS).
const SYSTEM_DIRS: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "usr",
    "var",
    "Applications",
    "Library",
    "System",
    "Users",
    "Volumes",
    "private",
];

/// Second-level directories that are as vital as the top-level ones.
const SYSTEM_SUBDIRS: &[&str] = &[
    "usr/bin",
    "usr/sbin",
    "usr/lib",
    "usr/lib32",
    "usr/lib64",
    "usr/libexec",
    "usr/share",
    "usr/include",
    "var/lib",
    "private/etc",
    "private/var",
];

/// Whether removing `path` recursively would destroy the system or a home directory.
/// Brace expressions are expanded and glob characters are taken to match whatever
/// they could (`/{etc,usr}`, `/[e]tc`, `/e*`, `/*/lib` are all protected); a word
/// whose expansion is too large to check is protected if it looks like a path.
fn is_protected(path: &str) -> bool {
    match expand_braces(path) {
        Some(words) => words.iter().any(|w| is_protected_word(w)),
        None => path.contains('/') || path.starts_with('~'),
    }
}

fn is_protected_word(path: &str) -> bool {
    let mut p = path;
    // `~/`, `~/*`, `$HOME/.*`, `/*`: the directory itself or all of it.
    while let Some(stripped) = p
        .strip_suffix("/*")
        .or_else(|| p.strip_suffix("/.*"))
        .or_else(|| p.strip_suffix("/."))
        .or_else(|| p.strip_suffix('/'))
    {
        p = stripped;
    }
    if p.is_empty() && path.starts_with('/') {
        return true;
    }
    if matches!(p, "~" | "$HOME" | "${HOME}") {
        return true;
    }
    if let Some(user) = p.strip_prefix('~') {
        return !user.contains('/');
    }
    if !path.starts_with('/') {
        return false;
    }
    let mut parts = normalise_components(p);
    // A trailing `*` or `.*` means everything in the directory.
    if matches!(parts.last(), Some(&"*") | Some(&".*")) {
        parts.pop();
    }
    match parts.as_slice() {
        [] => true,
        [top] => SYSTEM_DIRS.iter().any(|d| glob_matches(top, d)),
        [home, _user] if glob_matches(home, "home") || glob_matches(home, "Users") => true,
        [a, b] => SYSTEM_SUBDIRS.iter().any(|sub| {
            sub.split_once('/')
                .is_some_and(|(x, y)| glob_matches(a, x) && glob_matches(b, y))
        }),
        _ => false,
    }
}

/// The components of an absolute path with `.`, empty components and `..` resolved
/// lexically (`/usr/../` is `/`).
fn normalise_components(path: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts
}

static RAW_DISK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(?:s|h|v|xv)d[a-z]+[0-9]*|nvme[0-9]+(?:n[0-9]+(?:p[0-9]+)?)?|mmcblk[0-9]+(?:p[0-9]+)?|r?disk[0-9]+(?:s[0-9]+)*|md[0-9]+(?:p[0-9]+)?|md/.+|dm-[0-9]+|mapper/.+|disk/.+|loop[0-9]+|nbd[0-9]+(?:p[0-9]+)?|mtd(?:block)?[0-9]+|zd[0-9]+|rbd[0-9]+|bcache[0-9]+|sr[0-9]+|root|mem|kmem|port)$",
    )
    .expect("the raw-disk pattern is valid")
});

/// Whether `path` names a disk (or memory) device, e.g. `/dev/sda1`, `/dev/nvme0n1`.
fn is_raw_disk(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    let parts = normalise_components(path);
    match parts.split_first() {
        Some((&"dev", rest)) if !rest.is_empty() => RAW_DISK.is_match(&rest.join("/")),
        _ => false,
    }
}

static FUNCTION_DEF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([^\s;&|(){}<>]+)\s*\(\s*\)\s*\{([^}]*)\}").expect("the function pattern is valid")
});

static FUNCTION_KEYWORD_DEF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bfunction\s+([^\s;&|(){}<>]+)\s*(?:\(\s*\))?\s*\{([^}]*)\}")
        .expect("the function pattern is valid")
});

/// A function whose body calls itself at least twice with a pipe or `&`:
/// `:(){ :|:& };:`, `bomb() { bomb | bomb & }; bomb`, `function f { f & f; }`.
fn is_fork_bomb(text: &str) -> bool {
    if !text.contains('{') {
        return false;
    }
    let unquoted = drop_quoted(text);
    [&*FUNCTION_DEF, &*FUNCTION_KEYWORD_DEF].iter().any(|re| {
        re.captures_iter(&unquoted).any(|c| {
            let (Some(name), Some(body)) = (c.get(1), c.get(2)) else {
                return false;
            };
            let name = name.as_str();
            let body = body.as_str();
            let calls = body
                .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|'))
                .filter(|w| *w == name)
                .count();
            calls >= 2 && (body.contains('|') || body.contains('&'))
        })
    })
}

/// `text` without the contents of quoted strings (they are data, not code).
fn drop_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '\'' => {
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                }
            }
            '"' => {
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            chars.next();
                        }
                        _ => {}
                    }
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands that must be refused, with the rule that refuses them.
    const BLOCKED: &[(&str, Rule)] = &[
        // rm of the root, in its spellings.
        ("rm -rf /", Rule::RmRoot),
        ("rm -rf / ", Rule::RmRoot),
        ("  rm   -rf    /  ", Rule::RmRoot),
        ("rm -fr /", Rule::RmRoot),
        ("rm -Rf /", Rule::RmRoot),
        ("rm -r -f /", Rule::RmRoot),
        ("rm -r /", Rule::RmRoot),
        ("rm --recursive --force /", Rule::RmRoot),
        ("rm -rf -- /", Rule::RmRoot),
        ("rm -rf /*", Rule::RmRoot),
        ("rm -rf //", Rule::RmRoot),
        ("rm -rf /.", Rule::RmRoot),
        ("rm -rf /tmp/../", Rule::RmRoot),
        ("rm -rf \"/\"", Rule::RmRoot),
        ("rm -rf / --no-preserve-root", Rule::RmRoot),
        ("rm -rf --no-preserve-root /", Rule::RmRoot),
        ("rm --no-preserve-root -r /", Rule::RmRoot),
        (r"r\m -rf /", Rule::RmRoot),
        (r#""rm" -rf /"#, Rule::RmRoot),
        ("'rm' -rf /", Rule::RmRoot),
        (r#"r""m -r''f "/""#, Rule::RmRoot),
        (r"$'\x72m' -rf /", Rule::RmRoot),
        ("/bin/rm -rf /", Rule::RmRoot),
        ("sudo rm -rf /", Rule::RmRoot),
        ("sudo -u root rm -rf /", Rule::RmRoot),
        ("sudo -E -- rm -rf /", Rule::RmRoot),
        ("doas rm -rf /", Rule::RmRoot),
        ("env FOO=1 rm -rf /", Rule::RmRoot),
        ("FOO=1 rm -rf /", Rule::RmRoot),
        ("nohup nice -n 10 rm -rf / &", Rule::RmRoot),
        ("timeout 10 rm -rf /", Rule::RmRoot),
        ("time rm -rf /", Rule::RmRoot),
        ("command rm -rf /", Rule::RmRoot),
        ("exec rm -rf /", Rule::RmRoot),
        ("echo / | xargs rm -rf /", Rule::RmRoot),
        ("rm -rf /usr", Rule::RmRoot),
        ("rm -rf /etc/", Rule::RmRoot),
        ("rm -rf /usr/lib", Rule::RmRoot),
        ("rm -rf /var/lib/", Rule::RmRoot),
        ("rm -rf /home", Rule::RmRoot),
        ("rm -rf /home/alice", Rule::RmRoot),
        ("rm -rf /Users/alice/", Rule::RmRoot),
        ("rm -rf /root", Rule::RmRoot),
        // The home directory as a whole.
        ("rm -rf ~", Rule::RmRoot),
        ("rm -rf ~/", Rule::RmRoot),
        ("rm -rf ~/*", Rule::RmRoot),
        ("rm -rf $HOME", Rule::RmRoot),
        ("rm -rf ${HOME}/", Rule::RmRoot),
        (r#"rm -rf "$HOME""#, Rule::RmRoot),
        (r#"rm -rf "${HOME}"/"#, Rule::RmRoot),
        ("rm -rf ~alice", Rule::RmRoot),
        // Hidden behind other commands.
        ("echo hi; rm -rf /", Rule::RmRoot),
        ("true && rm -rf /", Rule::RmRoot),
        ("false || rm -rf /", Rule::RmRoot),
        ("cd /tmp\nrm -rf /", Rule::RmRoot),
        ("(rm -rf /)", Rule::RmRoot),
        ("{ rm -rf /; }", Rule::RmRoot),
        ("if true; then rm -rf /; fi", Rule::RmRoot),
        ("echo $(rm -rf /)", Rule::RmRoot),
        ("echo `rm -rf /`", Rule::RmRoot),
        (r#"echo "$(rm -rf /)""#, Rule::RmRoot),
        ("echo $(echo $(rm -rf /))", Rule::RmRoot),
        ("bash -c 'rm -rf /'", Rule::RmRoot),
        ("sh -c \"rm -rf /\"", Rule::RmRoot),
        ("bash -lc 'rm -rf /'", Rule::RmRoot),
        ("bash -o pipefail -c 'rm -rf /'", Rule::RmRoot),
        ("sudo sh -c 'cd / && rm -rf /'", Rule::RmRoot),
        ("su -c 'rm -rf /'", Rule::RmRoot),
        ("eval rm -rf /", Rule::RmRoot),
        ("eval 'rm -rf /'", Rule::RmRoot),
        ("bash <<EOF\nrm -rf /\nEOF", Rule::RmRoot),
        ("bash <<< 'rm -rf /'", Rule::RmRoot),
        ("cat <<EOF\n$(rm -rf /)\nEOF", Rule::RmRoot),
        // chmod / chown / mv / find.
        ("chmod -R 777 /", Rule::ChmodRoot),
        ("chmod -R 000 /etc", Rule::ChmodRoot),
        ("chown -R nobody /", Rule::ChmodRoot),
        ("chown -R x:x /*", Rule::ChmodRoot),
        ("chgrp --recursive users /usr", Rule::ChmodRoot),
        ("chmod --no-preserve-root -R 700 /", Rule::ChmodRoot),
        ("mv / /dev/null", Rule::MvRoot),
        ("mv ~ /tmp/x", Rule::MvRoot),
        ("mv /etc /etc.bak", Rule::MvRoot),
        ("find / -delete", Rule::FindDeleteRoot),
        ("find / -type f -exec rm -f {} +", Rule::FindDeleteRoot),
        ("find / -name x -exec rm {} ;", Rule::FindDeleteRoot),
        ("find ~ -name '*' -delete", Rule::FindDeleteRoot),
        // Formatting and wiping disks.
        ("mkfs", Rule::DiskFormat),
        ("mkfs /dev/sda1", Rule::DiskFormat),
        ("mkfs.ext4 /dev/sda1", Rule::DiskFormat),
        ("sudo mkfs.xfs -f /dev/nvme0n1p2", Rule::DiskFormat),
        ("/sbin/mkfs.vfat /dev/sdb", Rule::DiskFormat),
        ("mke2fs /dev/sdb1", Rule::DiskFormat),
        ("mkswap /dev/sda2", Rule::DiskFormat),
        ("wipefs -a /dev/sda", Rule::DiskFormat),
        ("blkdiscard /dev/nvme0n1", Rule::DiskFormat),
        ("newfs_apfs /dev/disk2", Rule::DiskFormat),
        ("diskutil eraseDisk APFS X disk2", Rule::DiskFormat),
        ("diskutil zeroDisk disk2", Rule::DiskFormat),
        // Writing to a disk device.
        ("dd if=/dev/zero of=/dev/sda", Rule::RawDiskWrite),
        (
            "dd if=/dev/urandom of=/dev/nvme0n1 bs=1M",
            Rule::RawDiskWrite,
        ),
        ("dd of=/dev/sda1 if=image.iso", Rule::RawDiskWrite),
        ("sudo dd if=x.img of=/dev/mmcblk0", Rule::RawDiskWrite),
        (
            "dd if=/dev/zero of=/dev/disk/by-id/ata-X",
            Rule::RawDiskWrite,
        ),
        ("dd if=/dev/zero of=/dev//sda", Rule::RawDiskWrite),
        ("> /dev/sda", Rule::RawDiskWrite),
        (":>/dev/sda", Rule::RawDiskWrite),
        ("cat x > /dev/nvme0n1", Rule::RawDiskWrite),
        ("cat x >/dev/sdb", Rule::RawDiskWrite),
        ("echo x >> /dev/vda", Rule::RawDiskWrite),
        ("cat x 1>/dev/xvda", Rule::RawDiskWrite),
        ("cat x &> /dev/sda", Rule::RawDiskWrite),
        ("cat x >& /dev/sda", Rule::RawDiskWrite),
        ("exec 3<>/dev/sda", Rule::RawDiskWrite),
        (
            "head -c 1M /dev/zero > /dev/mapper/root",
            Rule::RawDiskWrite,
        ),
        ("cat x | tee /dev/sda", Rule::RawDiskWrite),
        ("cp image.iso /dev/sdb", Rule::RawDiskWrite),
        ("shred /dev/sda", Rule::RawDiskWrite),
        ("shred -n 3 -z /dev/nvme0n1", Rule::RawDiskWrite),
        ("echo 1 > /dev/mem", Rule::RawDiskWrite),
        ("cat x > /dev/disk2", Rule::RawDiskWrite),
        // Powering off.
        ("shutdown -h now", Rule::Power),
        ("shutdown now", Rule::Power),
        ("reboot", Rule::Power),
        ("sudo reboot", Rule::Power),
        ("/sbin/reboot -f", Rule::Power),
        ("halt", Rule::Power),
        ("poweroff", Rule::Power),
        ("init 0", Rule::Power),
        ("init 6", Rule::Power),
        ("telinit 0", Rule::Power),
        ("systemctl poweroff", Rule::Power),
        ("systemctl reboot", Rule::Power),
        ("systemctl halt", Rule::Power),
        ("sudo systemctl --force reboot", Rule::Power),
        ("loginctl poweroff", Rule::Power),
        ("echo done; reboot", Rule::Power),
        ("reboot; touch MARKER", Rule::Power),
        ("sleep 1 && shutdown -r now", Rule::Power),
        ("echo $(reboot)", Rule::Power),
        ("r\\eboot", Rule::Power),
        ("'reboot'", Rule::Power),
        // Killing everything.
        ("kill -9 -1", Rule::KillAll),
        ("kill -KILL -1", Rule::KillAll),
        ("kill -s KILL -1", Rule::KillAll),
        ("kill -- -1", Rule::KillAll),
        // Fork bombs.
        (":(){ :|:& };:", Rule::ForkBomb),
        (":(){:|:&};:", Rule::ForkBomb),
        (": () { : | : & } ; :", Rule::ForkBomb),
        (":() {\n  :|:&\n};\n:", Rule::ForkBomb),
        ("bomb() { bomb | bomb & }; bomb", Rule::ForkBomb),
        ("f(){ f|f& };f", Rule::ForkBomb),
        ("function f { f | f & }; f", Rule::ForkBomb),
        ("bash -c ':(){ :|:& };:'", Rule::ForkBomb),
        // Brace and glob spellings of protected paths.
        ("rm -rf /{etc,usr}", Rule::RmRoot),
        ("rm -rf /{tmp/x,etc}", Rule::RmRoot),
        ("rm -rf {/tmp/x,/}", Rule::RmRoot),
        ("rm -rf /{e,}tc", Rule::RmRoot),
        ("rm -rf /{d..f}tc", Rule::RmRoot),
        ("rm -rf /lib{30..40}", Rule::RmRoot),
        ("rm -rf /[e]tc", Rule::RmRoot),
        ("rm -rf /[a-f]tc/", Rule::RmRoot),
        ("rm -rf /e*", Rule::RmRoot),
        ("rm -rf /e?c", Rule::RmRoot),
        ("rm -rf /???", Rule::RmRoot),
        ("rm -rf /*", Rule::RmRoot),
        ("rm -rf /*/*", Rule::RmRoot),
        ("rm -rf /u*/l*", Rule::RmRoot),
        ("rm -rf /usr/li[b]", Rule::RmRoot),
        ("rm -rf /h*/alice", Rule::RmRoot),
        ("rm -rf /tmp/../e*", Rule::RmRoot),
        ("rm -rf ~{,}", Rule::RmRoot),
        (
            "rm -rf /tmp/{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}{s,t}{u,v}",
            Rule::RmRoot,
        ),
        ("chmod -R 777 /{etc,tmp}", Rule::ChmodRoot),
        ("mv /[e]tc /tmp/x", Rule::MvRoot),
        ("find /e* -delete", Rule::FindDeleteRoot),
        // find with its leading options, and what -exec runs.
        ("find -L / -delete", Rule::FindDeleteRoot),
        ("find -H -O3 / -delete", Rule::FindDeleteRoot),
        ("find -D tree / -delete", Rule::FindDeleteRoot),
        ("find / -exec sudo rm -f {} +", Rule::FindDeleteRoot),
        ("find / -execdir unlink {} ;", Rule::FindDeleteRoot),
        ("find . -exec reboot ;", Rule::Power),
        ("find . -exec sh -c 'rm -rf /' ;", Rule::RmRoot),
        // Wrappers.
        ("chroot / rm -rf /", Rule::RmRoot),
        ("chroot --userspec=0:0 / rm -rf /", Rule::RmRoot),
        ("nsenter -t 1 -m -u -i -n -p rm -rf /", Rule::RmRoot),
        ("nsenter --target 1 --mount reboot", Rule::Power),
        ("unshare -r rm -rf /", Rule::RmRoot),
        (
            "unshare --map-root-user --mount mkfs.ext4 /dev/sda1",
            Rule::DiskFormat,
        ),
        (
            "setpriv --reuid=0 --regid=0 --init-groups rm -rf /",
            Rule::RmRoot,
        ),
        ("setpriv --reuid 0 reboot", Rule::Power),
        ("flock /tmp/lock rm -rf /", Rule::RmRoot),
        ("flock -w 5 /tmp/lock -c 'rm -rf /'", Rule::RmRoot),
        ("flock --command 'reboot' /tmp/lock", Rule::Power),
        ("script -q -c 'rm -rf /' /dev/null", Rule::RmRoot),
        ("script -c reboot", Rule::Power),
        ("script --command='rm -rf /'", Rule::RmRoot),
        ("env -S 'rm -rf /'", Rule::RmRoot),
        ("env -S 'rm -rf' /", Rule::RmRoot),
        ("env -i -S'rm -rf /'", Rule::RmRoot),
        ("env --split-string='rm -rf /'", Rule::RmRoot),
        ("env --split-string 'reboot'", Rule::Power),
        ("runuser -u root -- rm -rf /", Rule::RmRoot),
        ("runuser root -c 'rm -rf /'", Rule::RmRoot),
        ("sg wheel 'rm -rf /'", Rule::RmRoot),
        ("watch -n 1 rm -rf /", Rule::RmRoot),
        ("chrt -f 10 rm -rf /", Rule::RmRoot),
        ("taskset -c 0 reboot", Rule::Power),
        ("fakeroot rm -rf /", Rule::RmRoot),
        ("strace -f -o /tmp/log rm -rf /", Rule::RmRoot),
        (
            "timeout 5 chroot / env A=1 nsenter -t 1 reboot",
            Rule::Power,
        ),
        // Partition tables.
        ("sgdisk -Z /dev/sda", Rule::DiskPartition),
        ("sgdisk --zap-all /dev/nvme0n1", Rule::DiskPartition),
        ("parted -s /dev/sda mklabel gpt", Rule::DiskPartition),
        ("parted /dev/sda rm 1", Rule::DiskPartition),
        ("fdisk /dev/sda", Rule::DiskPartition),
        ("sudo fdisk /dev/sda <<EOF\no\nw\nEOF", Rule::DiskPartition),
        ("echo ',,83' | sfdisk /dev/sda", Rule::DiskPartition),
        ("sfdisk --delete /dev/sda", Rule::DiskPartition),
        ("cfdisk /dev/sda", Rule::DiskPartition),
        ("gdisk /dev/sda", Rule::DiskPartition),
        ("wipefs -a -f /dev/sda", Rule::DiskFormat),
        // init, and everything.
        ("kill -9 1", Rule::KillAll),
        ("kill 1", Rule::KillAll),
        ("kill -INT 1", Rule::KillAll),
        ("kill -s RTMIN+4 1", Rule::KillAll),
        ("kill -- 1", Rule::KillAll),
        ("kill -9 1234 1", Rule::KillAll),
        ("sudo kill -TERM 1", Rule::KillAll),
        ("killall5", Rule::KillAll),
        ("killall5 -9", Rule::KillAll),
        ("/sbin/killall5 -15", Rule::KillAll),
    ];

    /// Commands that must run.
    const ALLOWED: &[&str] = &[
        "rm -rf ./build",
        "rm -rf build",
        "rm -rf /tmp/x",
        "rm -rf /tmp/x/",
        "rm -rf /var/tmp/cache",
        "rm -rf /home/alice/project/target",
        "rm -rf ~/build",
        "rm -rf ~/.cache/pip",
        "rm -rf $HOME/build",
        "rm -f /etc/motd.bak",
        "rm /",
        "rm -rf *",
        "rm -rf .",
        "rm -rf node_modules dist",
        "rm -rf /usr/local/lib/old",
        "echo reboot",
        "echo rm -rf /",
        "echo 'rm -rf /'",
        "echo \"a; reboot\"",
        "printf '%s\\n' shutdown",
        "grep shutdown log.txt",
        "grep -r 'rm -rf /' .",
        "man reboot",
        "which reboot",
        "command -v reboot",
        "type shutdown",
        "journalctl -b -1 | grep reboot",
        "last reboot",
        "systemctl status sshd",
        "systemctl list-units --type=target",
        "systemctl restart nginx",
        "init q",
        "ls /dev/sda",
        "ls -l /dev/sd*",
        "lsblk /dev/nvme0n1",
        "dd if=/dev/sda of=disk.img bs=4M",
        "dd if=/dev/zero of=./file bs=1M count=1",
        "dd if=/dev/zero of=/dev/null count=1",
        "cat /dev/sda | head -c 512 | xxd",
        "echo x > /dev/null",
        "echo x 2>/dev/null",
        "echo x > /dev/stderr",
        "cmd > /dev/tty",
        "cmd 2>&1 >/dev/null",
        "exec 3<>/dev/tcp/example.com/80",
        "echo x >/dev/shm/f",
        "cp /dev/sda disk.img",
        "sudo fdisk -l",
        "mkdir -p build && cd build",
        "chmod -R u+w ./src",
        "chmod 755 /usr/local/bin/tool",
        "chown -R me:me ~/project",
        "mv a b",
        "mv /tmp/a /tmp/b",
        "find . -name '*.o' -delete",
        "find /tmp/x -delete",
        "find / -name foo",
        "kill -1 1234",
        "kill -9 1234",
        "kill %1",
        "kill -HUP 42",
        "f() { echo hi; }; f",
        "a() { cat a & }",
        "echo ':(){ :|:& };:'",
        "echo '{ :|:& }'",
        "cat <<EOF\nreboot\nrm -rf /\nEOF",
        "cat <<'EOF'\n$(rm -rf /)\nEOF",
        "git commit -m 'reboot the world'",
        "python3 -c 'print(1)'",
        "bash script.sh -c reboot",
        "echo $((1 + 2))",
        "# reboot",
        "ls # rm -rf /",
        "shutdownd --help",
        "mkfsx",
        "ssh-keygen -t ed25519",
        // Globs and braces that name nothing protected.
        "ls /etc",
        "ls /e*",
        "cat /e*/hostname",
        "cat /etc/{hostname,hosts}",
        "rm -rf /tmp/{a,b}",
        "rm -rf /tmp/build-*",
        "rm -rf /tmp/x{1..100000}",
        "rm -rf ./{build,dist}",
        "rm -rf {build,dist}/",
        "rm -rf /var/tmp/*",
        "rm -rf /usr/local/lib/old*",
        "rm -rf ~/{build,.cache}",
        "rm -f /etc/*.bak",
        "rm -rf ${HOME}/build",
        "find / -name '*.conf'",
        "find -L . -delete",
        "find /tmp -exec rm {} +",
        "find . -exec grep -l x {} ;",
        // Wrappers around harmless commands.
        "chroot /srv/jail ls /",
        "nsenter -t 1 -n ip addr",
        "unshare -r id",
        "setpriv --reuid=1000 ls",
        "flock /tmp/lock -c 'make build'",
        "script -q -c 'ls -l' /dev/null",
        "env -S 'ls -l' /tmp",
        "watch -n 5 df -h",
        "chrt -p 1",
        "taskset -p 1",
        // Partition tables, read.
        "fdisk -l /dev/sda",
        "sfdisk -d /dev/sda",
        "sfdisk --json /dev/sda",
        "sgdisk -p /dev/sda",
        "parted -l",
        "parted -s /dev/sda unit MiB print",
        "lsblk -f",
        // Processes that are neither init nor everything.
        "kill -9 12345",
        "kill -l 1",
        "kill -1 4242",
        "kill -s HUP 10",
        "killall firefox",
        "pkill -f 'python worker.py'",
    ];

    #[test]
    fn blocked_commands_are_refused_with_their_rule() {
        for (command, rule) in BLOCKED {
            assert_eq!(
                check(command),
                Err(Blocked { rule: *rule }),
                "{command:?} should be refused by {rule}"
            );
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for command in ALLOWED {
            assert_eq!(check(command), Ok(()), "{command:?} should be allowed");
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut command = "true".to_owned();
        for _ in 0..=MAX_NESTING {
            command = format!("echo $({command})");
        }
        assert_eq!(
            check(&command),
            Err(Blocked {
                rule: Rule::Nesting
            })
        );
        let mut command = "true".to_owned();
        for _ in 0..MAX_NESTING {
            command = format!("echo $({command})");
        }
        assert_eq!(check(&command), Ok(()));
    }

    #[test]
    fn refusal_message() {
        let e = check("reboot").unwrap_err();
        assert_eq!(
            e.to_string(),
            "blocked by the node's shell blocklist (power): this is a seat belt against \
             obvious destruction, not a sandbox"
        );
    }

    #[test]
    fn protected_paths() {
        for p in [
            "/",
            "/*",
            "//",
            "/./",
            "/usr/..",
            "~",
            "~/",
            "$HOME/*",
            "/etc",
            "/usr/lib/",
            "/{etc,tmp}",
            "/[e]tc",
            "/e*",
            "/*/lib",
            "/home/*",
        ] {
            assert!(is_protected(p), "{p}");
        }
        for p in [
            "/tmp",
            "/tmp/x",
            ".",
            "*",
            "~/x",
            "/usr/local",
            "/etc/x",
            "build/",
            "/tmp/{a,b}",
            "/t*",
            "/etc/*.conf",
            "{a,b}",
        ] {
            assert!(!is_protected(p), "{p}");
        }
    }

    #[test]
    fn raw_disks() {
        for p in [
            "/dev/sda",
            "/dev/sda1",
            "/dev/nvme0n1",
            "/dev/nvme0n1p3",
            "/dev/vdb",
            "/dev/xvda1",
            "/dev/mmcblk0p1",
            "/dev/disk2s1",
            "/dev/rdisk2",
            "/dev/md0",
            "/dev/dm-1",
            "/dev/mapper/vg-root",
            "/dev/loop0",
            "/dev/mem",
        ] {
            assert!(is_raw_disk(p), "{p}");
        }
        for p in [
            "/dev/null",
            "/dev/zero",
            "/dev/stdout",
            "/dev/tty",
            "/dev/pts/3",
            "/dev/shm/x",
            "/dev/tcp/h/80",
            "/dev/fd/3",
            "/dev/urandom",
            "dev/sda",
            "/tmp/dev/sda",
            "/dev",
        ] {
            assert!(!is_raw_disk(p), "{p}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_checked_without_panicking(s in "\\PC{0,200}") {
            let _ = check(&s);
        }

        #[test]
        fn shell_like_text_is_checked_without_panicking(
            s in "[ a-z/\\\\'\"`$(){};|&<>#=~*\n-]{0,80}"
        ) {
            let _ = check(&s);
        }
    }

    #[test]
    fn edge_inputs_never_panic() {
        for s in [
            "", "\\", "'", "\"", "$(", "`", "$'\\x", "<<", "<<EOF", "a >", "(((((", ")))", "${",
            "$((", "\u{0}", "é$(é)", "$'\\777'", "kill -s", "kill --",
        ] {
            let _ = check(s);
        }
    }
}
