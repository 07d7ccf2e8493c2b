//! The `gsv` package: the CLI's commands, on top of the `gsv-gateway`, `gsv-node`,
//! `gsv-client` and `gsv-protocol` crates.
//!
//! `main.rs` only parses flags; everything a command does lives here so the end-to-end
//! tests and the examples can use the same code. The exception is `gsv bench`: its
//! scenarios are the `gsv-bench` crate, which only the binary depends on.

pub mod allocator;
pub mod cli;
pub mod commands;
pub mod exit;
pub mod logging;
pub mod mcp_bridge;
pub mod resolve;
pub mod service;
pub mod terminal;
