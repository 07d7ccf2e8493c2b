//! Options that turn an auto-approved command into a write or exec primitive.
//!
//! An `--approve-shell` pattern is a regex over text; it cannot know that
//! `git diff --output=/etc/cron.d/x` writes a file, that `find . -exec sh {} ;` runs a
//! program, or that `sed -i` edits in place. So a simple command that matches a pattern
//! is still sent to an operator when it carries one of the options below — the node
//! answers `approval_required` exactly as when no pattern matches. The table errs on
//! the side of asking: an option that *can* write or execute counts, whatever its value.
//!
//! What is looked at, per simple command (after wrappers such as `sudo` or `nice`):
//!
//! - a redirection that writes a file (`> f`, `>> f`, `&> f`, `<> f`, `>| f`; not
//!   `/dev/null`, `/dev/stdout`, `/dev/stderr`, `/dev/tty` or a descriptor copy `2>&1`);
//! - a wrapper that takes a command line in an option (`flock -c`, `script -c`,
//!   `env -S`, `watch`, `sg`, `runuser -c`);
//! - long options that write or run something for most programs ([`GENERIC_LONG`]:
//!   `--output`, `--exec`, `--config`, `--upload-pack`, `--ext-diff`, `--to-command`, …,
//!   also abbreviated as GNU and git parsers accept them), except for the programs whose
//!   `--output` only picks a format ([`FORMAT_OUTPUT`]: `journalctl`, `kubectl`, `df`…);
//! - per program (`program_risk`): `git -c`/`-C`/`--git-dir`/`--work-tree`/`-p`,
//!   `git grep -O`, `git format-patch -o`, `git rebase -x`, and git subcommands that run
//!   tools (`difftool`, `mergetool`, `submodule foreach`, `bisect run`, …); `find
//!   -exec`/`-execdir`/`-ok`/`-okdir`/`-delete`/`-fprint*`/`-fls`; `sed -i` and sed
//!   scripts with `w`, `W`, `e` or an `s///w`/`s///e` flag (or a script from a file);
//!   `awk` programs that call `system`, pipe or redirect (or come from a file, or load
//!   extensions); `sort -o`; `tar` modes that write (`c`, `x`, `r`, `u`, `A`) and its
//!   `-I`/`-F`; `curl -o/-O/-D/-c/-K`; `wget` unless it writes to stdout; `tee` with a
//!   file; compilers' `-o`; `ssh`/`scp`/`sftp` `-o`/`-F`/`-E`/`-S`; `strace`/`ltrace`/`time -o`;
//!   `man -P`/`-H`; `less -o`/`-O`; `rg --pre`; shells' `-c`, `perl`/`ruby` `-e`/`-E`/`-i`,
//!   `python -c`, `node -e`/`-p`/`-r`, `php -r`; editors (`vi`, `vim`, `nvim`, `ex`, `ed`,
//!   `emacs`), which can run commands and write anything.
//!
//! It is a list, so it is incomplete by nature; the docs say what a pattern cannot see
//! (configuration files, environment, aliases, a repository's own hooks and config).

use super::shell::SimpleCommand;
use super::wrappers::{basename, is_wrapper, unwrap};

/// Long options that write files or run programs for most programs that have them.
pub const GENERIC_LONG: &[&str] = &[
    "--output",
    "--output-file",
    "--output-document",
    "--output-directory",
    "--log-file",
    "--exec",
    "--exec-path",
    "--config",
    "--config-env",
    "--upload-pack",
    "--receive-pack",
    "--ext-diff",
    "--textconv",
    "--filters",
    "--to-command",
    "--use-compress-program",
    "--compress-program",
    "--checkpoint-action",
    "--info-script",
    "--new-volume-script",
    "--rsh",
    "--rsh-command",
    "--rsync-path",
    "--pre",
    "--script",
    "--eval",
    "--pager",
    "--editor",
    "--open-files-in-pager",
    "--git-dir",
    "--work-tree",
    "--in-place",
    "--load",
    "--remote-name",
    "--remote-name-all",
    "--dump-header",
    "--cookie-jar",
    "--trace",
    "--trace-ascii",
    "--libcurl",
];

