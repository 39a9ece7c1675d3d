"""The side-by-side table and loading results, on hand-built result frames (the guard: test_guard.py)."""

from pathlib import Path

import pandas as pd
import pytest

from poetsim.analysis.results import headline, headline_columns, in_study_order, load_results
from poetsim.errors import UserInputError
from poetsim.runs import RunsFile

ROOT = Path(__file__).resolve().parent.parent


def _frame(rows):
    return pd.DataFrame(
        [
            {
                "point_key": key,
                "status": status,
                "predicted_total_j": energy,
                "message": "",
                "model": "m",
                "platform": "p",
                "ram": "50%",
                "runtime_x": 1.2,
                "strategy": key.split("|")[-1],
                "overhead_pct": 0.0,
                "predicted_peak_ram_bytes": 1,
                "predicted_runtime_s": 1.0,
            }
            for key, status, energy in rows
        ]
    )


def test_load_results_rejects_missing_and_foreign_files(tmp_path):
    with pytest.raises(UserInputError, match="no such results file"):
        load_results(tmp_path)
    (tmp_path / "runs.csv").write_text("a,b\n1,2\n")
    with pytest.raises(UserInputError, match="missing columns"):
        load_results(tmp_path)


def test_the_headline_puts_strategies_side_by_side_with_ram_sorted_as_a_number():
    rows = []
    for ram, budget in (("100%", 100), ("20%", 20), ("50%", 50)):
        for strategy, status, overhead, gap in (
            ("hybrid", "feasible", 0.5, 0.2),
            ("paging-only", "optimal", 0.5, 0.0),
            ("recompute-only", "infeasible", None, None),
        ):
            rows.append(
                {
                    "point_key": f"m|p|{ram}|1.2x|{strategy}",
                    "model": "m",
                    "platform": "p",
                    "ram": ram,
                    "runtime_x": 1.2,
                    "timing": "overlap",
                    "strategy": strategy,
                    "status": status,
                    "overhead_pct": overhead,
                    "gap_overhead": gap,
                    "predicted_total_j": 1.0,
                    "ram_budget_bytes": budget,
                    "keep_all_peak_bytes": 100,
                }
            )
    table = headline(pd.DataFrame(rows))
    assert list(table["ram"]) == ["100%", "50%", "20%"]
    assert headline_columns(table) == [
        "model",
        "platform",
        "timing",
        "runtime_x",
        "ram",
        "hybrid",
        "paging-only",
        "recompute-only",
    ]
    first = table.iloc[0]
    assert (first["hybrid"], first["paging-only"], first["recompute-only"]) == ("0.500 %*", "0.500 %", "infeasible")
    assert first["hybrid gap"] == 0.2


def test_tables_of_points_read_in_one_order_largest_ram_first_strategies_in_registry_order():
    frame = pd.DataFrame(
        {
            "model": ["b", "a", "a", "a", "a"],
            "platform": ["rpi4"] * 5,
            "runtime_x": ["1.2", "1.2", "1.2", "1.2", "1.2"],
            "ram": ["50%", "35%", "50%", "50%", "100%"],
            "strategy": ["hybrid", "hybrid", "recompute-only", "keep-all", "hybrid"],
        }
    )
    ordered = in_study_order(frame)
    assert list(zip(ordered["model"], ordered["ram"], ordered["strategy"])) == [
        ("a", "100%", "hybrid"),
        ("a", "50%", "keep-all"),
        ("a", "50%", "recompute-only"),
        ("a", "35%", "hybrid"),
        ("b", "50%", "hybrid"),
    ]


@pytest.mark.parametrize("cut", ["mid-line", "short row"])
def test_a_last_row_a_power_cut_tore_is_left_out_as_every_reader_does(tmp_path, cut):
    """Check and report read a runs.csv whose last row was torn, without it (docs/dependability.md)."""
    shipped = (ROOT / "results" / "mcu" / "runs.csv").read_text()
    torn = shipped[:-200] + ("\n" if cut == "short row" else "")
    (tmp_path / "runs.csv").write_text(torn)
    frame = load_results(tmp_path)
    whole = load_results(ROOT / "results" / "mcu")
    assert len(frame) == len(whole) - 1 and frame.equals(whole.iloc[:-1])
    assert len(RunsFile(tmp_path / "runs.csv").records()) == len(whole) - 1
