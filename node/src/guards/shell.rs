//! A small, forgiving shell lexer: just enough of POSIX `sh` / bash syntax to find the
//! simple commands in a command line, with their words and redirections.
//!
//! Both guards need the same view of a command: the blocklist asks "does any simple
//! command in here run `rm -rf /`?", the approve-shell matcher asks "does every simple
//! command in here match an auto-approve pattern?". Matching regexes against the raw
//! text cannot answer either: `r\m -rf /`, `"rm" -rf /` and `'rm' -rf /` all run `rm`,
//! `echo ok; reboot` hides a second command behind an innocent first one, and
//! `echo "a; reboot"` is one harmless `echo`. So the text is split the way a shell would
//! split it:
//!
//! - quotes (`'…'`, `"…"`, `$'…'`) and backslashes are removed from words, so a word is
//!   what the program would receive;
//! - `;`, `&`, `&&`, `|`, `||`, `|&`, newlines, `(` and `)` end a simple command;
//! - redirections (`>`, `>>`, `2>`, `&>`, `<>`, `>&`, `<<`, `<<<`, …) are kept apart
//!   from the words, with their target;
//! - the bodies of `$(…)`, backticks, `<(…)` / `>(…)` (also inside double quotes,
//!   `${…}`, `$((…))` and unquoted here-documents, where the shell runs them too) are
//!   returned as nested command lines, for the caller to analyse the same way;
//! - comments and the bodies of here-documents are dropped (they are data).
//!
//! It never fails: unbalanced quotes or parentheses just run to the end of the text.
//! It does not expand variables, aliases, globs or functions; nothing static can. That
//! is one of the reasons the guards are a seat belt, not a sandbox.

/// One redirection of a simple command, e.g. `2>` `err.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// The operator as written, with its file-descriptor prefix (`>`, `2>>`, `&>`, `<`).
    pub op: String,
    /// The target word, quotes removed (empty if the line ended first).
    pub target: String,
}

impl Redirect {
    /// Whether this redirection opens its target for writing.
    pub fn writes(&self) -> bool {
        let op = self.op.trim_start_matches(|c: char| c.is_ascii_digit());
        op.starts_with('>') || op.starts_with("&>") || op == "<>"
    }
}

/// A part of a simple command, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    Word(String),
    Redirect(Redirect),
}

/// One simple command: `sudo rm -rf build 2>/dev/null`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    pub tokens: Vec<Token>,
    /// What the command reads on stdin from here-documents and here-strings (only
    /// matters when the command is itself a shell: `bash <<EOF`).
    pub stdin_texts: Vec<String>,
}

impl SimpleCommand {
    /// The words (program name first), without redirections.
    pub fn words(&self) -> Vec<&str> {
        self.tokens
            .iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.as_str()),
                Token::Redirect(_) => None,
            })
            .collect()
    }

    /// The redirections.
    pub fn redirects(&self) -> impl Iterator<Item = &Redirect> {
        self.tokens.iter().filter_map(|t| match t {
            Token::Redirect(r) => Some(r),
            Token::Word(_) => None,
        })
    }

    /// The normalised text: words and redirections separated by single spaces, quotes
    /// and escapes removed. A redirection is written `OP TARGET` (`> out.txt`,
    /// `2> err.log`), except a descriptor duplication, which stays joined (`2>&1`).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for token in &self.tokens {
            if !out.is_empty() {
                out.push(' ');
            }
            match token {
                Token::Word(w) => out.push_str(w),
                Token::Redirect(r) => {
                    out.push_str(&r.op);
                    if !r.op.ends_with('&') && !r.target.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(&r.target);
                }
            }
        }
        out
    }
}

/// A lexed command line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Script {
    pub commands: Vec<SimpleCommand>,
    /// Command lines nested in this one (`$(…)`, backticks, process substitutions),
    /// to be lexed and analysed in their turn.
    pub nested: Vec<String>,
}

/// Splits `text` into simple commands and nested command lines.
pub(crate) fn lex(text: &str) -> Script {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        pos: 0,
        script: Script::default(),
        current: SimpleCommand::default(),
        word: String::new(),
        in_word: false,
        pending_redirect: None,
        heredocs: Vec::new(),
    };
    lexer.run();
    lexer.script
}