/// Real options that happen to be prefixes of [`GENERIC_LONG`] entries (an exact
/// option is never read as an abbreviation).
const EXACT_SAFE: &[&str] = &[
    "--text",
    "--filter",
    "--log",
    "--dump",
    "--cookie",
    "--checkpoint",
    "--info",
    "--compress",
];

/// Programs whose `--output`/`-o` chooses a format or columns, never a file.
pub const FORMAT_OUTPUT: &[&str] = &[
    "journalctl",
    "systemctl",
    "loginctl",
    "coredumpctl",
    "busctl",
    "kubectl",
    "oc",
    "helm",
    "aws",
    "az",
    "df",
    "lsblk",
    "findmnt",
    "lscpu",
    "lsmem",
    "lsns",
    "lslocks",
    "losetup",
    "blkid",
    "ps",
    "ip",
];

/// Why `command` (which matched an auto-approve pattern) still needs an operator, if
/// it does.
pub(crate) fn risk(command: &SimpleCommand) -> Option<String> {
    for r in command.redirects() {
        let duplication = r.op.ends_with('&')
            && (r.target == "-" || r.target.chars().all(|c| c.is_ascii_digit()));
        let harmless = matches!(
            r.target.as_str(),
            "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
        );
        if r.writes() && !duplication && !harmless {
            return Some(format!(
                "the redirection `{} {}` writes a file",
                r.op, r.target
            ));
        }
    }
    argv_risk(&command.words())
}

/// Why an argument vector (program first) that an auto-approval covers still needs an
/// operator, if it does: the one table of options that write files or run programs,
/// for every path that runs a program without an operator (an `--approve-shell`
/// command's words, an `--approve-exec` call's argv).
pub(crate) fn argv_risk(words: &[&str]) -> Option<String> {
    let unwrapped = unwrap(words);
    if !unwrapped.command_lines.is_empty() {
        return Some("a wrapper runs a command line given in an option".to_owned());
    }
    // The wrappers' own options count too (`strace -o F ls`, `time -o F ls`).
    let wrapped_at = words.len() - unwrapped.words.len();
    for (i, word) in words.iter().enumerate().take(wrapped_at) {
        if !is_wrapper(basename(word)) {
            continue;
        }
        if let Some(why) = program_risk(basename(word), &words[i + 1..]) {
            return Some(format!("{why} ({})", basename(word)));
        }
    }
    let (&program, args) = unwrapped.words.split_first()?;
    let name = basename(program);
    if !FORMAT_OUTPUT.contains(&name) {
        if let Some(option) = args
            .iter()
            .take_while(|a| **a != "--")
            .find(|a| generic_long(a))
        {
            return Some(format!(
                "`{option}` can make {name} write files or run programs"
            ));
        }
    }
    program_risk(name, args).map(|why| format!("{why} ({name})"))
}

/// Whether `arg` is one of [`GENERIC_LONG`], with or without `=VALUE`, or an
/// abbreviation of one (GNU getopt and git accept any unambiguous prefix, so even
/// `--ou=F` is `--output=F` for `sort`), unless it is itself a known option.
fn generic_long(arg: &str) -> bool {
    if !arg.starts_with("--") {
        return false;
    }
    let name = arg.split_once('=').map_or(arg, |(n, _)| n);
    if GENERIC_LONG.contains(&name) {
        return true;
    }
    name.len() >= 3
        && !EXACT_SAFE.contains(&name)
        && GENERIC_LONG.iter().any(|o| o.starts_with(name))
}

