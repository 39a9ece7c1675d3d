"""The energy regression guard and the side-by-side table, on hand-built result frames."""

import pandas as pd
import pytest

from poetsim.errors import UserInputError
from poetsim.results import check_against_baseline, compare_strategies, headline, headline_columns, load_results


def _frame(rows):
    return pd.DataFrame([
        {"point_key": key, "status": status, "predicted_total_j": energy, "message": "",
         "model": "m", "platform": "p", "ram": "50%", "runtime_x": 1.2, "strategy": key.split("|")[-1],
         "overhead_pct": 0.0, "predicted_peak_ram_bytes": 1, "predicted_runtime_s": 1.0}
        for key, status, energy in rows
    ])


BASE = _frame([("a|hybrid", "optimal", 10.0), ("b|hybrid", "optimal", 20.0), ("c|hybrid", "infeasible", None)])


def _verdicts(current, rtol=1e-3):
    return {c.point_key: c.verdict for c in check_against_baseline(current, BASE, rtol)}


def test_same_energy_passes():
    changes = check_against_baseline(BASE, BASE)
    assert not any(c.fails for c in changes)
    assert {c.verdict for c in changes} == {"same"}


def test_worse_beyond_tolerance_fails_and_within_passes():
    worse = _frame([("a|hybrid", "optimal", 10.5), ("b|hybrid", "optimal", 20.01), ("c|hybrid", "infeasible", None)])
    verdicts = _verdicts(worse)
    assert verdicts["a|hybrid"] == "worse"
    assert verdicts["b|hybrid"] == "same"
    assert _verdicts(worse, rtol=0.1)["a|hybrid"] == "same"


def test_better_and_newly_feasible_pass():
    better = _frame([("a|hybrid", "optimal", 9.0), ("b|hybrid", "feasible", 20.0), ("c|hybrid", "optimal", 5.0)])
    changes = check_against_baseline(better, BASE)
    assert {c.point_key: c.verdict for c in changes} == {"a|hybrid": "better", "b|hybrid": "same", "c|hybrid": "now-feasible"}
    assert not any(c.fails for c in changes)


def test_feasible_to_infeasible_or_failed_fails():
    broken = _frame([("a|hybrid", "infeasible", None), ("b|hybrid", "failed", None), ("c|hybrid", "infeasible", None)])
    changes = {c.point_key: c for c in check_against_baseline(broken, BASE)}
    assert changes["a|hybrid"].verdict == "now-infeasible" and changes["a|hybrid"].fails
    assert changes["b|hybrid"].verdict == "now-infeasible" and changes["b|hybrid"].fails
    assert not changes["c|hybrid"].fails


def test_missing_point_fails_and_new_point_is_reported():
    partial = _frame([("a|hybrid", "optimal", 10.0), ("c|hybrid", "infeasible", None), ("d|hybrid", "optimal", 1.0)])
    changes = {c.point_key: c for c in check_against_baseline(partial, BASE)}
    assert changes["b|hybrid"].verdict == "missing" and changes["b|hybrid"].fails
    assert changes["d|hybrid"].verdict == "new" and not changes["d|hybrid"].fails


def test_compare_orders_keep_all_first():
    frame = _frame([("x|hybrid", "optimal", 2.0), ("x|keep-all", "baseline", 1.0), ("x|paging-only", "optimal", 3.0)])
    assert list(compare_strategies(frame)["strategy"]) == ["keep-all", "hybrid", "paging-only"]


def test_load_results_rejects_missing_and_foreign_files(tmp_path):
    with pytest.raises(UserInputError, match="no such results file"):
        load_results(tmp_path)
    (tmp_path / "runs.csv").write_text("a,b\n1,2\n")
    with pytest.raises(UserInputError, match="missing columns"):
        load_results(tmp_path)


def test_the_headline_puts_strategies_side_by_side_with_ram_sorted_as_a_number():
    rows = []
    for ram, budget in (("100%", 100), ("20%", 20), ("50%", 50)):
        for strategy, status, overhead, gap in (("hybrid", "feasible", 0.5, 0.2), ("paging-only", "optimal", 0.5, 0.0),
                                                ("recompute-only", "infeasible", None, None)):
            rows.append({"point_key": f"m|p|{ram}|1.2x|{strategy}", "model": "m", "platform": "p", "ram": ram,
                         "runtime_x": 1.2, "timing": "overlap", "strategy": strategy, "status": status,
                         "overhead_pct": overhead, "gap_overhead": gap, "predicted_total_j": 1.0,
                         "ram_budget_bytes": budget, "keep_all_peak_bytes": 100})
    table = headline(pd.DataFrame(rows))
    assert list(table["ram"]) == ["100%", "50%", "20%"]
    assert headline_columns(table) == ["model", "platform", "timing", "runtime_x", "ram", "hybrid", "paging-only", "recompute-only"]
    first = table.iloc[0]
    assert (first["hybrid"], first["paging-only"], first["recompute-only"]) == ("0.500 %*", "0.500 %", "infeasible")
    assert first["hybrid gap"] == 0.2
