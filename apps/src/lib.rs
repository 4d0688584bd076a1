//! What the `tickbus` command-line tools share with the programs that read their output: the
//! JSON summaries as types ([`summary`]). The tools themselves are the `tickbus` binary
//! (`src/main.rs`); the latency lab reads these summaries as these types.
#![warn(missing_docs)]

pub mod summary;
