"""The energy regression guard (`poetsim check`): every kind of regression fails, malformed files exit 2."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from poetsim.analysis.guard import Verdict, check_against_baseline
from poetsim.analysis.results import load_results
from poetsim.cli import app
from poetsim.errors import UserInputError

ROOT = Path(__file__).resolve().parent.parent
MCU_BASELINE = ROOT / "results" / "baselines" / "mcu.csv"
#: The shipped MCU study after `poetsim compare`: the baseline's points plus keep-all and checkpoint-sqrt.
MCU_COMPARED = ROOT / "results" / "mcu" / "runs.csv"


def _row(key, status, energy=None, keep_all=10.0, simulated=None, peak=None, simulated_peak=None, message="", strategy="hybrid"):
    return {
        "point_key": key,
        "strategy": strategy,
        "status": status,
        "message": message,
        "predicted_total_j": energy,
        "keep_all_energy_j": keep_all,
        "simulated_total_j": simulated,
        "predicted_peak_ram_bytes": peak,
        "simulated_peak_ram_bytes": simulated_peak,
    }


def _frame(*rows):
    return pd.DataFrame(list(rows))


def _change(before: dict, after: dict, **options):
    """The one Change of a point that was `before` in the baseline and is `after` now."""
    (change,) = check_against_baseline(_frame(after), _frame(before), **options)
    return change


def test_the_same_results_pass():
    base = _frame(
        _row("a", "optimal", 10.4, simulated=10.5, peak=100, simulated_peak=110),
        _row("b", "infeasible", keep_all=None),
        _row("c", "no-solution", keep_all=None),
    )
    changes = check_against_baseline(base, base)
    assert {c.verdict for c in changes} == {Verdict.SAME} and not any(c.fails for c in changes)


def test_the_tolerance_is_on_the_overhead_above_keep_all_not_on_the_total():
    """An 8x larger overhead fails at rtol 0.01 although it is 0.2 % of the total (the ResNet-18 case)."""
    before = _row("p", "feasible", 1000.3, keep_all=1000.0)
    eight_times = _change(before, _row("p", "feasible", 1002.4, keep_all=1000.0), rtol=0.01)
    assert eight_times.verdict == "worse" and eight_times.fails
    assert "0.3 J above keep-all" in eight_times.detail
    within = _change(before, _row("p", "feasible", 1000.3029, keep_all=1000.0), rtol=0.01)
    assert within.verdict == "same" and not within.fails


def test_the_absolute_floor_applies_where_the_overhead_is_zero():
    keep_all_fits = _row("p", "optimal", 10.0, keep_all=10.0)
    assert _change(keep_all_fits, _row("p", "optimal", 10.0 + 5e-7)).verdict == "same"
    assert _change(keep_all_fits, _row("p", "optimal", 10.0 + 2e-6)).verdict == "worse"
    assert _change(keep_all_fits, _row("p", "optimal", 10.0 + 2e-6), atol_j=1e-5).verdict == "same"


def test_lower_energy_beyond_the_slack_is_better_and_passes():
    change = _change(_row("p", "feasible", 11.0), _row("p", "optimal", 10.5))
    assert change.verdict == "better" and not change.fails


@pytest.mark.parametrize(
    "before, after, verdict",
    [
        ("optimal", "feasible", "lost-proof"),
        ("optimal", "no-solution", "lost-schedule"),
        ("optimal", "infeasible", "lost-schedule"),
        ("optimal", "invalid", "failed"),
        ("feasible", "no-solution", "lost-schedule"),
        ("feasible", "infeasible", "lost-schedule"),
        ("baseline", "over-budget", "lost-schedule"),
        ("infeasible", "no-solution", "lost-proof"),
        ("infeasible", "failed", "failed"),
        ("no-solution", "failed", "failed"),
    ],
)
def test_a_lost_schedule_or_proof_fails(before, after, verdict):
    with_schedule = {"optimal", "feasible", "baseline"}
    change = _change(
        _row("m|p|50%|1.2x|hybrid", before, 10.2 if before in with_schedule else None),
        _row("m|p|50%|1.2x|hybrid", after, 10.2 if after in with_schedule else None, message="why"),
    )
    assert change.verdict == verdict and change.fails
    assert f"{before} -> {after}" in change.detail


@pytest.mark.parametrize(
    "before, after, verdict",
    [
        ("feasible", "optimal", "same"),
        ("infeasible", "optimal", "now-feasible"),
        ("no-solution", "feasible", "now-feasible"),
        ("no-solution", "no-solution", "same"),
        ("infeasible", "infeasible", "same"),
        ("over-budget", "over-budget", "same"),
    ],
)
def test_a_gained_or_kept_status_passes(before, after, verdict):
    with_schedule = {"optimal", "feasible", "baseline"}
    change = _change(
        _row("p", before, 10.2 if before in with_schedule else None), _row("p", after, 10.2 if after in with_schedule else None)
    )
    assert change.verdict == verdict and not change.fails


@pytest.mark.parametrize("energy", [0.0, -1.0, math.inf, None])
def test_an_energy_missing_zero_negative_or_infinite_fails(energy):
    change = _change(_row("p", "optimal", 10.2), _row("p", "optimal", energy))
    assert change.verdict == "bad-figure" and change.fails


def test_simulated_energy_and_peak_ram_beyond_the_tolerance_fail():
    before = _row("p", "optimal", 10.4, simulated=10.5, peak=1000, simulated_peak=1100)
    assert _change(before, {**before, "simulated_total_j": 15.75}).verdict == "simulated-worse"
    assert _change(before, {**before, "simulated_total_j": None}).verdict == "bad-figure"
    assert _change(before, {**before, "predicted_peak_ram_bytes": 10_000}).verdict == "peak-ram-up"
    assert _change(before, {**before, "simulated_peak_ram_bytes": 11_000}).verdict == "simulated-peak-ram-up"
    assert _change(before, {**before, "predicted_peak_ram_bytes": 1000.9}).verdict == "same"  # within rtol x peak


def test_one_change_per_point_lists_every_problem():
    before = _row("p", "optimal", 10.4, simulated=10.5, peak=1000)
    change = _change(before, _row("p", "feasible", 11.0, simulated=12.0, peak=5000))
    assert change.verdict == "lost-proof"
    assert all(word in change.detail for word in ("optimal -> feasible", "energy 10.4 -> 11", "simulated energy", "peak RAM"))


def test_a_missing_point_fails_and_a_new_one_passes():
    changes = {
        c.point_key: c for c in check_against_baseline(_frame(_row("new", "optimal", 1.0)), _frame(_row("gone", "optimal", 10.2)))
    }
    assert changes["gone"].verdict == "missing" and changes["gone"].fails
    assert changes["new"].verdict == "new" and not changes["new"].fails


def test_points_that_compare_added_to_one_file_only_are_not_compared():
    """A compared results folder against a sweep's baseline, and the other way round: no new, no missing points."""
    swept = _frame(_row("m|p|50%|hybrid", "optimal", 10.2))
    compared = _frame(
        _row("m|p|50%|hybrid", "optimal", 10.2),
        _row("m|p|50%|keep-all", "over-budget", keep_all=10.0, strategy="keep-all"),
        _row("m|p|50%|checkpoint-sqrt", "baseline", 10.9, strategy="checkpoint-sqrt"),
    )
    for current, baseline in ((compared, swept), (swept, compared)):
        changes = {c.point_key: c for c in check_against_baseline(current, baseline)}
        assert changes["m|p|50%|hybrid"].verdict is Verdict.SAME
        for key in ("m|p|50%|keep-all", "m|p|50%|checkpoint-sqrt"):
            assert changes[key].verdict is Verdict.NOT_COMPARED and not changes[key].fails


