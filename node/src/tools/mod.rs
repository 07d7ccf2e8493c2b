//! The tools a node can offer, one file each.
//!
//! A new tool is a file here implementing [`crate::Tool`] plus one line in
//! [`crate::Registry::standard`]. Shared helpers for tools live beside them
//! ([`args`] for validating untrusted arguments, [`paths`] for resolving path
//! arguments and confining them to the workspace, [`beneath`] for opening beneath a
//! directory without races, [`protected`] for the files no tool may touch).

pub mod args;
pub mod bash;
pub mod beneath;
pub mod echo;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod net;
pub mod paths;
pub mod process;
pub mod protected;
pub mod read;
pub mod write;
