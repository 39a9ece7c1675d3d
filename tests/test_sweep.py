"""Sweeps: every point a row, rows kept across a stop, exact resume, Dask, compare/report/check."""

import contextlib
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from poetsim.errors import UserInputError
from poetsim.inputs.scenario import load_scenario
from poetsim.runs import COLUMNS, RunsFile
from poetsim.sweeps.runner import POINTS_DIR, point_slug, run_sweep, twin_points

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"


def small_scenario(tmp_path, **changes):
    """The MCU scenario cut to one platform and two RAM budgets: 12 points, about a second."""
    text = (
        MCU.read_text()
        .replace("platform: [mkr1000, nrf52840]", "platform: nrf52840")
        .replace("ram: [100%, 85%, 70%, 60%]", "ram: [100%, 70%]")
    )
    for old, new in changes.items():
        text = text.replace(old, new)
    path = tmp_path / "small.yaml"
    path.write_text(text)
    return load_scenario(path)


def read_rows(directory: Path) -> pd.DataFrame:
    return pd.read_csv(directory / "runs.csv")


#: The MLP on the Pi with its page cache on and off: 18 points, about three seconds.
TWINS = """name: twins
model: mlp
batch_size: 2
platform: [rpi4, rpi4-nocache]
budgets:
  ram: [100%, 70%, 60%]
  runtime: [1.5x]
strategies: [hybrid, recompute-only, paging-only]
time_limit_s: 10
"""
LEADER, FOLLOWER = "mlp|rpi4|70%|1.5x|recompute-only", "mlp|rpi4-nocache|70%|1.5x|recompute-only"


def twins_scenario(tmp_path):
    path = tmp_path / "twins.yaml"
    path.write_text(TWINS)
    return load_scenario(path)


def test_every_point_is_a_row_with_its_status(tmp_path):
    scenario = small_scenario(tmp_path)
    frame = read_rows(run_sweep(scenario, tmp_path / "out", jobs=2).parent)
    assert sorted(frame["point_key"]) == sorted(p.key for p in scenario.points())
    assert list(frame.columns) == list(COLUMNS)
    assert set(frame["status"]) <= {"optimal", "feasible", "infeasible"}
    assert (frame["status"] == "infeasible").any() and (frame["status"] == "optimal").any()
    solved = frame[frame["status"] == "optimal"]
    assert (solved["predicted_total_j"] >= solved["keep_all_energy_j"] * (1 - 1e-9)).all()
    assert solved["simulated_total_j"].notna().all()
    assert (solved["work"] >= 0).all() and (solved["work"] > 0).any()  # each solve's work units, beside its seconds
    assert all((tmp_path / "out" / "points").iterdir())


def test_a_stopped_sweep_keeps_its_rows_and_resume_runs_exactly_the_rest(tmp_path):
    scenario = small_scenario(tmp_path)
    out = tmp_path / "out"

    def stop_after_five(row, done, total):
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(scenario, out, jobs=1, on_row=stop_after_five)
    assert len(read_rows(out)) == 5
    seen = []
    run_sweep(scenario, out, jobs=1, resume=True, on_row=lambda row, done, total: seen.append(row.point_key))
    frame = read_rows(out)
    assert len(seen) == len(scenario.points()) - 5
    assert sorted(frame["point_key"]) == sorted(p.key for p in scenario.points())


def test_a_torn_last_line_is_dropped_and_rerun(tmp_path):
    scenario = small_scenario(tmp_path)
    out = tmp_path / "out"
    run_sweep(scenario, out, jobs=1)
    runs = out / "runs.csv"
    lines = runs.read_text().splitlines(keepends=True)
    runs.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    assert len(RunsFile(runs).done_keys()) == len(scenario.points()) - 1
    run_sweep(scenario, out, jobs=1, resume=True)
    assert sorted(read_rows(out)["point_key"]) == sorted(p.key for p in scenario.points())


def test_an_existing_sweep_needs_resume(tmp_path):
    scenario = small_scenario(tmp_path)
    run_sweep(scenario, tmp_path / "out", jobs=1)
    with pytest.raises(Exception, match="pass --resume"):
        run_sweep(scenario, tmp_path / "out", jobs=1)


def test_a_resume_may_grow_the_grid_but_not_drop_from_it_or_change_what_a_row_means(tmp_path):
    """A resume into a folder of another scenario's rows is refused, naming the field; a larger grid runs only what it adds."""
    out = tmp_path / "out"
    run_sweep(small_scenario(tmp_path), out, jobs=1)
    before = read_rows(out)
    for changes, message in [
        ({"ram: [100%, 70%]": "ram: [100%, 60%]"}, "budgets.ram no longer has 70%"),
        ({"effort: 30": "effort: 20"}, "effort was 30.0, now 20.0"),
    ]:
        with pytest.raises(UserInputError, match=message):
            run_sweep(small_scenario(tmp_path, **changes), out, jobs=1, resume=True)
    assert read_rows(out).equals(before)
    seen = []
    grown = small_scenario(tmp_path, **{"ram: [100%, 70%]": "ram: [100%, 70%, 60%]"})
    run_sweep(grown, out, jobs=1, resume=True, on_row=lambda row, done, total: seen.append(row.point_key))
    assert seen and all("|60%|" in key for key in seen)
    assert sorted(read_rows(out)["point_key"]) == sorted(p.key for p in grown.points())


