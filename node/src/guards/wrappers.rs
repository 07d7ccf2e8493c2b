//! Programs that run another command (`sudo`, `env`, `chroot`, `flock`, `script -c`,
//! …): where, in their arguments, the command they run starts.
//!
//! The blocklist judges the program that actually runs, so `sudo rm -rf /`,
//! `chroot / rm -rf /` and `nsenter -t 1 -m rm -rf /` must all be seen as `rm -rf /`.
//! Each wrapper is described by which of its options take a value (so the value is not
//! taken for the command), how many operands precede the command (`timeout DURATION`,
//! `chroot NEWROOT`, `taskset MASK`), and which options carry a whole command line for
//! a shell (`flock -c`, `script -c`, `runuser -c`, `env -S`). [`unwrap`] peels any
//! number of them off the front of a simple command and returns what runs: the
//! remaining words, plus the command lines found in options, which the caller checks
//! like any nested command line.
//!
//! Like the rest of the blocklist this reads options statically; a wrapper not listed
//! here (or an option spelling its parser does not know) hides the command behind it.

/// How the command a wrapper runs is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// After the options and `operands` operands come the command's words.
    Words { operands: usize },
    /// After the options and `operands` operands, the words joined with spaces are
    /// one command line for a shell (`watch CMD…`, `sg GROUP CMD`).
    Joined { operands: usize },
    /// Only the command-line options run anything (`script [FILE]`).
    Nothing,
}

/// One wrapper program.
struct Wrapper {
    name: &'static str,
    /// Short options that take a value (`-u root` or `-uroot`).
    short: &'static str,
    /// Long options that take the next word as their value (`--user root`).
    long: &'static [&'static str],
    runs: Runs,
    /// Options whose value is a command line run by a shell (`-c CMD`, `--command CMD`,
    /// `--command=CMD`, `-cCMD`), looked for anywhere in the arguments.
    command_options: &'static [&'static str],
    /// Options whose value is split into the words of the command, followed by the
    /// operands (`env -S 'rm -rf' /`); only where options are parsed.
    split_string: &'static [&'static str],
    /// Options that mean no command runs at all (`command -v`, `chrt -p`).
    no_command: &'static [&'static str],
}

const fn words(name: &'static str, short: &'static str, long: &'static [&'static str]) -> Wrapper {
    Wrapper {
        name,
        short,
        long,
        runs: Runs::Words { operands: 0 },
        command_options: &[],
        split_string: &[],
        no_command: &[],
    }
}

impl Wrapper {
    const fn operands(mut self, n: usize) -> Wrapper {
        self.runs = match self.runs {
            Runs::Joined { .. } => Runs::Joined { operands: n },
            _ => Runs::Words { operands: n },
        };
        self
    }
    const fn joined(mut self) -> Wrapper {
        self.runs = Runs::Joined { operands: 0 };
        self
    }
    const fn nothing(mut self) -> Wrapper {
        self.runs = Runs::Nothing;
        self
    }
    const fn command_options(mut self, options: &'static [&'static str]) -> Wrapper {
        self.command_options = options;
        self
    }
    const fn split_string(mut self, options: &'static [&'static str]) -> Wrapper {
        self.split_string = options;
        self
    }
    const fn no_command(mut self, options: &'static [&'static str]) -> Wrapper {
        self.no_command = options;
        self
    }
}

