"""The closed loop: every executed point matches its prediction in peak and traffic, bitwise gradients."""

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch import models  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.pytorch.validate import Validation, validate_run, write_validation  # noqa: E402


@pytest.fixture(scope="module")
def validation(tmp_path_factory):
    """The tiny CNN at 100 % and 60 % of keep-all, three strategies, on the rpi4 profile, two timed rounds."""
    torch.manual_seed(0)
    tiny = capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")
    return validate_run(
        tiny,
        load_platform("rpi4"),
        rams=("100%", "60%"),
        strategies=("keep-all", "checkpoint-sqrt", "hybrid"),
        time_limit_s=5,
        swap_dir=tmp_path_factory.mktemp("swap"),
        threads=1,
        repeats=2,
    )


def test_every_executed_point_holds_the_predicted_peak_and_moves_the_predicted_bytes(validation):
    executed = [row for row in validation.rows if row.measured_runtime_s is not None]
    assert len(executed) >= 4
    for row in executed:
        assert row.gradients_equal and row.peak_equal and row.within_budget, row
        assert (row.measured_bytes_written, row.measured_bytes_read) == (row.predicted_bytes_written, row.predicted_bytes_read)


def test_measured_time_is_the_fastest_timed_run_with_median_and_spread_beside_it(validation):
    for row in (r for r in validation.rows if r.measured_runtime_s is not None):
        assert row.timed_runs == 2
        assert 0 < row.measured_runtime_s <= row.measured_median_s
        # two runs: their median is their mean, and the spread is how far the slower one is above the faster
        slower = 2 * row.measured_median_s - row.measured_runtime_s
        assert row.measured_spread_pct == pytest.approx(100 * (slower / row.measured_runtime_s - 1))
        assert row.runtime_difference_pct == pytest.approx(100 * (row.measured_runtime_s / row.predicted_runtime_s - 1))


def test_points_without_a_schedule_are_rows_with_their_status(validation):
    """Keep-all does not fit 60 %: its row says so and nothing runs."""
    row = next(r for r in validation.rows if r.strategy == "keep-all" and r.ram == "60%")
    assert row.status == "over-budget" and row.measured_runtime_s is None


def test_results_are_written_as_json_csv_and_an_offline_chart(validation, tmp_path):
    paths = write_validation(validation, tmp_path)
    assert {p.name for p in paths} == {"result.json", "validation.csv", "validation.html", "validation.png", "validation.svg"}
    data = json.loads((tmp_path / "result.json").read_text())
    assert len(data["rows"]) == 6 and data["timing"] == "overlap"
    html = (tmp_path / "validation.html").read_text()
    assert "vega" in html and '<script src="http' not in html
    assert f"<h1>{validation.graph_name}: prediction against measurement</h1>" in html
    ran = [r for r in validation.rows if r.measured_runtime_s is not None]
    assert f"of {len(ran)} measured step times are within 15 % of the prediction" in html
    assert Validation.from_dict(data) == validation  # result.json reads back as it was written
    rows = html.split("<table>")[1].split("</table>")[0]
    assert rows.count("<tr>") == 1 + len(validation.rows) and "bitwise equal" in rows and "Scenario: " in html


def test_a_validation_where_nothing_ran_has_a_page_that_says_so_and_no_chart(validation, tmp_path):
    nothing = dataclasses.replace(validation, rows=tuple(r for r in validation.rows if r.measured_runtime_s is None))
    paths = write_validation(nothing, tmp_path)
    assert {p.name for p in paths} == {"result.json", "validation.csv", "validation.html"}
    html = (tmp_path / "validation.html").read_text()
    assert "No schedule ran" in html and "over-budget" in html and "chart-validation" not in html


