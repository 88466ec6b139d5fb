"""Shared fixtures. Tests that need ../shared/testdata skip with a clear reason when it is absent."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CHERENKOV_SHARED", REPO.parent / "shared"))
TESTDATA = SHARED / "testdata"


def shared_root_files() -> list[Path]:
    return sorted(TESTDATA.glob("*.root")) if TESTDATA.is_dir() else []


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"{TESTDATA} is absent: set CHERENKOV_SHARED to the shared folder to run these tests")
    return TESTDATA
