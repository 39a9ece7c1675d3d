"""Fixtures shared by the test modules."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKMATE_GRAPHS = ROOT / "scenarios" / "graphs" / "checkmate"


@pytest.fixture
def checkmate_graphs() -> Path:
    """The seven Checkmate training graphs shipped under scenarios/graphs/checkmate."""
    return CHECKMATE_GRAPHS
