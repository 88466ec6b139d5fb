//! Serialization beside parsing: every structure written here is parsed by its reader in
//! `format/`, and tested by a round trip through it. Pure like the parsers: bytes out, no I/O
//! (the engine's writer decides where they go, a sink puts them there).

pub mod basket;
pub mod buffer;
pub mod classes;
pub mod compression;
pub mod directory;
pub mod streamers;
pub mod tree;
