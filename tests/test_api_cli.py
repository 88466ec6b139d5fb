"""The Python API's behaviour (keys, directories, cycles, selection, errors) and the command line."""

import subprocess
import sys

import cherenkov
import numpy as np
import pytest
from cherenkov.cli import main as cli
from conftest import REPO


def test_nested_directories_and_keys(testdata):
    f = cherenkov.open(testdata / "uproot-nesteddirs.root")
    assert set(f.keys(cycle=False)) >= {"one", "one/two", "one/two/tree", "one/tree", "three", "three/tree"}
    assert f.classnames()["one/two/tree;1"] == "TTree"
    assert f["one"]["two/tree"].num_entries == f["one/two/tree"].num_entries == 100
    assert "one/tree" in f and "nothing" not in f


def test_cycles_pick_the_highest_unless_named(testdata):
    f = cherenkov.open(testdata / "nanolike-root6.40-zstd-4clusters.root")
    assert {"Events;4", "Events;5"} <= set(f.keys())
    assert f["Events"].num_entries == f["Events;5"].num_entries == f["Events;4"].num_entries == 2000


def test_branch_listing_and_selection(testdata):
    tree = cherenkov.open(testdata / "uproot-HZZ.root")["events"]
    info = tree["Muon_Px"]
    assert (info.typename, info.kind, info.entries) == ("float[]", "jagged", 2421)
    assert info.compressed_bytes > 0 and info.uncompressed_bytes >= info.compressed_bytes // 2 and info.num_baskets >= 1
    muons = tree.arrays("Muon_*", library="np")
    assert sorted(muons) == sorted(k for k in tree.keys() if k.startswith("Muon_"))
    by_regex = tree.arrays("/^Muon_P[xy]$/", library="np")
    assert sorted(by_regex) == ["Muon_Px", "Muon_Py"]
    assert tree.keys(filter_name="Jet_P?") == ["Jet_Px", "Jet_Py", "Jet_Pz"]


def test_numpy_forms(testdata):
    tree = cherenkov.open(testdata / "uproot-sample-6.20.04-uncompressed.root")["sample"]
    out = tree.arrays(["i4", "ai4", "Ai4", "str"], library="np")
    assert out["i4"].dtype == np.int32 and out["i4"].shape == (30,)
    assert out["ai4"].shape == (30, 3)
    jagged = out["Ai4"]
    assert isinstance(jagged, cherenkov.Jagged) and len(jagged) == 30
    assert jagged.offsets[0] == 0 and jagged.offsets[-1] == len(jagged.content)
    assert np.array_equal(jagged[3], jagged.content[jagged.offsets[3] : jagged.offsets[4]])
    assert out["str"][0] == "hey-0" and out["str"].dtype == object


def test_leaf_list_is_a_record(testdata):
    tree = cherenkov.open(testdata / "uproot-leaflist.root")["tree"]
    rec = tree.arrays(["leaflist"], library="np")["leaflist"]
    assert rec.dtype.names == ("x", "y", "z")
    events = tree.arrays(["leaflist"], library="ak")
    assert events.leaflist.fields == ["x", "y", "z"]


def test_entry_ranges_are_clipped_and_negative_counts_from_the_end(testdata):
    tree = cherenkov.open(testdata / "uproot-Zmumu.root")["events"]
    full = tree.arrays(["px1"], library="np")["px1"]
    assert np.array_equal(tree.arrays(["px1"], entry_start=-10, library="np")["px1"], full[-10:])
    assert len(tree.arrays(["px1"], entry_start=5, entry_stop=10**9, library="np")["px1"]) == len(full) - 5
    assert len(tree.arrays(["px1"], entry_start=10, entry_stop=3, library="np")["px1"]) == 0


def test_errors_name_what_went_wrong(testdata, tmp_path):
    with pytest.raises(cherenkov.SourceError, match="nope.root"):
        cherenkov.open(tmp_path / "nope.root")
    f = cherenkov.open(testdata / "uproot-HZZ.root")
    with pytest.raises(cherenkov.NotFoundError, match="no object named 'nothing'"):
        f["nothing"]
    with pytest.raises(cherenkov.NotFoundError, match="no branch named 'nothing'"):
        f["events"].arrays(["nothing"])
    events = cherenkov.open(testdata / "uproot-mc10events.root")["Events"]
    with pytest.raises(cherenkov.UnsupportedBranch, match="triggerBits.*bitset"):
        events.arrays(["Info/triggerBits"])
    assert "Info/triggerBits" not in events.arrays("Info/*", library="np")  # patterns skip what cannot be read
    with pytest.raises(ValueError, match="library"):
        f["events"].arrays(["NMuon"], library="pandas")


def test_empty_tree(testdata):
    tree = cherenkov.open(testdata / "uproot-empty.root")["tree"]
    assert tree.num_entries == 0
    assert all(len(v) == 0 for v in tree.arrays(library="np").values())
    assert list(tree.iterate(step_size=10)) == []


def test_cli_ls_and_read(testdata, capsys):
    path = str(testdata / "uproot-HZZ.root")
    assert cli(["ls", path]) == 0
    out = capsys.readouterr().out
    assert "events" in out and "Muon_Px" in out and "2,421" in out
    assert cli(["read", path, "--branches", "Muon_*", "--entries", "0:100", "--stats", "--json"]) == 0
    out = capsys.readouterr().out
    assert "read 6 branches of 'events' in 1 steps" in out and '"baskets": 6' in out


def test_cli_read_writes_plots(testdata, tmp_path, capsys):
    plot = tmp_path / "read.png"
    assert cli(["read", str(testdata / "uproot-HZZ.root"), "--branches", "Jet_*", "--plot", str(plot), "--quiet"]) == 0
    for name in ("read.png", "read-offsets.png", "read-timeline.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_cli_errors_are_one_line_and_exit_nonzero(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "cherenkov.cli", "ls", str(tmp_path / "missing.root")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.startswith("cherenkov: error:") and "missing.root" in result.stderr
    assert "Traceback" not in result.stderr
    help_text = subprocess.run([sys.executable, "-m", "cherenkov.cli", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "ls" in help_text and "read" in help_text


def test_the_readme_lists_every_open_option_as_the_core_defines_it():
    """The README's table of `open`'s options is the core's one definition of them, rendered."""
    sys.path.insert(0, str(REPO / "scripts"))
    import readme_options

    readme = (REPO / "README.md").read_text()
    assert readme_options.with_table(readme) == readme, "out of date: run python scripts/readme_options.py"
    assert all(f"``{name}``" in cherenkov.open.__doc__ for name in cherenkov.file.OPEN_OPTIONS)