/// Whether a short-option cluster in `args` (before `--`) holds one of `letters`.
/// Values attached to earlier letters are read as letters too: a superset.
fn short(args: &[&str], letters: &str) -> Option<String> {
    args.iter()
        .take_while(|a| **a != "--")
        .filter(|a| a.len() > 1 && a.starts_with('-') && !a.starts_with("--"))
        .find_map(|a| {
            a.chars()
                .skip(1)
                .find(|c| letters.contains(*c))
                .map(|c| format!("`-{c}`"))
        })
}

fn any_word<'w>(args: &[&'w str], words: &[&str]) -> Option<&'w str> {
    args.iter().copied().find(|a| {
        words.contains(a)
            || words
                .iter()
                .any(|w| a.strip_prefix(w).is_some_and(|r| r.starts_with('=')))
    })
}

/// The per-program part of the table.
fn program_risk(name: &str, args: &[&str]) -> Option<String> {
    let writes = |what: String| Some(format!("{what} can make it write files or run programs"));
    match name {
        "git" => git_risk(args),
        "find" => any_word(
            args,
            &[
                "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                "-fls",
            ],
        )
        .and_then(|w| writes(format!("`{w}`"))),
        "sed" | "gsed" => sed_risk(args),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => awk_risk(args),
        "sort" => short(args, "o").and_then(writes),
        "tar" | "bsdtar" | "gtar" => tar_risk(args),
        "curl" => short(args, "oODcK").and_then(writes),
        "wget" => {
            let to_stdout = args.windows(2).any(|w| w == ["-O", "-"])
                || args
                    .iter()
                    .any(|a| !a.starts_with("--") && a.starts_with('-') && a.ends_with("O-"))
                || args.contains(&"--spider");
            (!to_stdout).then(|| "it saves what it downloads".to_owned())
        }
        "tee" => args
            .iter()
            .find(|a| !a.starts_with('-') && **a != "/dev/null")
            .map(|f| format!("it writes `{f}`")),
        "gcc" | "g++" | "cc" | "c++" | "clang" | "clang++" | "ld" | "tree" | "pandoc" | "gpg" => {
            short(args, "o").and_then(writes)
        }
        "ssh" => short(args, "oFES").and_then(writes),
        "scp" | "sftp" => short(args, "oFS").and_then(writes),
        "strace" | "ltrace" | "time" => short(args, "o").and_then(writes),
        "man" => short(args, "PH").and_then(writes),
        "less" => short(args, "oO").and_then(writes),
        "openssl" => any_word(args, &["-out", "-engine"]).and_then(|w| writes(format!("`{w}`"))),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "yash" | "fish" => {
            short(args, "c").and_then(writes)
        }
        "perl" => short(args, "eEi").and_then(writes),
        "ruby" => short(args, "ei").and_then(writes),
        n if n.starts_with("python") => short(args, "c").and_then(writes),
        "node" | "nodejs" | "deno" | "bun" => short(args, "epr").and_then(writes),
        "php" => short(args, "r").and_then(writes),
        "vi" | "vim" | "nvim" | "view" | "ex" | "ed" | "emacs" | "nano" => {
            Some("an editor can write any file and run commands".to_owned())
        }
        _ => None,
    }
}

/// Git subcommands that run external tools whatever their options.
const GIT_TOOL_SUBCOMMANDS: &[&str] = &[
    "difftool",
    "mergetool",
    "filter-branch",
    "filter-repo",
    "instaweb",
    "daemon",
    "hook",
    "web--browse",
    "credential",
    "config",
];

/// Whether `git config ARGS` only reads: it starts with a read action (`--get`,
/// `--get-all`, `--get-regexp`, `--list`, `-l`, `get`, `list`) and names no action
/// that writes or opens an editor.
fn config_reads_only(args: &[&str]) -> bool {
    const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--list",
        "-l",
        "get",
        "list",
    ];
    const WRITES: &[&str] = &[
        "--add",
        "--unset",
        "--unset-all",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "--edit",
        "-e",
        "set",
        "unset",
        "edit",
        "rename-section",
        "remove-section",
    ];
    args.first().is_some_and(|a| READS.contains(a)) && !args.iter().any(|a| WRITES.contains(a))
}

