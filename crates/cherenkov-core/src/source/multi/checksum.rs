//! Replicas verified by checksum: every server must give the same one.

use crate::error::{Error, Result};
use crate::source::SharedSource;

/// The checksum every source's server gives, which must agree (see
/// [`MultiOptions::verify_checksums`]); the error names each answer.
pub async fn agreed_checksum(name: &str, sources: &[SharedSource]) -> Result<String> {
    let answers = futures_util::future::join_all(sources.iter().map(|s| s.checksum())).await;
    let mut values = Vec::new();
    for (source, answer) in sources.iter().zip(answers) {
        let why = match answer {
            Ok(Some(value)) => {
                values.push((source.name(), value));
                continue;
            }
            Ok(None) => "this protocol has no checksum to ask for".to_string(),
            Err(e) => e.to_string(),
        };
        return Err(Error::io(
            source.name(),
            format!("cannot verify the replica's checksum: {why}"),
        ));
    }
    if values.iter().all(|(_, v)| *v == values[0].1) {
        return Ok(values.swap_remove(0).1);
    }
    let listing = values
        .iter()
        .map(|(n, v)| format!("{n} has {v}"))
        .collect::<Vec<_>>()
        .join("; ");
    Err(Error::io(
        name,
        format!("replicas differ in checksum: {listing}"),
    ))
}
