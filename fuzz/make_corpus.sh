#!/bin/sh
# Seed corpus for the fuzz targets, cut out of the shared and committed test files (the committed
# ones include TTrees cherenkov's writer wrote) (header bytes,
# keys lists, streamer infos, TTree objects, baskets, compression blocks; RNTuple anchors,
# envelopes and pages) into fuzz/corpus/<target>/.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
shared="${CHERENKOV_SHARED:-$here/../../shared}"
rm -rf "$here/corpus"
for folder in "$shared/testdata" "$here/../tests/data"; do
    cargo run --quiet --manifest-path "$here/Cargo.toml" --example make_corpus -- "$folder" "$here/corpus"
done