fn git_risk(args: &[&str]) -> Option<String> {
    // Global options, before the subcommand.
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if !arg.starts_with('-') {
            break;
        }
        let name = arg.split_once('=').map_or(*arg, |(n, _)| n);
        if matches!(
            name,
            "-c" | "-C"
                | "-p"
                | "--paginate"
                | "--git-dir"
                | "--work-tree"
                | "--exec-path"
                | "--config-env"
                | "--namespace"
                | "--super-prefix"
                | "--attr-source"
        ) {
            return Some(format!("`{name}` changes what git reads or runs"));
        }
        i += 1;
    }
    let sub = args.get(i).copied()?;
    let rest = args.get(i + 1..).unwrap_or(&[]);
    if GIT_TOOL_SUBCOMMANDS.contains(&sub) && !(sub == "config" && config_reads_only(rest)) {
        return Some(format!(
            "`git {sub}` writes configuration or runs external tools"
        ));
    }
    let runs = match sub {
        "grep" => short(rest, "O"),
        "format-patch" => short(rest, "o"),
        "rebase" => short(rest, "x"),
        "bisect" => rest
            .first()
            .filter(|a| **a == "run")
            .map(|_| "`bisect run`".to_owned()),
        "submodule" => rest
            .iter()
            .find(|a| **a == "foreach")
            .map(|_| "`submodule foreach`".to_owned()),
        _ => None,
    };
    runs.map(|what| format!("{what} can make git write files or run programs"))
}

fn tar_risk(args: &[&str]) -> Option<String> {
    const WRITE_LONG: &[&str] = &[
        "--create",
        "--extract",
        "--get",
        "--append",
        "--update",
        "--concatenate",
        "--catenate",
        "--delete",
    ];
    if let Some(w) = any_word(args, WRITE_LONG) {
        return Some(format!("`{w}` writes files"));
    }
    // Old-style `tar xzf F` puts the mode letters in the first word, without a dash.
    let first_modes = args
        .first()
        .filter(|a| !a.starts_with('-'))
        .is_some_and(|a| a.chars().any(|c| "cxruA".contains(c)));
    if first_modes {
        return Some("its mode writes files".to_owned());
    }
    short(args, "cxruAIF").map(|o| format!("{o} writes files or runs a program"))
}

fn awk_risk(args: &[&str]) -> Option<String> {
    if let Some(o) = short(args, "fileE") {
        return Some(format!(
            "{o} runs a program file, loads an extension or an include"
        ));
    }
    if let Some(w) = any_word(
        args,
        &["--file", "--include", "--load", "--source", "--exec"],
    ) {
        return Some(format!("`{w}` runs a program file or loads code"));
    }
    // The program text: the first operand (after `-v x=y`, `-F sep` pairs).
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match *a {
            "-v" | "-F" => i += 2,
            "--" => {
                i += 1;
                break;
            }
            a if a.starts_with('-') && a.len() > 1 => i += 1,
            _ => break,
        }
    }
    let program = args.get(i)?;
    let dangerous = program.contains("system")
        || program.contains('|')
        || program.contains('>')
        || program.contains("getline")
        || program.contains("close(");
    dangerous.then(|| "the awk program can run commands or write files".to_owned())
}

