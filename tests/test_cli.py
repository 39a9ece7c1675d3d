"""The command line end to end, as a user runs it: real processes, real files, exit codes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"


def poetsim(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "poetsim", *map(str, args)], capture_output=True, text=True, cwd=cwd or ROOT, timeout=600
    )


def assert_one_line_error(result, code, fragment):
    """A user error: the given exit code, one line on stderr naming the problem, no traceback."""
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr


def test_version():
    result = poetsim("--version")
    assert result.returncode == 0
    assert result.stdout.strip().startswith("poetsim 0.")


def test_graph_json_has_numbers_not_strings(tmp_path):
    result = poetsim("graph", "resnet18_cifar", "--batch-size", "2", "--json", "--save", tmp_path / "g.json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["nodes"] == 137
    assert isinstance(summary["keep_all_peak_bytes"], int)
    assert isinstance(summary["forward_flops"], float)
    again = poetsim("graph", tmp_path / "g.json", "--json")
    assert json.loads(again.stdout)["keep_all_peak_bytes"] == summary["keep_all_peak_bytes"]


def test_models_and_platforms_list_everything():
    models, platforms = poetsim("models"), poetsim("platforms")
    assert models.returncode == 0 and platforms.returncode == 0
    for name in (
        "mlp",
        "vgg16",
        "resnet18",
        "resnet18_cifar",
        "resnet50",
        "mobilenet_v2",
        "bert_base",
        "transformer",
        "gpt2_small",
    ):
        assert name in models.stdout
    for name in ("mkr1000", "nrf52840", "rpi4", "rpi4-nocache", "jetson-tx2"):
        assert name in platforms.stdout


def test_the_model_list_shows_every_model_s_size_without_rounding_it_to_zero():
    listed = json.loads(poetsim("models", "--json").stdout)
    table = poetsim("models").stdout
    for model in listed:
        row = next(line for line in table.splitlines() if f" {model['model']} " in line)
        params, mflop = (cell.strip() for cell in row.strip("│ ").split("│")[-2:])
        assert params == f"{model['params']:,}" and model["params"] > 0
        assert float(mflop.replace(",", "")) > 0, row


def test_validate_bad_scenario_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(MCU.read_text().replace("batch_size: 2", "batch_size: -2"))
    assert_one_line_error(poetsim("validate", bad), 2, f"{bad}: batch_size")


def test_graph_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert_one_line_error(poetsim("graph", bad), 2, f"{bad}: not a JSON file")


def test_solve_json_reports_a_checked_schedule(tmp_path):
    result = poetsim(
        "solve",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "70%",
        "--runtime",
        "1.5x",
        "--strategy",
        "hybrid",
        "--json",
        "--out",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)
    assert row["status"] == "optimal"
    assert row["total_energy_j"] == pytest.approx(row["predicted_total_j"])
    assert row["total_energy_j"] > row["keep_all_energy_j"]
    assert row["predicted_peak_ram_bytes"] <= row["ram_budget_bytes"]
    assert row["schedule_bytes"] == (tmp_path / "schedule.bin").stat().st_size
    assert json.loads((tmp_path / "schedule.json").read_text())["format"] == "poetsim-schedule"
    assert row["work"] > 0  # the optimiser's work units, beside its seconds


def test_solve_says_what_its_time_before_the_milp_was_spent_on():
    """The table's solver line says what the time before the MILP was spent on.

    The time before any MILP run holds the covers and plans, not only the model's build (a point
    proven by the covers builds no model at all).
    """
    result = poetsim("solve", MCU, "--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--strategy", "hybrid")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "solver" in line)
    assert "s before any MILP run (covers, plans, the model's build)" in line
    assert "s in MILP runs" in line


def test_solve_writes_the_milp_as_an_lp_file_on_request(tmp_path):
    lp = tmp_path / "model.lp"
    result = poetsim(
        "solve",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "85%",
        "--runtime",
        "1.5x",
        "--strategy",
        "recompute-only",
        "--lp",
        lp,
        "--json",
    )
    assert result.returncode == 0, result.stderr
    text = lp.read_text()
    assert "overhead:" in text and "inputs_present" in text
    assert "M_in(" not in text  # recompute-only has no paging variables
    baseline = poetsim(
        "solve", MCU, "--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--strategy", "keep-all", "--lp", lp
    )
    assert_one_line_error(baseline, 2, "--lp: keep-all is a baseline")


def test_solve_starts_from_a_saved_schedule_and_refuses_one_of_another_graph(tmp_path):
    single = poetsim(
        "solve",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "70%",
        "--runtime",
        "1.5x",
        "--strategy",
        "recompute-only",
        "--json",
        "--out",
        tmp_path / "single",
    )
    assert single.returncode == 0, single.stderr
    start = tmp_path / "single" / "schedule.json"
    hybrid = poetsim(
        "solve",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "70%",
        "--runtime",
        "1.5x",
        "--strategy",
        "hybrid",
        "--start",
        start,
        "--json",
    )
    assert hybrid.returncode == 0, hybrid.stderr
    assert json.loads(hybrid.stdout)["total_energy_j"] <= json.loads(single.stdout)["total_energy_j"] * (1 + 1e-9)
    other = poetsim(
        "solve",
        MCU,
        "--platform",
        "rpi4",
        "--model",
        "resnet18_cifar",
        "--ram",
        "70%",
        "--runtime",
        "1.5x",
        "--strategy",
        "hybrid",
        "--start",
        start,
    )
    assert_one_line_error(other, 2, f"--start {start}: the schedule is for")


def test_solve_infeasible_exits_3_with_one_line():
    result = poetsim("solve", MCU, "--platform", "mkr1000", "--ram", "100B", "--runtime", "1x", "--strategy", "hybrid")
    assert_one_line_error(result, 3, "infeasible")


@pytest.mark.parametrize(
    "option,value,fragment",
    [
        ("--strategy", "greedy", "--strategy: unknown strategy 'greedy'"),
        ("--ram", "lots", "--ram:"),
        ("--timing", "exact", "--timing: unknown timing model 'exact'"),
        ("--solver", "cplex", "cplex"),
    ],
)
def test_solve_bad_options_are_one_line(option, value, fragment):
    result = poetsim("solve", MCU, "--platform", "nrf52840", option, value)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert fragment in result.stderr


def test_simulate_writes_trace_summary_and_charts(tmp_path):
    result = poetsim(
        "simulate",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "85%",
        "--runtime",
        "1.5x",
        "--strategy",
        "hybrid",
        "--json",
        "--out",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert set(summary["predicted"]) == set(summary["simulated"]) == {"makespan_s", "peak_ram_bytes", "energy_j"}
    assert json.loads((tmp_path / "comparison.json").read_text())["predicted"] == summary["predicted"]
    assert "figures" in json.loads((tmp_path / "summary.json").read_text())
    trace = pd.read_csv(tmp_path / "trace.csv")
    assert {"time_s", "resource", "node", "kind", "bytes"} <= set(trace.columns)
    for name in ("run.html", "schedule.png", "schedule.svg", "timeline.png", "timeline.svg"):
        assert (tmp_path / name).stat().st_size > 1000


def test_simulate_writes_under_build_by_default(tmp_path):
    result = poetsim(
        "simulate",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "85%",
        "--runtime",
        "1.5x",
        "--strategy",
        "hybrid",
        "--no-charts",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    written = list((tmp_path / "build" / "mcu" / "simulate").glob("*/trace.csv"))
    assert [p.parent.name for p in written] == ["mlp_nrf52840_ram85pct_rt1.5x_hybrid_overlap_barrier"]


def test_simulate_replays_a_saved_schedule_json_or_bin_with_its_own_timing_and_no_strategy(tmp_path):
    solved = poetsim(
        "solve",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "85%",
        "--runtime",
        "1.5x",
        "--strategy",
        "recompute-only",
        "--out",
        tmp_path / "solve",
    )
    assert solved.returncode == 0, solved.stderr
    result = poetsim(
        "simulate",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "85%",
        "--runtime",
        "1.5x",
        "--schedule",
        tmp_path / "solve" / "schedule.json",
        "--json",
        "--no-charts",
        "--out",
        tmp_path / "sim",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["predicted"]["energy_j"] > 0
    point = ("--platform", "nrf52840", "--runtime", "1.5x", "--no-charts", "--out", tmp_path / "sim")
    shown = poetsim("simulate", MCU, *point, "--ram", "85%", "--schedule", tmp_path / "solve" / "schedule.json")
    assert shown.returncode == 0, shown.stderr
    assert "status: a saved schedule (loaded from" in shown.stdout and "schedule.json: prediction vs simulation" in shown.stdout
    tighter = poetsim("simulate", MCU, *point, "--ram", "60%", "--schedule", tmp_path / "solve" / "schedule.json")
    assert_one_line_error(tighter, 6, "schedule.json: over budget: peak RAM")
    binary = poetsim("simulate", MCU, *point, "--ram", "85%", "--schedule", tmp_path / "solve" / "schedule.bin", "--json")
    assert binary.returncode == 0, binary.stderr
    assert json.loads(binary.stdout)["predicted"] == json.loads(result.stdout)["predicted"]
    assert (json.loads(binary.stdout)["strategy"], json.loads(binary.stdout)["status"]) == ("saved", "checked")
    saved = tmp_path / "solve" / "schedule.json"
    other_timing = poetsim("simulate", MCU, *point, "--ram", "85%", "--schedule", saved, "--timing", "compute-only")
    assert_one_line_error(other_timing, 2, "--timing: " + str(saved) + " was made for overlap timing, not compute-only")
    same_timing = poetsim("simulate", MCU, *point, "--ram", "85%", "--schedule", saved, "--timing", "overlap")
    assert same_timing.returncode == 0, same_timing.stderr
    with_strategy = poetsim("simulate", MCU, *point, "--ram", "85%", "--schedule", saved, "--strategy", "hybrid")
    assert_one_line_error(with_strategy, 2, "--strategy: a saved schedule is replayed as it is")


def test_solve_json_names_its_scenario_and_point_as_a_sweep_row_does():
    result = poetsim(
        "solve", MCU, "--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--strategy", "recompute-only", "--json"
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)
    assert (row["scenario"], row["point_key"]) == ("mcu", "mlp|nrf52840|85%|1.5x|recompute-only")


def test_a_bare_ram_below_one_is_refused_with_a_hint():
    result = poetsim("solve", MCU, "--platform", "nrf52840", "--ram", "0.5", "--runtime", "1.5x", "--strategy", "hybrid")
    assert_one_line_error(result, 2, "did you mean 50%?")


def test_bad_output_paths_fail_before_any_solve(tmp_path):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    result = poetsim("solve", MCU, "--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--out", a_file)
    assert_one_line_error(result, 2, "--out: ")
    result = poetsim("solve", MCU, "--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--lp", a_file / "model.lp")
    assert_one_line_error(result, 2, f"--lp: {a_file} is a file, not a folder")


def test_json_on_every_listing_command(tmp_path):
    assert {m["model"] for m in json.loads(poetsim("models", "--json").stdout)} >= {"mlp", "resnet18_cifar"}
    assert {p["name"] for p in json.loads(poetsim("platforms", "--json").stdout)} >= {"rpi4", "nrf52840"}
    checked = json.loads(poetsim("validate", MCU, "--json").stdout)
    assert checked == [{"path": str(MCU), "ok": True, "name": "mcu", "points": 48}]


def test_batch_size_overrides_the_scenario_and_warns_for_graph_files(tmp_path):
    small = json.loads(
        poetsim(
            "solve", MCU, "--platform", "nrf52840", "--ram", "100%", "--runtime", "1.5x", "--strategy", "keep-all", "--json"
        ).stdout
    )
    large = json.loads(
        poetsim(
            "solve",
            MCU,
            "--platform",
            "nrf52840",
            "--ram",
            "100%",
            "--runtime",
            "1.5x",
            "--strategy",
            "keep-all",
            "--batch-size",
            "4",
            "--json",
        ).stdout
    )
    assert large["keep_all_peak_bytes"] > small["keep_all_peak_bytes"]
    graph = tmp_path / "mlp.json"
    assert poetsim("graph", "mlp", "--batch-size", "2", "--save", graph).returncode == 0
    noted = poetsim(
        "solve",
        MCU,
        "--model",
        graph,
        "--platform",
        "nrf52840",
        "--ram",
        "100%",
        "--runtime",
        "1.5x",
        "--strategy",
        "keep-all",
        "--batch-size",
        "4",
        "--json",
    )
    assert noted.returncode == 0, noted.stderr
    assert "does not apply to graph file mlp.json" in noted.stderr


def test_the_first_sweep_a_user_types_writes_under_build(tmp_path):
    scenario = tmp_path / "scenarios" / "tiny.yaml"
    scenario.parent.mkdir()
    scenario.write_text(
        MCU.read_text()
        .replace("platform: [mkr1000, nrf52840]", "platform: nrf52840")
        .replace("ram: [100%, 85%, 70%, 60%]", "ram: 70%")
        .replace("runtime: [1.0x, 1.5x]", "runtime: 1.5x")
    )
    result = poetsim("sweep", scenario, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["points"] == 3 and summary["runs_csv"] == str(Path("build") / "mcu" / "runs.csv")
    assert (tmp_path / "build" / "mcu" / "scenario.yaml").is_file()


def test_a_resumed_sweep_counts_its_points_not_the_rows_compare_added(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(MCU.read_text().replace("ram: [100%, 85%, 70%, 60%]", "ram: 70%"))
    out = tmp_path / "out"
    assert poetsim("sweep", scenario, "--out", out).returncode == 0
    assert poetsim("compare", out).returncode == 0  # adds keep-all and checkpoint-sqrt rows to runs.csv
    summary = json.loads(poetsim("sweep", scenario, "--out", out, "--resume", "--json").stdout)
    assert summary["points"] == 12 and sum(summary["counts"].values()) == 12 and summary["other_rows"] == 8
    line = poetsim("sweep", scenario, "--out", out, "--resume").stdout.strip()
    assert line.startswith("12 points in ") and line.endswith("; it also holds 8 rows of compare's baselines"), line


def test_a_sweep_refused_for_an_existing_folder_writes_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.csv").write_text("point_key,status\n")
    (out / "scenario.yaml").write_text("name: kept\n")
    result = poetsim("sweep", MCU, "--out", out)
    assert_one_line_error(result, 2, "pass --resume")
    assert (out / "scenario.yaml").read_text() == "name: kept\n"


def test_simulate_lists_no_cause_that_is_only_rounding(tmp_path):
    """The MLP on the nRF52840: the bus contends for 1e-16 s of float rounding, which is no cause of a difference."""
    args = ("--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--strategy", "hybrid", "--no-charts")
    result = poetsim("simulate", MCU, *args, "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    causes = json.loads((tmp_path / "comparison.json").read_text())["makespan_causes_s"]
    assert 0 < abs(causes["bus_contention_s"]) < 1e-12  # the rounding is there ...
    assert "by cause" not in result.stdout  # ... and not shown as a cause


def test_an_exception_no_layer_turns_into_a_line_is_a_bug_exit_70_with_its_traceback(capsys):
    """What the library does not foresee prints its traceback for the report, then one line, and exits 70, not 1."""
    import typer

    from poetsim.cli.app import _boundary

    def command():
        known: dict[str, int] = {}
        return known["missing"]

    def regressed():
        raise typer.Exit(1)

    with pytest.raises(typer.Exit) as ended:
        _boundary(command)()
    assert ended.value.exit_code == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("poetsim: ")
    assert "KeyError: 'missing' (a bug in poetsim" in " ".join(err.split())
    with pytest.raises(typer.Exit) as ended:
        _boundary(regressed)()
    assert ended.value.exit_code == 1


@pytest.mark.slow  # a sweep and a report: about a minute
def test_a_report_after_a_platform_file_changed_says_why_it_cannot_replay_the_schedules(tmp_path):
    """Point keys name a platform file by its content: edited after the sweep, the report says so.

    It does not say that the sweep kept no schedule.
    """
    platform = tmp_path / "board.yaml"
    platform.write_text(
        (ROOT / "scenarios" / "platforms" / "nrf52840-qemu.yaml").read_text().replace("name: nrf52840-qemu", "name: board")
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\nmodel: mlp\nbatch_size: 2\nplatform: board.yaml\nbudgets:\n  ram: [100%, 70%]\n  runtime: 1.5x\n"
        "strategies: [hybrid]\neffort: 0.5\n"
    )
    assert poetsim("sweep", scenario, "--out", tmp_path / "out").returncode == 0
    platform.write_text(platform.read_text().replace("power_w: 0.0109824", "power_w: 0.05"))
    result = poetsim("report", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert "no point of the scenario has its key (a model or platform file changed since the sweep?)" in page


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("sweep", "scenarios/mcu.yaml", "-j", "0"), "poetsim sweep: Invalid value for '-j' / '--jobs'"),
        (("sweep", "--bogus"), "poetsim sweep: No such option: --bogus"),
        (("check", "x", "--rtol", "-1"), "poetsim check: Invalid value for '--rtol'"),
        (("nosuch",), "poetsim: No such command 'nosuch'"),
        (("check",), "poetsim check: Missing argument 'results'"),
        (("device", "run", "--bogus"), "poetsim device run: No such option: --bogus"),
        (("device", "nosuch"), "poetsim device: No such command 'nosuch'"),
        (("solve", MCU, "--effort", "nan"), "poetsim solve: Invalid value for '--effort': nan is not a finite number"),
        (("solve", MCU, "--effort", "inf"), "poetsim solve: Invalid value for '--effort': inf is not a finite number"),
        (("solve", MCU, "--time-limit", "0.01"), "'--time-limit': 0.01 is below the least value, 0.1"),
        (("check", "x", "--baseline", "y", "--atol", "many"), "Invalid value for '--atol': 'many' is not a number"),
        (("sweep", MCU, "--worker-wait", "1e9"), "'--worker-wait': 1e9 is above the largest value, 86400"),
    ],
)
def test_a_bad_option_is_one_line_like_every_bad_input(args, fragment):
    assert_one_line_error(poetsim(*args), 2, fragment)


def test_importing_the_cli_leaves_other_click_apps_their_own_usage_errors(capsys):
    import typer
    import typer._click as click

    import poetsim.cli.app  # noqa: F401 - the import alone must change nothing of click's

    other = typer.Typer()

    @other.command()
    def count(times: int):
        pass

    with pytest.raises(click.exceptions.UsageError) as raised:
        typer.main.get_command(other).main(["surplus"], prog_name="other", standalone_mode=False)
    raised.value.show()
    shown = capsys.readouterr().err
    assert "Usage: other" in shown and "Try 'other --help' for help." in shown and "Invalid value for 'times'" in shown


@pytest.mark.parametrize(
    "args",
    [
        ("models",),
        ("platforms", "--json"),
        ("solve", MCU, "--platform", "nrf52840", "--ram", "10%", "--runtime", "1.5x", "--strategy", "hybrid"),
    ],
    ids=["table", "json", "infeasible-solve"],
)
def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(args):
    """As `poetsim ... | head` does: not 1 (a regression) or 74 (a file refused), whatever the command would return."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        command = [sys.executable, "-m", "poetsim", *map(str, args)]
        result = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=600)
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


