"""The PyTorch commands of the CLI: import, solve, execute (JSON and binary schedules), errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from poetsim.cli import app as poetsim_app  # noqa: E402

TINY = "poetsim.pytorch.models:tiny_cnn"


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    """The `poetsim` app, with its PyTorch commands among the others."""
    return poetsim_app


@pytest.fixture(scope="module")
def imported(app, tmp_path_factory):
    """import-torch of the tiny CNN, then `poetsim solve` of a hybrid schedule at 60 % on rpi4."""
    folder = tmp_path_factory.mktemp("tiny")
    graph = folder / "graph.json"
    result = CliRunner().invoke(app, ["import-torch", TINY, "--input-shape", "2,3,8,8", "--out", str(graph)])
    assert result.exit_code == 0, result.output
    scenario = folder / "tiny.yaml"
    scenario.write_text(
        f"name: tiny\nmodel: {graph}\nplatform: rpi4\nbudgets: {{ram: 60%, runtime: 2x}}\nstrategies: [hybrid]\ntime_limit_s: 5\n"
    )
    solved = CliRunner().invoke(poetsim_app, ["solve", str(scenario), "--out", str(folder / "solved")])
    assert solved.exit_code == 0, solved.output
    return folder


def test_import_records_the_model_source_in_the_graph_file(imported):
    meta = json.loads((imported / "graph.json").read_text())["meta"]
    assert meta["torch.factory"] == TINY and json.loads(meta["torch.inputs"]) == [[[2, 3, 8, 8], "float32"]]


def test_solved_schedule_names_its_nodes(imported):
    schedule = json.loads((imported / "solved" / "schedule.json").read_text())
    graph = json.loads((imported / "graph.json").read_text())
    assert schedule["nodes"] == [node["name"] for node in graph["nodes"]]


@pytest.mark.parametrize("file", ["schedule.json", "schedule.bin"])
def test_execute_runs_a_scenario_schedule_and_reports_equal_gradients_and_peak(app, imported, tmp_path, file):
    result = CliRunner().invoke(
        app,
        [
            "execute",
            str(imported / "tiny.yaml"),
            "--schedule",
            str(imported / "solved" / file),
            "--swap-dir",
            str(tmp_path / "swap"),
            "--json",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["measured"]["gradients_equal"] and report["peak_equal"] and report["traffic_equal"]
    assert report["predicted"]["runtime_s"] > 0 and report["predicted"]["platform"] == "rpi4"
    assert (tmp_path / "run" / "instructions.csv").read_text().startswith("stage,kind,node,name")


def test_execute_of_a_graph_alone_predicts_the_peak_but_no_time(app, imported, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "execute",
            str(imported / "graph.json"),
            "--schedule",
            str(imported / "solved" / "schedule.json"),
            "--swap-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["predicted"]["runtime_s"] is None and report["peak_equal"]


def test_execute_over_a_ram_budget_stops_with_one_line(app, imported, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "execute",
            str(imported / "graph.json"),
            "--schedule",
            str(imported / "solved" / "schedule.json"),
            "--swap-dir",
            str(tmp_path),
            "--ram",
            "1000",
        ],
    )
    assert result.exit_code == 6
    assert result.output.count("\n") == 1 and "over the budget of 1,000" in result.output


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["import-torch", "poetsim.pytorch.models:nothing", "--input-shape", "1,2", "--out", "x.json"],
            "has no function 'nothing'",
        ),
        (["import-torch", "no_such_package.m:f", "--input-shape", "1,2", "--out", "x.json"], "cannot import no_such_package.m"),
        (
            ["import-torch", "poetsim.pytorch.models:__doc__", "--input-shape", "1,2", "--out", "x.json"],
            "poetsim.pytorch.models.__doc__ is a str, not a function that returns the model",
        ),
        (["import-torch", TINY, "--input-shape", "2,3,a", "--out", "x.json"], "--input-shape: '2,3,a'"),
        (["execute", "scenarios/mcu.yaml", "--schedule", "x.json"], "is a zoo name"),
        (["profile", "--out", "host.yaml", "--input-shape", "4,3"], "--input-shape: describes the inputs of --model"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(app, arguments, message):
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["execute", "scenarios/mcu.yaml", "--schedule", "x.json", "--out", "{file}"], "--out: {file} is a file, not a folder"),
        (["execute", "scenarios/mcu.yaml", "--schedule", "x.json", "--swap-dir", "{file}/swap"], "--swap-dir: {file} is a file"),
        (["validate-run", TINY, "--input-shape", "2,3,8,8", "--out", "{file}"], "--out: {file} is a file, not a folder"),
        (["profile", "--out", "{file}/host.yaml"], "--out: {file} is a file, not a folder"),
        (["train", TINY, "--input-shape", "2,3,8,8", "--swap-dir", "{file}"], "--swap-dir: {file} is a file, not a folder"),
    ],
)
def test_an_unusable_output_or_swap_folder_is_refused_before_any_work(app, tmp_path, arguments, message):
    """A file where a folder should be: one line naming the option, exit 2, before any capture, measurement or solve."""
    file = tmp_path / "afile"
    file.write_text("")
    result = CliRunner().invoke(app, [a.format(file=file) for a in arguments])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and message.format(file=file) in result.output


@pytest.mark.parametrize(
    "command, option, message",
    [
        ("validate-run", ["--ram", "150%"], "--ram: '150%' is above 100%"),
        ("validate-run", ["--ram", "lots"], "--ram: 'lots' is not a size"),
        ("validate-run", ["--strategy", "bogus"], "--strategy: unknown strategy 'bogus'"),
        ("validate-run", ["--timing", "bogus"], "--timing: unknown timing model 'bogus'"),
        ("validate-run", ["--runtime", "fast"], "--runtime: 'fast' is not a multiple"),
        ("validate-run", ["--profile", "nosuch"], "unknown platform 'nosuch'"),
        ("validate-run", ["--profile", "rpi4", "--calibrate", "suite"], "--calibrate: applies when the host is measured"),
        ("train", ["--ram", "150%"], "--ram: '150%' is above 100%"),
        ("train", ["--strategy", "bogus"], "--strategy: unknown strategy 'bogus'"),
        ("train", ["--timing", "bogus"], "--timing: unknown timing model 'bogus'"),
    ],
)
def test_a_bad_option_is_refused_in_one_line_before_the_model_is_built(app, tmp_path, monkeypatch, command, option, message):
    """validate-run and train read every option before they build, capture, measure or write anything."""
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "out")] if command == "validate-run" else []
    result = CliRunner().invoke(app, [command, "no_such_package.m:f", "--input-shape", "2,3,8,8", *option, *out])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and message in result.output
    assert list(tmp_path.iterdir()) == []


def test_validate_run_where_no_schedule_ran_keeps_its_files_and_exits_3(app, tmp_path):
    out = tmp_path / "out"
    arguments = ["validate-run", TINY, "--input-shape", "2,3,8,8", "--profile", "rpi4", "--ram", "1%", "--repeats", "1"]
    result = CliRunner().invoke(app, [*arguments, "--out", str(out), "--swap-dir", str(tmp_path / "swap")])
    assert result.exit_code == 3, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("poetsim: error: no schedule ran: at every budget each strategy was infeasible, over the budget")
    assert f"wrote {out}/ (graph.json, result.json, validation.csv, validation.html)" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["graph.json", "result.json", "validation.csv", "validation.html"]


def test_a_model_module_in_the_current_folder_imports_and_its_own_errors_are_one_line(tmp_path):
    """The installed `poetsim` finds a model module in the folder it runs in, as `python -m` would.

    A module with a syntax error, or whose top level raises, is the user's code failing: one line
    naming it (its text printed as it is, `:x:` not made an emoji), exit 2, no traceback. So is
    an input shape the model cannot take (torch's fake-tensor mode logs its traceback first).
    """
    (tmp_path / "my_models.py").write_text(
        "import torch\n\ndef small():\n    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
    )
    (tmp_path / "broken.py").write_text("def small(:\n    pass\n")
    (tmp_path / "raising.py").write_text("raise RuntimeError('no config :x: here')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(factory: str, shape: str = "2,4") -> subprocess.CompletedProcess:
        command = [str(Path(sys.executable).parent / "poetsim"), "import-torch", factory, "--input-shape", shape]
        command += ["--out", "g.json"]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)

    assert run("my_models:small").returncode == 0 and (tmp_path / "g.json").is_file()
    for factory, fragment in [
        ("broken:small", "broken:small: " + str(tmp_path / "broken.py") + ", line 1"),
        ("raising:small", "importing raising raised RuntimeError: no config :x: here"),
    ]:
        result = run(factory)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and fragment in result.stderr and "Traceback" not in result.stderr
    misfit = run("my_models:small", "2,5")
    assert misfit.returncode == 2, misfit.stderr
    assert misfit.stderr.count("\n") == 1 and "the inputs do not fit the model" in misfit.stderr


def test_profile_and_validate_run_write_their_files(app, tmp_path):
    """`poetsim profile` and `poetsim validate-run` write their files.

    profile calibrated on the tiny CNN; validate-run with that profile at one budget and strategy.
    """
    runner = CliRunner()
    swap = str(tmp_path / "swap")
    result = runner.invoke(
        app,
        [
            "profile",
            "--out",
            str(tmp_path / "host.yaml"),
            "--swap-dir",
            swap,
            "--threads",
            "1",
            "--repeats",
            "1",
            "--model",
            TINY,
            "--input-shape",
            "2,3,8,8",
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app,
        [
            "validate-run",
            TINY,
            "--input-shape",
            "2,3,8,8",
            "--ram",
            "100%",
            "--strategy",
            "checkpoint-sqrt",
            "--profile",
            str(tmp_path / "host.yaml"),
            "--repeats",
            "1",
            "--threads",
            "1",
            "--swap-dir",
            swap,
            "--out",
            str(tmp_path / "loop"),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "loop" / "result.json").read_text())["rows"]
    assert rows[0]["gradients_equal"] and rows[0]["peak_equal"]
    assert (tmp_path / "loop" / "validation.html").exists() and (tmp_path / "loop" / "graph.json").exists()


def test_validate_run_with_its_default_strategies_skips_pofo_on_a_graph_that_is_no_chain(app, tmp_path):
    """Every strategy of the registry by default: POFO refuses the tiny CNN's residual block; the run goes on."""
    result = CliRunner().invoke(
        app,
        [
            "validate-run",
            TINY,
            "--input-shape",
            "2,3,8,8",
            "--ram",
            "100%",
            "--profile",
            "rpi4",
            "--time-limit",
            "5",
            "--repeats",
            "1",
            "--threads",
            "1",
            "--swap-dir",
            str(tmp_path / "swap"),
            "--out",
            str(tmp_path / "loop"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "pofo: skipped, it does not apply to this graph" in result.output
    rows = json.loads((tmp_path / "loop" / "result.json").read_text())["rows"]
    assert {row["strategy"]: row["status"] for row in rows}["pofo"] == "skipped"
    assert all(row["gradients_equal"] for row in rows if row["status"] != "skipped")


def test_a_bool_padding_mask_is_an_input_of_its_own(app, tmp_path):
    """Token ids and a bool mask (a quarter True) in; the imported step runs with bitwise gradients."""
    graph = tmp_path / "masked.json"
    shapes = ["--input-shape", "4,12", "--input-dtype", "int64", "--input-shape", "4,12", "--input-dtype", "bool"]
    result = CliRunner().invoke(
        app, ["import-torch", "outside_model:masked_encoder", *shapes, "--input-high", "50", "--out", str(graph)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(json.loads(graph.read_text())["meta"]["torch.inputs"]) == [[[4, 12], "int64"], [[4, 12], "bool"]]
    from poetsim.pytorch.executor import execute
    from poetsim.pytorch.host import keep_all_schedule
    from poetsim.pytorch.source import capture_graph_file

    captured = capture_graph_file(graph)
    padding = captured.inputs[1]
    assert padding.dtype == torch.bool and 0 < int(padding.sum()) < padding.numel()
    assert execute(captured, keep_all_schedule(captured.graph), tmp_path / "swap").gradients_equal