def test_recalibrated_predictions_use_rates_measured_in_the_timed_rounds(tmp_path):
    """Recalibrated predictions use compute rates measured in the timed rounds.

    With `recalibrate`, the profile's compute rates come from keep-all runs of the rounds, and
    every prediction is costed on that profile (keep-all: one plain pass at the new rates).
    """
    from poetsim.schedule.costs import node_costs

    torch.manual_seed(0)
    tiny = capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")
    rpi4 = load_platform("rpi4")
    result = validate_run(
        tiny,
        rpi4,
        rams=("100%",),
        strategies=("keep-all", "checkpoint-sqrt"),
        time_limit_s=5,
        swap_dir=tmp_path,
        threads=1,
        repeats=2,
        recalibrate=True,
    )
    profile = result.profile
    assert profile is not None and profile.compute.op_flops_per_s != rpi4.compute.op_flops_per_s
    assert profile.storage == rpi4.storage
    assert "validate-run" in profile.sources["compute.flops_per_s"]
    keep_all = next(row for row in result.rows if row.strategy == "keep-all")
    assert keep_all.predicted_runtime_s == pytest.approx(node_costs(tiny.graph, profile).plain_runtime_s)
    assert keep_all.predicted_runtime_s != pytest.approx(node_costs(tiny.graph, rpi4).plain_runtime_s)
    assert "profile" not in result.to_dict()


def test_a_strategy_that_does_not_apply_to_the_graph_is_skipped_in_one_row(tmp_path):
    """A strategy that does not apply to the graph is skipped in one row.

    POFO applies to chains only; the tiny CNN's residual block is no chain: POFO is skipped
    once, with one progress line saying why, and the other strategies run at every budget.
    """
    torch.manual_seed(0)
    tiny = capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")
    lines: list[str] = []
    result = validate_run(
        tiny,
        load_platform("rpi4"),
        rams=("100%", "60%"),
        strategies=("pofo", "keep-all"),
        swap_dir=tmp_path,
        threads=1,
        repeats=1,
        on_progress=lines.append,
    )
    assert [(r.strategy, r.ram, r.status) for r in result.rows] == [
        ("pofo", "100%", "skipped"),
        ("keep-all", "100%", "baseline"),
        ("keep-all", "60%", "over-budget"),
    ]
    assert "not a chain of blocks" in result.rows[0].message
    skipped = [line for line in lines if "skipped" in line]
    assert len(skipped) == 1 and "pofo" in skipped[0] and "not a chain" in skipped[0]


def test_a_point_without_a_schedule_says_its_status_once_then_why(tmp_path):
    """`infeasible: RAM budget ...`, not `infeasible infeasible: ...`; `over-budget: peak RAM ...` alike."""
    torch.manual_seed(0)
    tiny = capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")
    lines: list[str] = []
    validate_run(
        tiny,
        load_platform("rpi4"),
        rams=("1000",),
        strategies=("keep-all", "hybrid"),
        swap_dir=tmp_path,
        threads=1,
        repeats=1,
        on_progress=lines.append,
    )
    said = {line.split()[0]: line.split(": ", 1)[1] for line in lines if line.strip().startswith(("keep-all", "hybrid"))}
    assert said["keep-all"].startswith("over-budget: peak RAM"), said
    assert said["hybrid"].startswith("infeasible: RAM budget 1,000 bytes is below"), said


def test_a_run_with_no_schedule_to_time_says_so_and_times_nothing(tmp_path):
    """At a budget nothing fits, validate-run reports the points and says that there was nothing to time."""
    torch.manual_seed(0)
    tiny = capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")
    said: list[str] = []
    result = validate_run(
        tiny,
        load_platform("rpi4"),
        rams=("1KiB",),
        strategies=("keep-all", "hybrid"),
        effort=0.5,
        swap_dir=tmp_path,
        threads=1,
        repeats=2,
        on_progress=said.append,
    )
    assert all(row.measured_runtime_s is None for row in result.rows)
    assert said[-1] == "no schedule to time: every point is infeasible, over its budget or skipped"
    assert not any("timed round" in line for line in said)


def test_the_validation_chart_stacks_its_panels_where_the_page_is_narrow(validation):
    """Side by side the three panels need WIDE_PX; a phone gets them one above another, legends below."""
    from poetsim.report.validation import WIDE_PX, validation_chart

    wide = validation_chart(validation, footer="").to_dict(validate=False)
    narrow = validation_chart(validation, footer="", stacked=True).to_dict(validate=False)
    assert len(wide["vconcat"][0]["hconcat"]) == 3 and len(narrow["vconcat"][0]["vconcat"]) == 3
    assert narrow["config"]["legend"]["orient"] == "bottom" and WIDE_PX > 3 * 300