def test_a_resume_where_no_point_was_swept_yet_takes_the_scenario_as_it_is(tmp_path):
    """A sweep stopped before its first row (a cluster without workers) left its scenario copy alone: nothing to keep."""
    from poetsim.sweeps.folder import save_scenario_copy

    out = tmp_path / "out"
    out.mkdir()
    save_scenario_copy(small_scenario(tmp_path), out)
    changed = small_scenario(tmp_path, **{"effort: 30": "effort: 20"})
    run_sweep(changed, out, jobs=1, resume=True)
    assert sorted(read_rows(out)["point_key"]) == sorted(p.key for p in changed.points())


def test_a_folder_compare_has_completed_resumes_with_its_own_scenario_and_compares_at_any_effort(tmp_path):
    """Compare adds keep-all and checkpoint-sqrt to the folder's scenario: a resume without them is not a smaller grid.

    With nothing left to solve, compare --effort leaves the folder's effort as its rows were made.
    """
    from poetsim import api

    out = tmp_path / "out"
    scenario = small_scenario(tmp_path, **{"strategies: [hybrid, recompute-only, paging-only]": "strategies: [hybrid]"})
    run_sweep(scenario, out, jobs=1)
    api.compare(out)
    rows = len(read_rows(out))
    run_sweep(scenario, out, jobs=1, resume=True)
    api.compare(out, effort=scenario.effort / 2)
    assert len(read_rows(out)) == rows
    assert load_scenario(out / "scenario.yaml").effort == scenario.effort


def test_a_failing_point_is_a_row_not_a_crash(tmp_path):
    graph = tmp_path / "mlp.json"
    subprocess.run(
        [sys.executable, "-m", "poetsim", "graph", "mlp", "--batch-size", "2", "--save", graph], check=True, capture_output=True
    )
    scenario = small_scenario(tmp_path, **{"model: mlp": f"model: [mlp, {graph}]"})
    graph.write_text("{broken")  # valid when the scenario was loaded, broken when its points run
    frame = read_rows(run_sweep(scenario, tmp_path / "out", jobs=2).parent)
    failed = frame[frame["model"].str.startswith("mlp.json@")]
    assert len(failed) == len(scenario.points()) // 2
    assert (failed["status"] == "failed").all()
    assert failed["message"].str.contains("not a JSON file").all()
    assert (frame[frame["model"] == "mlp"]["status"] != "failed").all()


def test_a_strategy_that_does_not_apply_to_a_graph_is_a_row_saying_why_and_no_failure(tmp_path):
    scenario_file = tmp_path / "pofo.yaml"
    scenario_file.write_text(
        "name: pofo\n"
        f"model: [{ROOT / 'scenarios/graphs/outside/densenet_bc.json'}, mlp]\n"
        "batch_size: 2\nplatform: rpi4\nbudgets:\n  ram: [50%]\n  runtime: [1.5x]\nstrategies: [pofo]\n"
    )
    frame = read_rows(run_sweep(load_scenario(scenario_file), tmp_path / "out", jobs=1).parent)
    refused = frame[frame["model_name"] == "densenet_bc"].iloc[0]
    assert refused["status"] == "not-applicable" and refused["timing"] == "overlap"
    assert "is not a chain of blocks" in refused["message"]
    assert frame[frame["model_name"] == "mlp"].iloc[0]["status"] in ("baseline", "over-budget")
    assert RunsFile(tmp_path / "out" / "runs.csv").done_keys() == set(frame["point_key"])


def test_dask_local_cluster_gives_the_same_rows(tmp_path):
    scenario = small_scenario(tmp_path)
    by_process = read_rows(run_sweep(scenario, tmp_path / "process", jobs=2).parent).set_index("point_key").sort_index()
    by_dask = read_rows(run_sweep(scenario, tmp_path / "dask", jobs=2, executor="dask").parent)
    by_dask = by_dask.set_index("point_key").sort_index()
    assert list(by_dask.index) == list(by_process.index)
    assert list(by_dask["status"]) == list(by_process["status"])
    pd.testing.assert_series_equal(by_dask["predicted_total_j"], by_process["predicted_total_j"], rtol=1e-6)


def test_a_local_dask_sweep_says_nothing_of_a_taken_dashboard_port(tmp_path):
    small_scenario(tmp_path)  # writes small.yaml
    with socket.socket() as holder:
        with contextlib.suppress(OSError):  # taken already: by another cluster, as this test wants
            holder.bind(("127.0.0.1", 8787))
            holder.listen()
        swept = poetsim("sweep", tmp_path / "small.yaml", "--out", tmp_path / "out", "-j", "2", "--executor", "dask")
    assert swept.returncode == 0, swept.stderr
    assert "already in use" not in swept.stderr and "Warning" not in swept.stderr


