//! Fuzz target `names`: arbitrary bytes as a node id, tool name, namespaced name,
//! capability id, host name or gateway address (see `gsv_fuzz::names`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gsv_fuzz::names(data);
});
