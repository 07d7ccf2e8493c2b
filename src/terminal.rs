//! Text from agents and nodes made safe to print on an operator's terminal.
//!
//! Node ids, tool descriptions, approval summaries, audit actors and error messages
//! reach `gsv`'s output from agents and nodes that may be hostile. Printed raw, a
//! cursor-movement escape can make `gsv approvals list` show `echo tidy-up` for an
//! `rm -rf` (the terminal redraws the line), and a bidi override can reverse what a
//! person reads. Every human-readable line `gsv` prints with such text goes through
//! [`safe`], the one display rule of `gsv_protocol::display` (the console and the
//! webhook use the same). `--json` output is escaped by JSON itself.

pub use gsv_protocol::display::safe;
