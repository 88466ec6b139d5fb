#!/bin/sh
# Seed corpus for the fuzz targets, cut out of the shared test files (header bytes, keys lists,
# streamer infos, TTree objects, baskets, compression blocks) into fuzz/corpus/<target>/.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
shared="${CHERENKOV_SHARED:-$here/../../shared}"
rm -rf "$here/corpus"
cargo run --quiet --manifest-path "$here/Cargo.toml" --example make_corpus -- "$shared/testdata" "$here/corpus"