/// A here-document waiting for the end of its line.
struct PendingHeredoc {
    delimiter: String,
    strip_tabs: bool,
    /// Unquoted delimiter: the body is expanded, so substitutions in it run.
    expands: bool,
    /// Index in `script.commands` the command will have once finished.
    command: usize,
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    script: Script,
    current: SimpleCommand,
    word: String,
    /// Whether a word has started (so `""` is an empty word, not nothing).
    in_word: bool,
    /// A redirection operator whose target is the next word.
    pending_redirect: Option<String>,
    heredocs: Vec<PendingHeredoc>,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' => {
                    self.finish_word();
                    self.pos += 1;
                }
                '\n' => {
                    self.finish_command();
                    self.pos += 1;
                    self.read_heredoc_bodies();
                }
                ';' | '(' | ')' => {
                    self.finish_command();
                    self.pos += 1;
                }
                '|' => {
                    self.finish_command();
                    self.pos += 1;
                    if matches!(self.peek(0), Some('|') | Some('&')) {
                        self.pos += 1;
                    }
                }
                '&' => {
                    if self.peek(1) == Some('>') {
                        // `&>` / `&>>`: stdout and stderr to a file.
                        self.finish_word();
                        self.pos += 2;
                        let mut op = "&>".to_owned();
                        if self.peek(0) == Some('>') {
                            op.push('>');
                            self.pos += 1;
                        }
                        self.pending_redirect = Some(op);
                    } else {
                        self.finish_command();
                        self.pos += 1;
                        if self.peek(0) == Some('&') {
                            self.pos += 1;
                        }
                    }
                }
                '<' | '>' => self.redirect(c),
                '\'' => {
                    self.in_word = true;
                    self.pos += 1;
                    while let Some(c) = self.peek(0) {
                        self.pos += 1;
                        if c == '\'' {
                            break;
                        }
                        self.word.push(c);
                    }
                }
                '"' => {
                    self.in_word = true;
                    self.pos += 1;
                    self.double_quoted();
                }
                '\\' => match self.peek(1) {
                    // A line continuation joins the lines.
                    Some('\n') => self.pos += 2,
                    Some(next) => {
                        self.in_word = true;
                        self.word.push(next);
                        self.pos += 2;
                    }
                    None => self.pos += 1,
                },
                '`' => {
                    self.in_word = true;
                    self.pos += 1;
                    let body = self.backtick_body();
                    self.word.push('`');
                    self.word.push_str(&body);
                    self.word.push('`');
                    self.script.nested.push(body);
                }
                '$' => {
                    self.in_word = true;
                    self.dollar();
                }
                '#' if !self.in_word => {
                    // A comment runs to the end of the line.
                    while let Some(c) = self.peek(0) {
                        if c == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                other => {
                    self.in_word = true;
                    self.word.push(other);
                    self.pos += 1;
                }
            }
        }
        // Here-documents left open at the end of the text have no body to read.
        self.finish_command();
    }

    /// Inside `"…"` (the opening quote consumed): only `\`, `$` and backticks are
    /// special.
    fn double_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => match self.peek(1) {
                    Some('\n') => self.pos += 2,
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        self.word.push(next);
                        self.pos += 2;
                    }
                    _ => {
                        self.word.push('\\');
                        self.pos += 1;
                    }
                },
                '`' => {
                    self.pos += 1;
                    let body = self.backtick_body();
                    self.word.push('`');
                    self.word.push_str(&body);
                    self.word.push('`');
                    self.script.nested.push(body);
                }
                '$' if self.peek(1) != Some('\'') => self.dollar(),
                other => {
                    self.word.push(other);
                    self.pos += 1;
                }
            }
        }
    }

    /// At a `$`: a substitution, an ANSI-C string, or a plain `$`.
    fn dollar(&mut self) {
        match (self.peek(1), self.peek(2)) {
            (Some('('), Some('(')) => {
                // Arithmetic: not a command, but command substitutions inside it run.
                self.pos += 1;
                let body = self.balanced('(', ')');
                collect_substitutions(&body, &mut self.script.nested);
                self.word.push_str("$(");
                self.word.push_str(&body);
                self.word.push(')');
            }
            (Some('('), _) => {
                self.pos += 1;
                let body = self.balanced('(', ')');
                self.word.push_str("$(");
                self.word.push_str(&body);
                self.word.push(')');
                self.script.nested.push(body);
            }
            (Some('{'), _) => {
                self.pos += 1;
                let body = self.balanced('{', '}');
                collect_substitutions(&body, &mut self.script.nested);
                self.word.push_str("${");
                self.word.push_str(&body);
                self.word.push('}');
            }
            (Some('\''), _) => {
                self.pos += 2;
                self.ansi_c_quoted();
            }
            _ => {
                self.word.push('$');
                self.pos += 1;
            }
        }
    }

    /// At `open`: returns the text up to the matching `close` (both consumed), skipping
    /// quoted text and escapes. Runs to the end of the text if unbalanced.
    fn balanced(&mut self, open: char, close: char) -> String {
        let start = self.pos + 1;
        let end = match_balanced(&self.chars, self.pos, open, close);
        let body: String = self.chars[start.min(end)..end].iter().collect();
        self.pos = (end + 1).min(self.chars.len());
        body
    }

    /// After an opening backtick: the body up to the closing one (consumed), with the
    /// backslashes that escape `` ` ``, `\` and `$` removed.
    fn backtick_body(&mut self) -> String {
        let mut body = String::new();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '`' => break,
                '\\' => match self.peek(0) {
                    Some(next @ ('`' | '\\' | '$')) => {
                        body.push(next);
                        self.pos += 1;
                    }
                    _ => body.push('\\'),
                },
                other => body.push(other),
            }
        }
        body
    }

    /// After `$'`: decodes the common escapes, so `$'\x72m'` is the word `rm`.
    fn ansi_c_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '\'' => return,
                '\\' => {
                    let Some(e) = self.peek(0) else { return };
                    self.pos += 1;
                    match e {
                        'n' => self.word.push('\n'),
                        't' => self.word.push('\t'),
                        'r' => self.word.push('\r'),
                        'a' => self.word.push('\u{7}'),
                        'b' => self.word.push('\u{8}'),
                        'e' | 'E' => self.word.push('\u{1b}'),
                        'f' => self.word.push('\u{c}'),
                        'v' => self.word.push('\u{b}'),
                        'x' => {
                            let digits = self.take_digits(2, 16);
                            self.push_code(&digits, 16, 'x');
                        }
                        'u' => {
                            let digits = self.take_digits(4, 16);
                            self.push_code(&digits, 16, 'u');
                        }
                        'U' => {
                            let digits = self.take_digits(8, 16);
                            self.push_code(&digits, 16, 'U');
                        }
                        '0'..='7' => {
                            self.pos -= 1;
                            let digits = self.take_digits(3, 8);
                            self.push_code(&digits, 8, '0');
                        }
                        other => self.word.push(other),
                    }
                }
                other => self.word.push(other),
            }
        }
    }

    fn take_digits(&mut self, max: usize, radix: u32) -> String {
        let mut digits = String::new();
        while digits.len() < max {
            match self.peek(0) {
                Some(d) if d.is_digit(radix) => {
                    digits.push(d);
                    self.pos += 1;
                }
                _ => break,
            }
        }
        digits
    }

    fn push_code(&mut self, digits: &str, radix: u32, escape: char) {
        match u32::from_str_radix(digits, radix)
            .ok()
            .and_then(char::from_u32)
        {
            Some(ch) => self.word.push(ch),
            None => {
                self.word.push('\\');
                self.word.push(escape);
                self.word.push_str(digits);
            }
        }
    }

    /// At `<` or `>`: a redirection operator or a process substitution.
    fn redirect(&mut self, first: char) {
        // `<(…)` / `>(…)`: the body is a command line.
        if self.peek(1) == Some('(') {
            self.in_word = true;
            self.pos += 1;
            let body = self.balanced('(', ')');
            self.word.push(first);
            self.word.push('(');
            self.word.push_str(&body);
            self.word.push(')');
            self.script.nested.push(body);
            return;
        }
        // A word of digits right before the operator is its descriptor (`2>`).
        let mut op = String::new();
        if self.in_word && !self.word.is_empty() && self.word.chars().all(|c| c.is_ascii_digit()) {
            op = std::mem::take(&mut self.word);
            self.in_word = false;
        } else {
            self.finish_word();
        }
        op.push(first);
        self.pos += 1;
        let rest: &[&str] = if first == '>' {
            &[">", "|", "&"]
        } else {
            &["<<", "<-", "<", ">", "&"]
        };
        for candidate in rest {
            let matches = candidate
                .chars()
                .enumerate()
                .all(|(i, c)| self.peek(i) == Some(c));
            if matches {
                op.push_str(candidate);
                self.pos += candidate.chars().count();
                break;
            }
        }
        self.pending_redirect = Some(op);
    }

    fn finish_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.in_word = false;
        match self.pending_redirect.take() {
            Some(op) => {
                let bare = op.trim_start_matches(|c: char| c.is_ascii_digit());
                if bare == "<<" || bare == "<<-" {
                    // Quotes decide whether the body expands; they are gone from the
                    // word, so look back at the raw text.
                    let expands = !self.delimiter_was_quoted();
                    self.heredocs.push(PendingHeredoc {
                        delimiter: word.clone(),
                        strip_tabs: bare == "<<-",
                        expands,
                        command: self.script.commands.len(),
                    });
                } else if bare == "<<<" {
                    self.current.stdin_texts.push(word.clone());
                }
                self.current
                    .tokens
                    .push(Token::Redirect(Redirect { op, target: word }));
            }
            None => self.current.tokens.push(Token::Word(word)),
        }
    }

    /// Whether the word just finished (ending right before `pos`) contained a quote or
    /// a backslash, which makes a here-document literal.
    fn delimiter_was_quoted(&self) -> bool {
        let mut i = self.pos.min(self.chars.len());
        while i > 0 {
            i -= 1;
            match self.chars[i] {
                '\'' | '"' | '\\' => return true,
                ' ' | '\t' | '<' | '-' => return false,
                _ => {}
            }
        }
        false
    }

    fn finish_command(&mut self) {
        self.finish_word();
        if let Some(op) = self.pending_redirect.take() {
            self.current.tokens.push(Token::Redirect(Redirect {
                op,
                target: String::new(),
            }));
        }
        let command = std::mem::take(&mut self.current);
        if !command.tokens.is_empty() {
            self.script.commands.push(command);
        }
    }

    /// After a newline: the bodies of the here-documents opened on the line just ended.
    fn read_heredoc_bodies(&mut self) {
        for heredoc in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            while self.pos < self.chars.len() {
                let end = self.chars[self.pos..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |n| self.pos + n);
                let line: String = self.chars[self.pos..end].iter().collect();
                self.pos = (end + 1).min(self.chars.len());
                let line = if heredoc.strip_tabs {
                    line.trim_start_matches('\t').to_owned()
                } else {
                    line
                };
                if line == heredoc.delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if heredoc.expands {
                collect_substitutions(&body, &mut self.script.nested);
            }
            if let Some(command) = self.script.commands.get_mut(heredoc.command) {
                command.stdin_texts.push(body);
            }
        }
    }
}

