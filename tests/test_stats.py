"""Statistics: counters checked against reads whose cost is known."""

import json

import cherenkov
from cherenkov.stats import Stats


def test_counters_add_up_for_a_known_read(testdata):
    f = cherenkov.open(testdata / "nanolike-root6.40-zstd-4clusters.root")
    tree = f["Events"]
    opened = f.stats()
    assert opened.read_calls == 0 and opened.baskets == 0 and 1 <= opened.requests <= 2
    names = ["Muon_pt", "Jet_pt", "run"]
    infos = [tree[n] for n in names]
    tree.arrays(names)
    s = f.stats()
    assert s.read_calls == 1
    assert s.baskets == sum(i.num_baskets for i in infos)
    assert s.compressed_bytes == sum(i.compressed_bytes for i in infos)  # every basket, once
    assert s.uncompressed_bytes > s.compressed_bytes
    assert s.requests == opened.requests + 1  # one vectored request for all baskets
    assert s.ranges - opened.ranges == s.baskets
    assert s.bytes_read - opened.bytes_read == s.compressed_bytes
    assert s.decompress_cpu_seconds > 0 and s.fetch_seconds >= 0
    assert s.real_seconds > 0 and s.cpu_seconds > 0


def test_prefetched_steps_and_cache_counters(testdata):
    f = cherenkov.open(testdata / "nanolike-root6.40-zstd-4clusters.root")
    tree = f["Events"]
    for _ in tree.iterate(["Muon_pt"], step_size=500):
        pass
    assert f.stats().prefetched_steps == 4
    for i, chunk in enumerate(tree.chunks(step_size=500)):
        chunk["Muon_pt"]
        if i == 1:
            chunk["Jet_pt"]
    s = f.stats()
    assert (s.startup_fetches, s.cache_hits, s.cache_misses, s.miss_fetches) == (1, 4, 1, 1)
    # the startup and trigger reads brought every branch; only two were used
    assert s.unused_bytes > 0.5 * s.uncompressed_bytes


def test_stats_sum_over_files_and_export(testdata):
    a = cherenkov.open(testdata / "uproot-HZZ.root")
    b = cherenkov.open(testdata / "uproot-Zmumu.root")
    a["events"].arrays(["Muon_Px"])
    b["events"].arrays(["px1"])
    total = Stats.total([a.stats(), b.stats()])
    assert total.read_calls == 2 and len(total.sources) == 2
    assert total.compressed_bytes == a.stats().compressed_bytes + b.stats().compressed_bytes
    d = json.loads(total.to_json())
    assert d["baskets"] == total.baskets and d["extra_bytes"] == total.extra_bytes
    assert total.table().row_count > 5


def test_trace_records_every_range_and_plots_are_drawn(testdata, tmp_path):
    import pytest
    from cherenkov import plots

    f = cherenkov.open(testdata / "uproot-HZZ.root", trace=True)
    tree = f["events"]
    tree.arrays(["Muon_Px", "Jet_Px"])
    trace = f.trace()
    # Every basket lies in a traced range: this 218 kB file came whole with the opening's reads.
    read = [(int(o), int(o) + int(n)) for o, n in zip(trace["offset"], trace["length"])]
    baskets = [(s, s + n) for b in ("Muon_Px", "Jet_Px") for s, n in zip(tree[b].basket_seeks, tree[b].basket_bytes)]
    assert all(any(lo <= s and e <= hi for lo, hi in read) for s, e in baskets), (read, baskets)
    assert (trace["answered"] >= trace["sent"]).all() and trace["ok"].all()
    assert len(set(trace["request"].tolist())) == f.source_counters().requests
    for draw, name in [
        (lambda p: plots.read_offsets([f], p), "offsets.png"),
        (lambda p: plots.entry_offsets(tree, p, file=f), "entries.png"),
        (lambda p: plots.timeline(f, p, consumed=[0.001]), "timeline.pdf"),
    ]:
        out = draw(tmp_path / name)
        assert out.stat().st_size > 1000
        assert out.read_bytes()[:4] in (b"\x89PNG", b"%PDF")
    with pytest.raises(ValueError, match="trace=True"):
        plots.read_offsets([cherenkov.open(testdata / "uproot-HZZ.root")], tmp_path / "x.png")