def test_points_of_compare_baselines_that_both_files_hold_are_judged():
    before = _row("m|p|50%|checkpoint-sqrt", "baseline", 10.9, strategy="checkpoint-sqrt")
    change = _change(before, {**before, "predicted_total_j": 12.0})
    assert change.verdict is Verdict.WORSE and change.fails


def test_other_strategies_only_in_one_file_are_still_new_or_missing():
    changes = {
        c.point_key: c
        for c in check_against_baseline(
            _frame(_row("new", "optimal", 1.0, strategy="paging-only")),
            _frame(_row("gone", "optimal", 10.2, strategy="capuchin")),
        )
    }
    assert changes["new"].verdict is Verdict.NEW and changes["gone"].verdict is Verdict.MISSING


@pytest.mark.parametrize(
    "baseline, words",
    [
        (_frame(_row("p", "optimal", None)), "predicted_total_j is missing"),
        (_frame(_row("p", "optimal", 10.0, keep_all=None)), "keep_all_energy_j is missing"),
        (_frame(_row("p", "optimal", 10.0), _row("p", "optimal", 10.0)), "appears twice"),
        (_frame(_row("p", "optimal", 10.0)).drop(columns="keep_all_energy_j"), "no keep_all_energy_j column"),
    ],
)
def test_a_baseline_that_cannot_be_judged_against_is_refused(baseline, words):
    with pytest.raises(UserInputError, match=words):
        check_against_baseline(_frame(_row("p", "optimal", 10.0)), baseline)