const SUDO_LONG: &[&str] = &[
    "--user",
    "--group",
    "--host",
    "--prompt",
    "--close-from",
    "--chdir",
    "--role",
    "--type",
    "--other-user",
    "--command-timeout",
];
const XARGS_LONG: &[&str] = &[
    "--delimiter",
    "--eof",
    "--replace",
    "--max-lines",
    "--max-args",
    "--max-procs",
    "--max-chars",
    "--arg-file",
    "--process-slot-var",
];
const UNSHARE_LONG: &[&str] = &[
    "--propagation",
    "--setgroups",
    "--root",
    "--wd",
    "--setuid",
    "--setgid",
    "--map-user",
    "--map-group",
    "--map-users",
    "--map-groups",
];
const SETPRIV_LONG: &[&str] = &[
    "--reuid",
    "--regid",
    "--ruid",
    "--euid",
    "--rgid",
    "--egid",
    "--groups",
    "--inh-caps",
    "--ambient-caps",
    "--bounding-set",
    "--securebits",
    "--pdeathsig",
    "--selinux-label",
    "--apparmor-profile",
    "--landlock-access",
    "--landlock-rule",
];
const STRACE_LONG: &[&str] = &["--output", "--trace", "--signal", "--attach", "--user"];

/// The wrappers the blocklist sees through.
const WRAPPERS: &[Wrapper] = &[
    words("sudo", "ughpCDrtUT", SUDO_LONG),
    words("doas", "uC", &[]),
    words("run0", "uMD", &["--user", "--machine", "--chdir"]),
    words("pkexec", "", &["--user"]),
    // `env -S STRING ARGS…` splits STRING into words and runs them followed by ARGS.
    words("env", "uC", &["--unset", "--chdir"]).split_string(&["-S", "--split-string"]),
    words("nice", "n", &["--adjustment"]),
    words("ionice", "cnp", &["--class", "--classdata", "--pid"]),
    words("nohup", "", &[]),
    words("setsid", "", &[]),
    words("builtin", "", &[]),
    words("command", "", &[]).no_command(&["-v", "-V"]),
    words("exec", "a", &[]),
    words("time", "fo", &["--format", "--output"]),
    words("timeout", "sk", &["--signal", "--kill-after"]).operands(1),
    words("stdbuf", "ioe", &["--input", "--output", "--error"]),
    words("xargs", "IdEeLlnPsa", XARGS_LONG),
    words("busybox", "", &[]),
    words("unbuffer", "", &[]),
    words("chroot", "", &["--userspec", "--groups"]).operands(1),
    words("nsenter", "tSG", &["--target", "--setuid", "--setgid"]),
    words("unshare", "RwSG", UNSHARE_LONG),
    words("setpriv", "", SETPRIV_LONG),
    // `flock [OPTS] FILE CMD…` or `flock [OPTS] FILE -c CMDLINE`.
    words(
        "flock",
        "wE",
        &["--timeout", "--wait", "--conflict-exit-code"],
    )
    .operands(1)
    .command_options(&["-c", "--command"]),
    // `script [OPTS] [FILE]`: only `-c CMDLINE` runs something.
    words(
        "script",
        "EIOBTm",
        &[
            "--echo",
            "--log-in",
            "--log-out",
            "--log-io",
            "--log-timing",
            "--logging-format",
        ],
    )
    .nothing()
    .command_options(&["-c", "--command"]),
    words(
        "runuser",
        "ugGsw",
        &["--user", "--group", "--supp-group", "--shell"],
    )
    .command_options(&["-c", "--command", "--session-command"]),
    // `sg GROUP CMDLINE` or `sg GROUP -c CMDLINE`.
    words("sg", "", &[])
        .joined()
        .operands(1)
        .command_options(&["-c"]),
    words(
        "chrt",
        "TPD",
        &["--sched-runtime", "--sched-period", "--sched-deadline"],
    )
    .operands(1)
    .no_command(&["-p", "--pid"]),
    words("taskset", "", &[])
        .operands(1)
        .no_command(&["-p", "--pid"]),
    words("watch", "n", &["--interval"]).joined(),
    words("fakeroot", "lisb", &["--lib", "--faked"]),
    words("strace", "abeEIoOpPsSuXU", STRACE_LONG),
];

/// Shell keywords that may precede a command in a simple command as the lexer sees it.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "time",
];

/// What a simple command runs once its wrappers are peeled off.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Unwrapped<'a, 'w> {
    /// The words of the program that runs (program first); empty if none runs.
    pub words: &'a [&'w str],
    /// Command lines the wrappers run through a shell (`flock -c`, `env -S`, …).
    pub command_lines: Vec<String>,
}