def test_report_takes_a_scenario_for_its_default_results_folder(tmp_path):
    """`report scenarios/x.yaml`, as `compare` does, draws the report of build/<scenario name>/."""
    folder = tmp_path / "build" / "mcu"
    folder.mkdir(parents=True)
    for name in ("runs.csv", "scenario.yaml"):
        shutil.copy(ROOT / "results" / "mcu" / name, folder / name)
    result = poetsim("report", MCU, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "report: build/mcu/report.html" and (folder / "report.html").is_file()
    assert_one_line_error(poetsim("report", ROOT / "scenarios" / "resnet18.yaml", cwd=tmp_path), 2, "build/resnet18: no such")


def test_an_output_file_in_a_folder_not_made_yet_gets_its_folder(tmp_path):
    """A file option (--save, --lp) in a folder not made yet makes it, as --out folders are; a file in the way is named."""
    saved = poetsim("graph", "mlp", "--save", tmp_path / "new" / "deeper" / "mlp.json")
    assert saved.returncode == 0, saved.stderr
    assert json.loads((tmp_path / "new" / "deeper" / "mlp.json").read_text())["name"] == "mlp"
    point = ("--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--strategy", "hybrid")
    solved = poetsim("solve", MCU, *point, "--lp", tmp_path / "lp" / "point.lp")
    assert solved.returncode == 0, solved.stderr
    assert (tmp_path / "lp" / "point.lp").read_text().startswith("\\* Source Pyomo model name=")
    (tmp_path / "afile").write_text("")
    blocked = poetsim("graph", "mlp", "--save", tmp_path / "afile" / "mlp.json")
    assert_one_line_error(blocked, 2, f"--save: {tmp_path / 'afile'} is a file, not a folder")


def test_json_output_writes_a_number_that_is_not_finite_as_null(capsys):
    from poetsim.cli.app import emit_json

    emit_json({"largest difference": float("inf"), "rows": [{"ratio": float("nan")}, (1.5, float("-inf"))], "name": "x"})
    assert json.loads(capsys.readouterr().out) == {
        "largest difference": None,
        "rows": [{"ratio": None}, [1.5, None]],
        "name": "x",
    }


@pytest.mark.parametrize(
    "command, option",
    [("simulate", "--schedule"), ("solve", "--start"), ("device run", "--schedule")],
)
def test_a_schedule_option_given_a_folder_asks_for_the_file_in_it(tmp_path, command, option):
    """The folder `solve --out` wrote is an easy thing to pass where its schedule.bin is meant."""
    point = ("--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x")
    strategy = ("--strategy", "hybrid") if command == "solve" else ()
    result = poetsim(*command.split(), MCU, *point, *strategy, option, tmp_path)
    assert_one_line_error(result, 2, f"{option}: {tmp_path} is a folder; give the schedule.json or schedule.bin in it")
    missing = poetsim(*command.split(), MCU, *point, *strategy, option, tmp_path / "nothing.bin")
    assert_one_line_error(missing, 2, f"{option}: no such file {tmp_path / 'nothing.bin'}")


def test_a_run_written_into_a_folder_of_an_earlier_one_leaves_none_of_its_files(tmp_path):
    """An infeasible solve --out where a run was simulated before leaves its result.json alone, not the old files."""
    point = ("--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--effort", "1", "--out", tmp_path)
    simulated = poetsim("simulate", MCU, *point, "--strategy", "hybrid")
    assert simulated.returncode == 0, simulated.stderr
    assert {"schedule.bin", "trace.csv", "run.html", "timeline.png"} <= {p.name for p in tmp_path.iterdir()}
    infeasible = poetsim("solve", MCU, *point, "--strategy", "paging-only")
    assert infeasible.returncode == 3 and f"wrote {tmp_path}/ (result.json)" in infeasible.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
    assert json.loads((tmp_path / "result.json").read_text())["strategy"] == "paging-only"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (("simulate", "--mode", "freerunning"), "--mode: unknown replay mode 'freerunning' (use barrier or free-running)"),
        (("simulate", "--solver", "cplex"), "Invalid value for '--solver': unknown solver 'cplex'"),
        (("solve", "--solver", "cplex"), "Invalid value for '--solver': unknown solver 'cplex'"),
    ],
)
def test_a_misspelt_mode_or_solver_is_refused_naming_its_option_before_any_solve(tmp_path, arguments, message):
    command, *options = arguments
    point = ("--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--strategy", "hybrid", "--out", tmp_path / "o")
    assert_one_line_error(poetsim(command, MCU, *point, *options), 2, message)
    assert not (tmp_path / "o").exists()