/// The index of the `close` matching the `open` at `start` (or the end of the text),
/// skipping quoted text and escapes.
fn match_balanced(chars: &[char], start: usize, open: char, close: char) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            i += 2;
            continue;
        }
        if c == '\'' && open == '(' {
            // Single quotes are literal inside `$(…)`; skip to the closing one.
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
        } else if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return i;
            }
        }
        i += 1;
    }
    chars.len()
}

/// Adds the command substitutions found in expanded text that is not itself a
/// command line (a here-document body, `${…}`, `$((…))`) to `nested`.
fn collect_substitutions(text: &str, nested: &mut Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '$' if chars.get(i + 1) == Some(&'(') => {
                let end = match_balanced(&chars, i + 1, '(', ')');
                let body: String = chars[(i + 2).min(end)..end].iter().collect();
                if chars.get(i + 2) == Some(&'(') {
                    // `$((…))`: look inside the arithmetic for substitutions.
                    collect_substitutions(&body, nested);
                } else {
                    nested.push(body);
                }
                i = end + 1;
            }
            '`' => {
                let mut body = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '`' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    body.push(chars[i]);
                    i += 1;
                }
                nested.push(body);
                i += 1;
            }
            _ => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        lex(line).commands.iter().map(SimpleCommand::text).collect()
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        assert_eq!(texts(r#"r\m -rf /"#), ["rm -rf /"]);
        assert_eq!(texts(r#""rm" -rf /"#), ["rm -rf /"]);
        assert_eq!(texts("'rm' -rf /"), ["rm -rf /"]);
        assert_eq!(texts(r#"r""m -r''f /"#), ["rm -rf /"]);
        assert_eq!(texts(r"$'\x72\155' -rf /"), ["rm -rf /"]);
        assert_eq!(texts("echo \"a b\"  'c'"), ["echo a b c"]);
        assert_eq!(lex("echo ''").commands[0].words(), ["echo", ""]);
    }

    #[test]
    fn separators_split_commands_but_not_inside_quotes() {
        assert_eq!(
            texts("a; b && c || d | e |& f & g\nh (i) { j; }"),
            ["a", "b", "c", "d", "e", "f", "g", "h", "i", "{ j", "}"]
        );
        assert_eq!(texts("echo \"a; reboot\""), ["echo a; reboot"]);
        assert_eq!(texts("echo 'x | y' # reboot"), ["echo x | y"]);
        assert_eq!(texts("echo a#b"), ["echo a#b"]);
        assert_eq!(texts("ls \\\n -l"), ["ls -l"]);
    }

    #[test]
    fn redirections_are_tokens() {
        let s = lex("cat x >/dev/sda 2>&1 &>>log <in 3<>rw");
        let c = &s.commands[0];
        assert_eq!(c.words(), ["cat", "x"]);
        let r: Vec<(&str, &str)> = c
            .redirects()
            .map(|r| (r.op.as_str(), r.target.as_str()))
            .collect();
        assert_eq!(
            r,
            [
                (">", "/dev/sda"),
                ("2>&", "1"),
                ("&>>", "log"),
                ("<", "in"),
                ("3<>", "rw")
            ]
        );
        assert_eq!(c.text(), "cat x > /dev/sda 2>&1 &>> log < in 3<> rw");
        assert!(c.redirects().next().unwrap().writes());
        assert!(!c.redirects().nth(3).unwrap().writes());
        assert_eq!(texts("> /dev/sda"), ["> /dev/sda"]);
        assert_eq!(texts("echo 2>x"), ["echo 2> x"]);
        assert_eq!(texts("echo a2>x"), ["echo a2 > x"]);
    }

    #[test]
    fn substitutions_are_nested() {
        let s = lex("echo $(reboot) `halt` \"$(a \"b\")\" <(c) ${x:-$(d)} $((1 + $(e)))");
        assert_eq!(s.nested, ["reboot", "halt", "a \"b\"", "c", "d", "e"]);
        let s = lex("echo $(echo $(rm -rf /))");
        assert_eq!(s.nested, ["echo $(rm -rf /)"]);
        assert_eq!(lex("echo '$(no)' \\$(no)").nested, Vec::<String>::new());
        // Unbalanced text runs to the end instead of failing.
        assert_eq!(lex("echo $(reboot").nested, ["reboot"]);
        assert_eq!(lex("echo 'open").commands[0].words(), ["echo", "open"]);
    }

    #[test]
    fn heredoc_bodies_are_data_but_substitutions_in_them_run() {
        let s = lex("cat <<EOF > out\nreboot\n$(halt)\nEOF\necho done");
        assert_eq!(
            s.commands
                .iter()
                .map(SimpleCommand::text)
                .collect::<Vec<_>>(),
            ["cat << EOF > out", "echo done"]
        );
        assert_eq!(s.commands[0].stdin_texts, ["reboot\n$(halt)\n"]);
        assert_eq!(s.nested, ["halt"]);
        let s = lex("cat <<'EOF'\n$(halt)\nEOF\n");
        assert!(s.nested.is_empty());
        let s = lex("cat <<-\"EOF\"\n\t$(halt)\n\tEOF\nls");
        assert!(s.nested.is_empty());
        assert_eq!(s.commands.len(), 2);
        let s = lex("bash <<< 'reboot'");
        assert_eq!(s.commands[0].stdin_texts, ["reboot"]);
    }
}