/// Drops keywords, `VAR=value` assignments and wrappers (with their options) from the
/// front of `words`, leaving the program that actually runs first, and collects the
/// command lines wrappers take in options.
pub(crate) fn unwrap<'a, 'w>(mut words: &'a [&'w str]) -> Unwrapped<'a, 'w> {
    let mut command_lines = Vec::new();
    loop {
        let Some((&first, rest)) = words.split_first() else {
            return Unwrapped {
                words,
                command_lines,
            };
        };
        if KEYWORDS.contains(&first) || is_assignment(first) {
            words = rest;
            continue;
        }
        let name = basename(first);
        let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == name) else {
            return Unwrapped {
                words,
                command_lines,
            };
        };
        match peel(wrapper, rest, &mut command_lines) {
            Some(next) => words = next,
            None => {
                return Unwrapped {
                    words: &[],
                    command_lines,
                }
            }
        }
    }
}

/// The words after `wrapper`'s options and operands (`None`: nothing runs as plain
/// words; command lines found go to `command_lines`).
fn peel<'a, 'w>(
    wrapper: &Wrapper,
    args: &'a [&'w str],
    command_lines: &mut Vec<String>,
) -> Option<&'a [&'w str]> {
    // Command-line options first, wherever they are: getopt permutes, and `flock FILE
    // -c CMD` puts it after an operand.
    if let Some(line) = command_option_value(args, wrapper.command_options) {
        command_lines.push(line.to_owned());
        return None;
    }
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if *arg == "--" {
            i += 1;
            break;
        }
        if wrapper.no_command.contains(arg) {
            return None;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let option = format!("--{name}");
            if wrapper.split_string.contains(&option.as_str()) {
                let value = inline.or_else(|| args.get(i + 1).copied()).unwrap_or("");
                let after = if inline.is_some() { i + 1 } else { i + 2 };
                command_lines.push(split_string_line(value, args.get(after..)));
                return None;
            }
            i += if inline.is_none() && wrapper.long.contains(&option.as_str()) {
                2
            } else {
                1
            };
        } else if arg.len() > 1 && arg.starts_with('-') {
            // A cluster of short options; a value-taking letter takes the rest of the
            // word or, at the end of it, the next word.
            let letters: Vec<char> = arg.chars().skip(1).collect();
            let mut step = 1;
            for (p, c) in letters.iter().enumerate() {
                let option = format!("-{c}");
                if wrapper.no_command.contains(&option.as_str()) {
                    return None;
                }
                let at_end = p + 1 == letters.len();
                if wrapper.split_string.contains(&option.as_str()) {
                    let attached: String = letters[p + 1..].iter().collect();
                    let (value, after) = if at_end {
                        (args.get(i + 1).copied().unwrap_or("").to_owned(), i + 2)
                    } else {
                        (attached, i + 1)
                    };
                    command_lines.push(split_string_line(&value, args.get(after..)));
                    return None;
                }
                if wrapper.short.contains(*c) {
                    if at_end {
                        step = 2;
                    }
                    break;
                }
            }
            i += step;
        } else {
            break;
        }
    }
    let rest = args.get(i..).unwrap_or(&[]);
    match wrapper.runs {
        Runs::Words { operands } => Some(rest.get(operands..).unwrap_or(&[])),
        Runs::Joined { operands } => {
            let rest = rest.get(operands..).unwrap_or(&[]);
            if !rest.is_empty() {
                command_lines.push(rest.join(" "));
            }
            None
        }
        Runs::Nothing => None,
    }
}

/// Whether `name` (a base name) is one of the wrappers [`unwrap`] sees through.
pub(crate) fn is_wrapper(name: &str) -> bool {
    WRAPPERS.iter().any(|w| w.name == name)
}

