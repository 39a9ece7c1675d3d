"""The device profile and study.

Measured profiles that match the emulated cores, predictions within 10 % of the device, device
columns in runs.csv, compare and the report.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from poetsim import strategies
from poetsim.analysis.results import load_results
from poetsim.api import read_rows
from poetsim.device.profile import PROBES, fit, measured_name, profile_device
from poetsim.device.run import run_on_device
from poetsim.device.study import device_table
from poetsim.inputs.profiles import load_platform
from poetsim.pipeline import run_strategy
from poetsim.runs import COLUMNS, RunsFile
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ROOT / "scenarios" / "platforms"
STUDY = ROOT / "results" / "device"


def poetsim(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "poetsim", *map(str, args)], capture_output=True, text=True, cwd=cwd or ROOT, timeout=900
    )


@pytest.mark.parametrize("name", ["nrf52840", "mkr1000"])
def test_the_shipped_measured_profiles_are_what_the_emulated_cores_measure(name, tmp_path):
    """Instruction counts are deterministic, so measuring again gives the shipped figures (same toolchain)."""
    measured, _ = profile_device(load_platform(name), f"{name}-qemu", tmp_path)
    shipped = load_platform(PLATFORMS / f"{name}-qemu.yaml")
    assert shipped.compute.op_flops_per_s == pytest.approx(measured.compute.op_flops_per_s, rel=1e-6), (
        "the runtime or the toolchain changed: run `poetsim device profile` again (docs/device.md)"
    )
    assert shipped.compute.op_call_s == pytest.approx(measured.compute.op_call_s, rel=1e-6, abs=1e-12)
    assert shipped.compute.power_w == load_platform(name).compute.power_w  # powers kept from the datasheet
    assert shipped.storage == load_platform(name).storage
    assert all(f"compute.op_flops_per_s.{op}" in shipped.sources for op in shipped.compute.op_flops_per_s)


def test_measuring_a_measured_profile_again_keeps_its_name_title_and_notes(tmp_path):
    shipped = load_platform(PLATFORMS / "nrf52840-qemu.yaml")
    again, _ = profile_device(shipped, measured_name(shipped), tmp_path)
    assert (again.name, again.title, again.notes) == (shipped.name, shipped.title, shipped.notes)
    first, _ = profile_device(load_platform("nrf52840"), measured_name(load_platform("nrf52840")), tmp_path)
    assert first.name == "nrf52840-qemu" and first.title == shipped.title and first.notes == shipped.notes


def test_the_fit_recovers_a_cost_it_was_given():
    """Samples made from a known fixed cost and rate are fitted back to them."""
    from poetsim.device.profile import Sample

    samples = [Sample("p", f"n{i}", "conv", flops, 2e-5 + flops / 1.5e7) for i, flops in enumerate((1e3, 1e4, 1e5, 1e6))]
    found = fit(samples)["conv"]
    assert found.call_s == pytest.approx(2e-5) and found.flops_per_s == pytest.approx(1.5e7)
    assert found.worst_error < 1e-9
    assert len(PROBES) == 9


@pytest.mark.parametrize("model", ["mcu_cnn", "mcu_dscnn"])
@pytest.mark.parametrize("platform", ["nrf52840-qemu.yaml", "mkr1000-qemu.yaml"])
def test_a_cnn_schedule_runs_within_twenty_percent_of_the_measured_profile_s_prediction(model, platform):
    problem = build_problem(model, str(PLATFORMS / platform), parse_ram("28KiB"), 1.5)
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
    assert run.schedule is not None
    result = run_on_device(problem, run.schedule)
    assert result.ok, result.failed
    assert 0.8 <= result.compute_s / result.predicted_compute_s <= 1.2


def test_every_schedule_of_the_shipped_study_ran_as_predicted():
    frame = load_results(STUDY)
    ran = frame[frame["device_ok"].notna()]
    assert len(ran) == int(frame["status"].isin(["optimal", "feasible", "baseline"]).sum()) > 50
    assert ran["device_ok"].astype(str).str.lower().eq("true").all()
    assert (ran["device_peak_ram_bytes"] == ran["predicted_peak_ram_bytes"]).all()
    assert (ran["device_peak_ram_bytes"] <= ran["ram_budget_bytes"]).all()
    assert (ran["device_recomputations"] == ran["predicted_recomputations"]).all()
    assert (ran["device_page_outs"] == ran["predicted_page_outs"]).all()
    ratio = ran["device_compute_s"] / ran["device_predicted_compute_s"]
    assert ratio.between(0.8, 1.2).all(), ratio.describe()
    # Every model, both cores, and schedules that recompute and page.
    assert set(ran["device_target"]) == {"cortex-m4f", "cortex-m0plus"}
    assert set(ran["model"]) == {"mlp", "mcu_cnn", "mcu_dscnn"}
    assert ((ran["device_recomputations"] > 0) & (ran["device_page_outs"] > 0)).any()


def test_the_device_table_is_in_compare_s_order_whatever_order_the_rows_ran_in():
    frame = load_results(STUDY)
    shown = device_table(frame.sample(frac=1.0, random_state=7))
    assert shown.equals(device_table(frame))
    # By model, platform and runtime; the largest RAM budget first; strategies in registry order.
    order = [
        (model, platform, runtime, -(parse_ram(ram).bytes or 0), strategies.rank(strategy))
        for model, platform, runtime, ram, strategy in zip(
            shown["model"], shown["platform"], shown["runtime"], shown["ram"], shown["strategy"]
        )
    ]
    assert order == sorted(order) and len(set(order)) == len(order) > 50


def test_device_sweep_fills_runs_csv_and_compare_and_the_report_show_it(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "small",
                "model": "mcu_cnn",
                "platform": str(PLATFORMS / "mkr1000-qemu.yaml"),
                "budgets": {"ram": ["26KiB", "16KiB"], "runtime": "1.5x"},
                "strategies": ["hybrid"],
            }
        )
    )
    out = tmp_path / "out"
    result = poetsim("device", "sweep", scenario, "--out", out, "--json")
    assert result.returncode == 0, result.stderr
    table = json.loads(result.stdout)
    # The table again (the points are done): bytes and counts whole, seconds to six digits.
    shown = poetsim("device", "sweep", out)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if "hybrid" in line and "26KiB" in line)
    assert re.search(r"│\s+\d{1,3},\d{3}\s+│", row) and not re.search(r"\d\.0\s+│|\d{8,}", row), row
    # Keep-all and checkpoint-sqrt (added by compare) miss the budgets; 16 KiB is below the CNN's minimum.
    assert [(row["strategy"], row["ram"], row["device"]) for row in table] == [("hybrid", "26KiB", "ok")]
    rows = {row.point_key: row for row in read_rows(out / "runs.csv")}
    assert len(rows) == 6  # two budgets, hybrid and compare's two baselines
    hybrid = next(row for row in rows.values() if (row.ram, row.strategy) == ("26KiB", "hybrid"))
    assert hybrid.device_ok and hybrid.device_gradients_equal and hybrid.device_target == "cortex-m0plus"
    assert hybrid.device_peak_ram_bytes == hybrid.predicted_peak_ram_bytes
    assert hybrid.predicted_page_outs is not None
    assert hybrid.device_page_outs == hybrid.predicted_page_outs > 0
    infeasible = next(row for row in rows.values() if (row.ram, row.strategy) == ("16KiB", "hybrid"))
    assert infeasible.device_ok is None  # no schedule, nothing run
    assert "[device ok]" in (out / "compare.txt").read_text()
    assert poetsim("compare", out).returncode == 0
    assert "[device ok]" in (out / "compare.txt").read_text()  # compare again keeps the device columns
    assert poetsim("report", out).returncode == 0
    page = (out / "report.html").read_text()
    assert "Run on the emulated device" in page and "device-runs" in page
    elsewhere = poetsim("device", "sweep", out, "--out", tmp_path / "other")
    assert elsewhere.returncode == 2 and "--out: " in elsewhere.stderr and "rewritten in place" in elsewhere.stderr
    assert elsewhere.stderr.count("\n") == 1 and not (tmp_path / "other").exists()


def test_device_sweep_json_says_on_stderr_which_schedules_it_did_not_run(tmp_path):
    scenario = tmp_path / "pi.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "pi",
                "model": "mlp",
                "platform": "rpi4",
                "budgets": {"ram": "100%", "runtime": "1.5x"},
                "strategies": ["hybrid"],
            }
        )
    )
    result = poetsim("device", "sweep", scenario, "--out", tmp_path / "out", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    assert "3 of 3 schedules not run; first mlp|rpi4|100%|1.5x|" in result.stderr
    assert "platform rpi4 has no 'device' section" in result.stderr


def test_an_older_runs_csv_without_device_columns_loads_and_is_brought_up_to_date(tmp_path):
    shipped = pd.read_csv(ROOT / "results" / "mcu" / "runs.csv")
    shipped.drop(columns=[c for c in shipped.columns if c.startswith("device_")]).to_csv(tmp_path / "runs.csv", index=False)
    header = (tmp_path / "runs.csv").read_text().splitlines()[0].split(",")
    assert "device_ok" not in header
    rows = read_rows(tmp_path / "runs.csv")
    assert rows and all(row.device_ok is None for row in rows)
    assert "device_ok" not in load_results(tmp_path).columns
    RunsFile(tmp_path / "runs.csv").tidy()
    assert tuple((tmp_path / "runs.csv").read_text().splitlines()[0].split(",")) == COLUMNS


@pytest.mark.slow
def test_the_device_study_reproduces_its_shipped_results(tmp_path):
    """`poetsim device sweep scenarios/device.yaml` again: the same schedules, peaks, traffic and instruction times."""
    result = poetsim("device", "sweep", ROOT / "scenarios" / "device.yaml", "--out", tmp_path / "device")
    assert result.returncode == 0, result.stderr
    fresh = load_results(tmp_path / "device").set_index("point_key")
    shipped = load_results(STUDY).set_index("point_key")
    assert set(fresh.index) == set(shipped.index)
    ran = shipped.index[shipped["device_ok"].notna()]
    for column in ("device_peak_ram_bytes", "device_page_out_bytes", "device_page_in_bytes", "device_recomputations"):
        assert (fresh.loc[ran, column] == shipped.loc[ran, column]).all(), column
    assert fresh.loc[ran, "device_compute_s"].to_numpy() == pytest.approx(
        shipped.loc[ran, "device_compute_s"].to_numpy(), rel=1e-9
    )


def test_a_platform_without_a_device_is_left_unrun_saying_why_not_failed(tmp_path):
    """A study on the Pi and the nRF52840: the Pi's rows are not run (one line says why), the nRF's are; exit 0."""
    scenario = tmp_path / "mixed.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "mixed",
                "model": "mlp",
                "batch_size": 2,
                "platform": ["rpi4", "nrf52840"],
                "budgets": {"ram": "100%", "runtime": "1.5x"},
                "strategies": ["hybrid"],
                "effort": 1,
            }
        )
    )
    result = poetsim("device", "sweep", scenario, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "3 of 6 schedules not run; first mlp|rpi4|100%|1.5x|hybrid: platform rpi4 has no 'device' section" in result.stdout
    rows = read_rows(tmp_path / "out" / "runs.csv")
    assert {row.device_ok for row in rows if row.platform == "rpi4"} == {None}
    assert {row.device_ok for row in rows if row.platform == "nrf52840"} == {True}
    assert "device FAILED" not in (tmp_path / "out" / "compare.txt").read_text()


def test_a_saved_schedule_runs_under_its_own_timing_and_a_budget_above_the_board_is_refused(tmp_path):
    """`device run --schedule` checks and runs a compute-only schedule as such; --timing overlap is refused naming it.

    A RAM budget above the platform's RAM is refused from the command line as from a scenario file.
    """
    point = ("--model", "mcu_cnn", "--platform", PLATFORMS / "mkr1000-qemu.yaml", "--runtime", "1.5x")
    solved = poetsim(
        "solve",
        ROOT / "scenarios" / "device.yaml",
        *point,
        "--ram",
        "26KiB",
        "--strategy",
        "hybrid",
        "--timing",
        "compute-only",
        "--effort",
        "2",
        "--out",
        tmp_path / "solved",
    )
    assert solved.returncode == 0, solved.stderr
    saved = tmp_path / "solved" / "schedule.bin"
    ran = poetsim("device", "run", ROOT / "scenarios" / "device.yaml", *point, "--ram", "26KiB", "--schedule", saved, "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["timing"] == "compute-only"
    mismatched = poetsim(
        "device", "run", ROOT / "scenarios" / "device.yaml", *point, "--ram", "26KiB", "--timing", "overlap", "--schedule", saved
    )
    assert mismatched.returncode == 2 and f"{saved} was made for compute-only timing" in mismatched.stderr
    too_big = poetsim("device", "run", ROOT / "scenarios" / "device.yaml", *point, "--ram", "64KiB", "--strategy", "hybrid")
    assert too_big.returncode == 2 and "above the 32,768 bytes of RAM of platform mkr1000-qemu" in too_big.stderr
    assert poetsim("device", "run", ROOT / "scenarios" / "device.yaml", *point, "--seed", "-1").returncode == 2