fn sed_risk(args: &[&str]) -> Option<String> {
    let mut scripts: Vec<&str> = Vec::new();
    let mut explicit = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if *arg == "--" {
            break;
        }
        if arg.starts_with("--in-place") || *arg == "--file" || arg.starts_with("--file=") {
            return Some(format!(
                "`{arg}` edits files in place or reads the script from a file"
            ));
        }
        if let Some(value) = arg.strip_prefix("--expression=") {
            scripts.push(value);
            explicit = true;
        } else if *arg == "--expression" {
            scripts.extend(args.get(i + 1).copied());
            explicit = true;
            i += 1;
        } else if arg.len() > 1 && arg.starts_with('-') && !arg.starts_with("--") {
            // A cluster: `-n`, `-i.bak`, `-e SCRIPT`, `-eSCRIPT`, `-f FILE`, `-l N`.
            for (p, c) in arg.char_indices().skip(1) {
                match c {
                    'i' => return Some("`-i` edits files in place".to_owned()),
                    'f' => return Some("`-f` reads the script from a file".to_owned()),
                    'e' => {
                        explicit = true;
                        let attached = &arg[p + 1..];
                        if attached.is_empty() {
                            scripts.extend(args.get(i + 1).copied());
                            i += 1;
                        } else {
                            scripts.push(attached);
                        }
                        break;
                    }
                    'l' => {
                        if arg[p + 1..].is_empty() {
                            i += 1;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        } else if !explicit && scripts.is_empty() && !arg.starts_with('-') {
            scripts.push(arg);
        }
        i += 1;
    }
    scripts
        .iter()
        .any(|s| sed_script_writes_or_runs(s))
        .then(|| {
            "the sed script writes a file (`w`, `W`, `s///w`) or runs a command (`e`, `s///e`)"
                .to_owned()
        })
}

/// Whether a sed script has a `w`, `W` or `e` command, or an `s` command with the `w`
/// or `e` flag. Addresses, `s`/`y` bodies, labels, text and file names are skipped.
fn sed_script_writes_or_runs(script: &str) -> bool {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    // Skips a delimited field starting after the delimiter; returns the index after
    // the closing delimiter.
    let field = |mut j: usize, delim: char| -> usize {
        while j < c.len() && c[j] != delim {
            if c[j] == '\\' {
                j += 1;
            }
            j += 1;
        }
        j + 1
    };
    let to_line_end = |j: usize| {
        c[j..]
            .iter()
            .position(|&x| x == '\n')
            .map_or(c.len(), |p| j + p)
    };
    let to_command_end = |j: usize| {
        c[j..]
            .iter()
            .position(|&x| x == '\n' || x == ';' || x == '}')
            .map_or(c.len(), |p| j + p)
    };
    while i < c.len() {
        let ch = c[i];
        match ch {
            ' ' | '\t' | '\n' | ';' | '{' | '}' | '!' | ',' | '$' | '+' | '~' => i += 1,
            '0'..='9' => i += 1,
            '/' => i = field(i + 1, '/'),
            '\\' => match c.get(i + 1) {
                Some(&d) => i = field(i + 2, d),
                None => i += 1,
            },
            '#' => i = to_line_end(i),
            'w' | 'W' | 'e' => return true,
            's' | 'y' => {
                let Some(&d) = c.get(i + 1) else { return false };
                let after = field(field(i + 2, d), d);
                let end = to_command_end(after.min(c.len()));
                if ch == 's'
                    && c[after.min(c.len())..end]
                        .iter()
                        .any(|&f| f == 'w' || f == 'e')
                {
                    return true;
                }
                i = end;
            }
            'a' | 'i' | 'c' | 'r' | 'R' => i = to_line_end(i),
            'b' | 't' | 'T' | ':' | 'l' | 'q' | 'Q' | 'L' => i = to_command_end(i + 1),
            _ => i += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guards::shell::lex;

    fn risk_of(line: &str) -> Option<String> {
        let script = lex(line);
        script.commands.iter().find_map(risk)
    }

    /// Commands an operator must see even when a pattern matches them.
    const RISKY: &[&str] = &[
        // git: the issue's example and its cousins.
        "git diff --output=/tmp/x",
        "git diff --output /tmp/x",
        "git diff --outp=/tmp/x",
        "git log -p --output=/home/u/.bashrc",
        "git diff --ext-diff",
        "git log --textconv -p",
        "git -c core.fsmonitor=touch status",
        "git -c alias.x=!sh x",
        "git -C /tmp/evil status",
        "git --git-dir=/tmp/evil/.git status",
        "git --work-tree=/ status",
        "git --exec-path=/tmp/bin status",
        "git --config-env=core.pager=X log",
        "git -p log",
        "git fetch --upload-pack='touch x' origin",
        "git push --receive-pack=x origin",
        "git archive --remote=x --exec=y HEAD",
        "git grep -O foo",
        "git grep --open-files-in-pager=vim foo",
        "git format-patch -o /tmp/out HEAD~1",
        "git rebase -x 'make test' HEAD~3",
        "git rebase --exec 'make' HEAD~3",
        "git difftool HEAD",
        "git submodule foreach 'rm -rf x'",
        "git bisect run ./t.sh",
        "git config core.fsmonitor x",
        "git config --get core.hooksPath --add core.x y",
        "git config set core.pager sh",
        "git cat-file --filters HEAD:a",
        // find.
        "find . -exec rm {} ;",
        "find . -execdir sh -c x ;",
        "find . -ok rm {} ;",
        "find . -delete",
        "find . -fprint /tmp/list",
        "find . -fprintf /tmp/list %p",
        "find . -fls /tmp/list",
        // sed.
        "sed -i s/a/b/ f",
        "sed -i.bak s/a/b/ f",
        "sed -ni p f",
        "sed --in-place s/a/b/ f",
        "sed -f script.sed f",
        "sed 'w /tmp/out' f",
        "sed -n '/x/w /tmp/out' f",
        "sed 's/a/b/w /tmp/out' f",
        "sed 's/a/b/e' f",
        "sed -e p -e 'e id' f",
        "sed '1e touch x' f",
        "sed 'W /tmp/o' f",
        // awk.
        "awk 'BEGIN{system(\"id\")}'",
        "awk '{print > \"/tmp/o\"}' f",
        "awk '{print | \"sh\"}' f",
        "awk -f prog.awk f",
        "gawk -l ext '{print}'",
        "gawk -i inc.awk '{print}'",
        // Others.
        "sort -o /tmp/out f",
        "sort -uo /tmp/out f",
        "sort --output=/tmp/out f",
        "sort --out=/tmp/out f",
        "sort --ou=/tmp/out f",
        "sort --o /tmp/out f",
        "tar -xf a.tar",
        "tar xzf a.tgz",
        "tar -cf a.tar .",
        "tar --to-command='sh' -xf a.tar",
        "tar -tf a.tar --use-compress-program=./x",
        "tar -I ./x -tf a.tar",
        "tar -tf a.tar --checkpoint=1 --checkpoint-action=exec=id",
        "curl -o /tmp/x http://127.0.0.1/",
        "curl -O http://127.0.0.1/x",
        "curl -K cfg http://127.0.0.1/",
        "curl --config cfg http://127.0.0.1/",
        "wget http://127.0.0.1/x",
        "wget -O /tmp/x http://127.0.0.1/x",
        "tee /tmp/x",
        "tee -a ~/.bashrc",
        "gcc -o /tmp/x x.c",
        "ssh -o ProxyCommand=x host",
        "ssh -F cfg host",
        "scp -S ./prog a b",
        "strace -o /tmp/x ls",
        "man -P 'sh -c id' ls",
        "less -o /tmp/log f",
        "rg --pre ./x foo",
        "openssl enc -out /tmp/x",
        "bash -c 'id'",
        "sh -c id",
        "python3 -c 'import os'",
        "perl -e 'system 1'",
        "perl -pi -e s/a/b/ f",
        "ruby -e x",
        "node -e x",
        "php -r x",
        "vim -es -c '!id' f",
        "ed f",
        "ls --config=x",
        // Wrappers: their command lines, and what they wrap.
        "flock /tmp/l -c 'id'",
        "env -S 'id'",
        "watch id",
        "sudo git diff --output=/etc/x",
        "nice sort -o /tmp/x f",
        // Redirections.
        "echo x > /tmp/f",
        "echo x >> ~/.bashrc",
        "ls &> out.txt",
        "ls >| out.txt",
        "cat 3<> f",
        "git log > /tmp/log",
    ];

    /// Commands a matching pattern still approves on its own.
    const PLAIN: &[&str] = &[
        "git status",
        "git status --short",
        "git log --oneline -n 5",
        "git log -p",
        "git log --pretty=format:%h --stat",
        "git diff",
        "git diff --stat HEAD~1",
        "git diff --text a b",
        "git diff --no-ext-diff",
        "git diff --no-textconv",
        "git show HEAD",
        "git grep -n foo",
        "git rev-list --filter=blob:none HEAD",
        "git branch -a",
        "find . -name '*.rs'",
        "find /tmp -type f -print",
        "sed -n 1,10p f",
        "sed 's/a/b/g' f",
        "sed -e 's/a/b/' -e 's/c/d/g' f",
        "sed -E 's/(x)+/y/2' f",
        "sed -n '/start/,/end/p' f",
        "sed 's/foo/bar/gI' f",
        "sed '/^#/d' f",
        "sed 'y/abc/xyz/' f",
        "sed '$!N;s/\\n/ /' f",
        "awk '{print $1}' f",
        "awk -F: '{print $1}' /etc/passwd",
        "awk -v x=1 'NR==x' f",
        "sort -u f",
        "sort -n -k2 f",
        "git config --get core.hooksPath",
        "git config --list",
        "tar -tzf a.tgz",
        "tar tf a.tar",
        "curl -s http://127.0.0.1/",
        "curl -sS -H 'Accept: x' http://127.0.0.1/",
        "wget -O - http://127.0.0.1/",
        "wget -qO- http://127.0.0.1/",
        "tee /dev/null",
        "ls -la",
        "ls -o",
        "grep -o foo f",
        "grep -c foo f",
        "grep --text foo f",
        "grep -r --include='*.rs' foo .",
        "ps -o pid,cmd",
        "journalctl -o json -n 10",
        "journalctl --output=short -u x",
        "kubectl get pods -o json",
        "df --output=source,target",
        "lsblk --output NAME,SIZE",
        "ssh host uptime",
        "python3 script.py",
        "echo x > /dev/null",
        "ls 2>&1",
        "ls 2>/dev/null",
        "ls >&2",
        "cat < f",
        "rg foo",
        "cat -- --output",
        "command -v vim",
        "sfdisk --dump /dev/sda",
        "curl --cookie a=b http://127.0.0.1/",
        "git log --",
    ];

    #[test]
    fn write_and_exec_options_need_an_operator() {
        for line in RISKY {
            assert!(risk_of(line).is_some(), "{line:?} should need an operator");
        }
    }

    #[test]
    fn ordinary_reads_do_not() {
        for line in PLAIN {
            assert_eq!(risk_of(line), None, "{line:?}");
        }
    }

    #[test]
    fn exec_argv_is_judged_by_the_same_table() {
        assert!(argv_risk(&["git", "log", "--output=/tmp/x"]).is_some());
        assert!(argv_risk(&["/usr/bin/git", "log", "--ou=/tmp/x"]).is_some());
        assert!(argv_risk(&["find", ".", "-exec", "sh", "{}", ";"]).is_some());
        assert!(argv_risk(&["git", "log", "-1"]).is_none());
        assert!(argv_risk(&["/usr/bin/git", "config", "--get", "core.hooksPath"]).is_none());
    }

    #[test]
    fn the_reason_names_the_option() {
        let why = risk_of("git diff --output=/tmp/x").unwrap();
        assert!(
            why.contains("--output=/tmp/x") && why.contains("git"),
            "{why}"
        );
        let why = risk_of("echo x > /tmp/f").unwrap();
        assert!(why.contains("/tmp/f"), "{why}");
    }
}