/// `env -S STRING ARGS…`: STRING split into words, then ARGS.
fn split_string_line(value: &str, rest: Option<&[&str]>) -> String {
    let mut line = value.to_owned();
    for word in rest.unwrap_or(&[]) {
        line.push(' ');
        line.push_str(word);
    }
    line
}

/// The value of the first of `options` in `args`: `-c CMD`, `-cCMD`, `--command CMD`,
/// `--command=CMD`.
fn command_option_value<'w>(args: &[&'w str], options: &[&str]) -> Option<&'w str> {
    for (i, arg) in args.iter().enumerate() {
        for option in options {
            if arg == option {
                return Some(args.get(i + 1).copied().unwrap_or(""));
            }
            let Some(rest) = arg.strip_prefix(option) else {
                continue;
            };
            if option.starts_with("--") {
                if let Some(value) = rest.strip_prefix('=') {
                    return Some(value);
                }
            } else if !rest.is_empty() {
                return Some(rest);
            }
        }
    }
    None
}

pub(crate) fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// `/sbin/reboot` is `reboot`.
pub(crate) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> (Vec<String>, Vec<String>) {
        let words: Vec<&str> = line.split(' ').collect();
        let u = unwrap(&words);
        (
            u.words.iter().map(|w| w.to_string()).collect(),
            u.command_lines,
        )
    }

    #[test]
    fn wrappers_are_peeled_to_the_program_that_runs() {
        for (line, program) in [
            ("sudo -u root rm x", "rm"),
            ("chroot / rm x", "rm"),
            ("chroot --userspec=1:1 /srv/root rm x", "rm"),
            ("nsenter -t 1 -m -u -i -n -p rm x", "rm"),
            ("nsenter --target 1 --mount rm x", "rm"),
            ("unshare -r -m rm x", "rm"),
            ("unshare --map-root-user --root / rm x", "rm"),
            ("setpriv --reuid 0 --regid 0 --init-groups rm x", "rm"),
            ("setpriv --reuid=0 rm x", "rm"),
            ("flock /tmp/lock rm x", "rm"),
            ("flock -w 5 /tmp/lock rm x", "rm"),
            ("chrt -f 10 rm x", "rm"),
            ("taskset -c 0 rm x", "rm"),
            ("runuser -u root -- rm x", "rm"),
            ("fakeroot rm x", "rm"),
            ("strace -f -o log rm x", "rm"),
            ("timeout 5 chroot / env A=1 nice rm x", "rm"),
            ("FOO=1 BAR=2 rm x", "rm"),
        ] {
            let (words, lines) = run(line);
            assert_eq!(words.first().map(String::as_str), Some(program), "{line}");
            assert!(lines.is_empty(), "{line}: {lines:?}");
        }
    }

    #[test]
    fn command_lines_in_options_are_collected() {
        for (line, expected) in [
            ("flock /tmp/l -c CMD", "CMD"),
            ("flock -c CMD /tmp/l", "CMD"),
            ("script -q -c CMD /dev/null", "CMD"),
            ("script --command=CMD", "CMD"),
            ("script -cCMD", "CMD"),
            ("runuser root -c CMD", "CMD"),
            ("sg wheel -c CMD", "CMD"),
            ("sg wheel CMD", "CMD"),
            ("watch -n 1 CMD ARG", "CMD ARG"),
            ("env -S CMD ARG", "CMD ARG"),
            ("env -SCMD ARG", "CMD ARG"),
            ("env --split-string=CMD ARG", "CMD ARG"),
            ("env -i --split-string CMD", "CMD"),
        ] {
            let (words, lines) = run(line);
            assert!(words.is_empty(), "{line}: {words:?}");
            assert_eq!(lines, [expected], "{line}");
        }
    }

    #[test]
    fn lookups_run_nothing() {
        for line in [
            "command -v reboot",
            "chrt -p 1",
            "taskset -p 3 1",
            "script log",
        ] {
            let (words, lines) = run(line);
            assert!(words.is_empty() && lines.is_empty(), "{line}");
        }
    }
}