def poetsim(*args):
    return subprocess.run([sys.executable, "-m", "poetsim", *map(str, args)], capture_output=True, text=True, timeout=600)


def test_cli_sweep_compare_report_and_check(tmp_path):
    scenario = tmp_path / "small.yaml"
    small_scenario(tmp_path)  # writes small.yaml
    out = tmp_path / "results"
    swept = poetsim("sweep", scenario, "--out", out, "-j", "2")
    assert swept.returncode == 0, swept.stderr
    assert "12 points" in swept.stdout

    compared = poetsim("compare", out)
    assert compared.returncode == 0, compared.stderr
    table = pd.read_csv(out / "compare.csv")
    assert {"keep-all", "checkpoint-sqrt", "hybrid", "recompute-only", "paging-only"} <= set(table.columns)
    assert list(table["ram"]) == ["100%", "70%", "100%", "70%"]  # per runtime, RAM sorted as a number
    text = (out / "compare.txt").read_text()
    assert "…" not in compared.stdout and "…" not in text  # nothing cut, in a pipe or a file
    assert all(cell in compared.stdout for cell in table["hybrid"].astype(str))

    reported = poetsim("report", out)
    assert reported.returncode == 0, reported.stderr
    assert (out / "report.html").stat().st_size > 10_000

    baseline = tmp_path / "baseline.csv"
    shutil.copy(out / "runs.csv", baseline)
    same = poetsim("check", out, "--baseline", baseline)
    assert same.returncode == 0, same.stdout + same.stderr

    cheaper = pd.read_csv(baseline)
    solved = cheaper["predicted_total_j"].notna()
    cheaper.loc[solved, "predicted_total_j"] *= 0.9  # the baseline was 10 % better: now we are worse
    cheaper.to_csv(baseline, index=False)
    worse = poetsim("check", out, "--baseline", baseline)
    assert worse.returncode == 1
    assert "regressed" in worse.stderr and "worse" in worse.stdout


def test_recompute_only_on_the_pi_with_and_without_page_cache_is_one_problem():
    twins = twin_points(load_scenario(ROOT / "scenarios" / "resnet18.yaml"))
    assert len(twins) == 12  # 6 RAM budgets x 2 deadlines
    for follower, leader in twins.items():
        model, platform, ram, runtime, strategy = follower.split("|")
        assert (platform, strategy) == ("rpi4-nocache", "recompute-only")
        assert leader == "|".join((model, "rpi4", ram, runtime, strategy))


def test_a_twin_takes_the_earlier_points_answer_checked_and_simulated_on_its_own_platform(tmp_path):
    scenario = twins_scenario(tmp_path)
    out = tmp_path / "out"
    frame = read_rows(run_sweep(scenario, out, jobs=2).parent).set_index("point_key")
    leader, follower = frame.loc[LEADER], frame.loc[FOLLOWER]
    assert leader["status"] == follower["status"] == "optimal"
    assert follower["predicted_total_j"] == pytest.approx(leader["predicted_total_j"], rel=1e-12)
    assert follower["bound_j"] == leader["bound_j"] and follower["solve_s"] == follower["work"] == 0
    assert LEADER in follower["message"] and "one solve for both" in follower["message"]
    assert follower["platform"] == "rpi4-nocache" and follower["simulated_total_j"] > 0
    points = {point.key: point for point in scenario.points()}
    assert (out / POINTS_DIR / point_slug(points[FOLLOWER]) / "schedule.json").exists()
    # A proof of infeasibility is shared too; strategies that page see the storage and solve alone.
    assert frame.loc["mlp|rpi4-nocache|60%|1.5x|recompute-only", "status"] == "infeasible"
    alone = frame[frame.index.str.contains("rpi4-nocache") & ~frame.index.str.endswith("recompute-only")]
    assert len(alone) == 6 and not alone["message"].str.contains("one solve for both").any()


def test_a_resumed_sweep_takes_a_twins_answer_from_runs_csv(tmp_path):
    scenario = twins_scenario(tmp_path)
    out = tmp_path / "out"
    first = read_rows(run_sweep(scenario, out, jobs=1).parent).set_index("point_key")
    runs = out / "runs.csv"
    runs.write_text(
        "".join(line for line in runs.read_text().splitlines(keepends=True) if not line.startswith(f"twins,{FOLLOWER},"))
    )
    assert FOLLOWER not in set(read_rows(out)["point_key"])
    run_sweep(scenario, out, jobs=1, resume=True)
    again = read_rows(out).set_index("point_key").loc[FOLLOWER]
    assert again["predicted_total_j"] == first.loc[FOLLOWER, "predicted_total_j"]
    assert LEADER in again["message"] and again["solve_s"] == 0
