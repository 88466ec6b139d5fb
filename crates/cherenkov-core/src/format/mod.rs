//! The ROOT file format: pure functions from bytes to structures and back (`writing/`). Nothing
//! here does I/O; callers fetch the byte ranges these functions ask for, or place the bytes they
//! return.

pub mod array;
pub mod basket;
pub mod compression;
pub mod cursor;
pub mod deserialize;
pub mod directory;
pub mod interpretation;
pub mod model;
pub mod objects;
pub mod packed;
pub mod rntuple;
pub mod streamers;
pub mod tree;
mod tree_members;
pub mod writing;
