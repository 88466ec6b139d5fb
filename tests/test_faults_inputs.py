"""Small wrong inputs found with the faults of issue 14: `file://localhost/...` URLs, and entry
ranges on the command line that are malformed or backwards."""

import cherenkov
import pytest
from cherenkov.cli import main as cli

NAME = "uproot-HZZ.root"


def test_file_urls_name_absolute_paths(testdata):
    path = (testdata / NAME).resolve()
    expected = cherenkov.open(path)["events"].arrays(["Muon_Px"], library="np")["Muon_Px"]
    for url in (f"file://{path}", f"file://localhost{path}"):
        got = cherenkov.open(url)["events"].arrays(["Muon_Px"], library="np")["Muon_Px"]
        assert (got.offsets == expected.offsets).all() and (got.content == expected.content).all(), url
    with pytest.raises(ValueError, match="not files on host 'elsewhere'"):
        cherenkov.open(f"file://elsewhere{path}")


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("5:2", "the stop entry (2) is before the start (5)"),
        ("abc", "'abc' is not an entry range"),
        ("1:x", "'1:x' is not an entry range"),
    ],
)
def test_bad_entry_ranges_are_clear_errors(testdata, capsys, entries, message):
    with pytest.raises(SystemExit) as exit:
        cli(["read", str(testdata / NAME), "--entries", entries, "--quiet"])
    assert exit.value.code != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "invalid literal" not in err


def test_good_entry_ranges_still_read(testdata, capsys):
    for entries in ("0:100", ":50", "2000:"):
        assert cli(["read", str(testdata / NAME), "--entries", entries, "--quiet"]) == 0
