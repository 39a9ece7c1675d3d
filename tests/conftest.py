"""Fixtures shared by the test modules."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_GRAPHS = ROOT.parent / "shared" / "benchmarks" / "graphs"


@pytest.fixture
def shared_graphs() -> Path:
    """The seven Checkmate training graphs shipped in ../shared (skips if absent)."""
    if not SHARED_GRAPHS.is_dir():
        pytest.skip(f"{SHARED_GRAPHS} not present")
    return SHARED_GRAPHS