# --- the command, on the shipped MCU baseline and broken copies of it ----------------------------


def check(results, baseline=MCU_BASELINE, *options):
    """`poetsim check` in this process (stdout and stderr apart, the exit code as the shell sees it)."""
    return CliRunner().invoke(app, ["check", str(results), "--baseline", str(baseline), *map(str, options)])


def _one_line(result, code, fragment):
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _copy(tmp_path, edit) -> Path:
    frame = pd.read_csv(MCU_BASELINE)
    edit(frame)
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_shipped_baseline_passes_against_itself():
    result = check(MCU_BASELINE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ok: no point regressed")


def test_check_after_compare_compares_like_with_like():
    """The shipped compared study against the sweep-only baseline: one note, no table of new points."""
    result = check(MCU_COMPARED)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ok: no point regressed") and " new " not in result.stdout
    assert result.stderr.strip() == (
        "poetsim: note: not compared: 32 points of checkpoint-sqrt, keep-all, "
        "the baselines `poetsim compare` adds, in one of the two files only"
    )
    reverse = check(MCU_BASELINE, MCU_COMPARED)
    assert reverse.exit_code == 0, reverse.stderr


def test_regressions_exit_1_with_one_line_per_point_naming_its_full_key(tmp_path):
    frame = pd.read_csv(MCU_BASELINE)
    optimal = frame.index[frame["status"] == "optimal"][:2]
    infeasible = frame.index[frame["status"] == "infeasible"][:1]

    def regress(f):
        f.loc[optimal[0], "status"] = "feasible"
        f.loc[optimal[1], "predicted_total_j"] = 0.0
        f.loc[infeasible[0], "status"] = "failed"

    result = check(_copy(tmp_path, regress))
    assert result.exit_code == 1
    regressed = [line for line in result.stderr.splitlines() if line.startswith("poetsim: regressed: ")]
    assert len(regressed) == 3
    for index in (*optimal, *infeasible):
        assert any(f"regressed: {frame.loc[index, 'point_key']}: " in line for line in regressed)
    assert result.stderr.splitlines()[-1].startswith("poetsim: error: 3 of 48 points regressed")

    as_json = check(tmp_path / "runs.csv", MCU_BASELINE, "--json")
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert document["failing"] == 3 and {c["verdict"] for c in document["changes"] if c["fails"]} == {
        "lost-proof",
        "bad-figure",
        "failed",
    }


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (
            lambda f: f.__setitem__("predicted_total_j", f["predicted_total_j"].astype(object).where(f.index != 0, "abc")),
            "line 2: column predicted_total_j: could not convert string to float: 'abc'",
        ),
        (
            lambda f: f.__setitem__("status", f["status"].where(f.index != 3, "optimall")),
            "line 5: column status: unknown status 'optimall'",
        ),
        (lambda f: f.pop("status"), "missing columns status"),
    ],
)
def test_a_malformed_results_file_exits_2_in_one_line(tmp_path, edit, fragment):
    _one_line(check(_copy(tmp_path, edit)), 2, fragment)


def test_a_duplicated_row_exits_2(tmp_path):
    path = tmp_path / "runs.csv"
    lines = MCU_BASELINE.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[5:6]))
    _one_line(check(path), 2, "is on lines 6 and 50")


def test_a_blank_energy_in_the_baseline_exits_2_and_in_the_results_fails(tmp_path):
    def first_optimal(f):
        return f.index[f["status"] == "optimal"][0]

    blank = _copy(
        tmp_path, lambda f: f.__setitem__("predicted_total_j", f["predicted_total_j"].where(f.index != first_optimal(f)))
    )
    _one_line(check(MCU_BASELINE, blank), 2, "predicted_total_j is missing for status optimal")
    result = check(blank)
    assert result.exit_code == 1 and "energy missing for status optimal" in result.stderr


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"", b"just some words\n", b"point_key,status\n"])
def test_not_a_results_csv_exits_2_in_one_line(tmp_path, content):
    path = tmp_path / "runs.csv"
    path.write_bytes(content)
    _one_line(check(path), 2, str(path))


def test_a_device_or_a_folder_without_runs_csv_exits_2(tmp_path):
    _one_line(check("/dev/zero"), 2, "not a regular file")
    _one_line(check(tmp_path), 2, "no such results file")


def test_load_results_still_gives_pandas_types():
    frame = load_results(MCU_BASELINE)
    assert frame["predicted_total_j"].dtype == float and len(frame) == 48
