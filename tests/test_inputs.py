"""Hostile input (the corpus in tests/hostile/, and files made here): one line naming file and field, or plain text.

Every number in every input is finite and in range, every file is read only if it is a regular
file under its size cap, every decode and structure error is one line (exit 2), and names that
hold markup or script are printed back as plain text.
"""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from poetsim.cli import app
from poetsim.errors import UserInputError
from poetsim.inputs.files import MAX_SCENARIO_BYTES, parse_yaml, read_text
from poetsim.inputs.scenario import load_scenario
from poetsim.sweeps.runner import point_slug, run_sweep

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "hostile"
HOSTILE_NAME = (HOSTILE / "graphs" / "hostile_names.json").read_text()
GRAPH_NAME = json.loads(HOSTILE_NAME)["name"]

#: What each refused scenario of the corpus is refused for (after "poetsim: error: <path>: ").
REFUSED_SCENARIOS = {
    "alias_bomb.yaml": "its aliases expand to more than 100,000 values",
    "batch_bool.yaml": "batch_size: true is a yes or no, not a number; effort: true is a yes or no, not a number",
    "batch_huge.yaml": "batch_size: Input should be less than or equal to 1048576",
    "control_byte.yaml": "not valid YAML (character 0x01, which YAML does not allow, at line 2, column 11)",
    "effort_inf.yaml": "effort: Input should be a finite number",
    "effort_nan.yaml": "effort: Input should be a finite number",
    "graph_costs_inf.yaml": "costs_inf.json: nodes.0.cost_cpu: Input should be a finite number",
    "graph_twice.yaml": "model[1]: ./../graphs/tiny.json has the same name and content as model[0] (../graphs/tiny.json)",
    "model_nested.yaml": "model.0: Input should be a valid string",
    "name_dotdot.yaml": "name: String should match pattern",
    "name_markup.yaml": "name: String should match pattern",
    "not_a_mapping.yaml": "a scenario must be a mapping of fields",
    "not_utf8.yaml": "not UTF-8 text (byte 0xff at offset 25)",
    "platform_huge.yaml": "power_huge.yaml: storage.power_w: Input should be less than or equal to 1000000",
    "platform_inf.yaml": "power_inf.yaml: compute.power_w: Input should be a finite number",
    "platform_number.yaml": "platform.0: Input should be a valid string",
    "platform_newline.yaml": "name: contains the control character U+000A",
    "ram_empty.yaml": "budgets.ram: expected a size",
    "ram_huge.yaml": "budgets.ram: '1e308%' is above 100%",
    "ram_inf.yaml": "budgets.ram: 'inf%' must be a percentage above 0",
    "ram_nan.yaml": "budgets.ram: 'nan%' must be a percentage above 0",
    "ram_nested.yaml": "budgets.ram: expected a size",
    "ram_overflow.yaml": "budgets.ram: 1e400 is not a size poetsim can use",
    "ram_repeat.yaml": "budgets.ram: 70.0% is the same budget as 70%",
    "ram_repeat_bytes.yaml": "budgets.ram: 262144 is the same budget as 256KiB",
    "ram_yaml_nan.yaml": "budgets.ram: nan is not a size poetsim can use",
    "runtime_inf.yaml": "budgets.runtime: 'infx' must be a multiple above 0",
    "runtime_nan.yaml": "budgets.runtime: 'nanx' must be a multiple above 0",
    "runtime_repeat.yaml": "budgets.runtime: 1.0x is the same budget as 1.0",
    "runtime_yaml_inf.yaml": "budgets.runtime: 'inf' must be a multiple above 0",
    "time_limit_inf.yaml": "time_limit_s: Input should be a finite number",
}
#: What each refused graph of the corpus is refused for (after "poetsim: error: <path>: ").
REFUSED_GRAPHS = {
    "bigint.json": "not a JSON file (Exceeds the limit (4300 digits)",
    "bytes_huge.json": "nodes.1.output_bytes: Input should be less than or equal to 1125899906842624",
    "costs_inf.json": "nodes.0.cost_cpu: Input should be a finite number",
    "flops_nan.json": "not a JSON file (NaN is not a JSON number)",
    "long_name.json": "name: 201 characters is more than 200",
    "measured_inf.json": "nodes.1.compute_j: Input should be a finite number",
    "name_bidi.json": "name: contains the control character U+202E",
    "name_escape.json": "name: contains the control character U+001B",
    "name_newline.json": "name: contains the control character U+000A",
    "not_utf8.json": "not UTF-8 text (byte 0xff at offset 37)",
}


def cli(*args, cwd: Path = HOSTILE):
    """The command in this process, from `cwd`, as a user would type it there."""
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(previous)


def refused(result, path: str, fragment: str) -> None:
    """Exit 2, one line on stderr: the path, then the reason; nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"poetsim: error: {path}: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_every_file_of_the_corpus_has_an_expectation():
    assert sorted(p.name for p in (HOSTILE / "scenarios").glob("*.yaml")) == sorted([*REFUSED_SCENARIOS, "hostile_names.yaml"])
    assert sorted(p.name for p in (HOSTILE / "graphs").glob("*.json")) == sorted(
        [*REFUSED_GRAPHS, "hostile_names.json", "tiny.json"]
    )


@pytest.mark.parametrize("name", sorted(REFUSED_SCENARIOS))
def test_a_hostile_scenario_is_refused_in_one_line_naming_file_and_field(name):
    refused(cli("validate", f"scenarios/{name}"), f"scenarios/{name}", REFUSED_SCENARIOS[name])


def test_a_refused_item_of_a_list_is_the_only_error_its_list_gets():
    """The list is not also called too short (pydantic counts the items left after the refused one)."""
    result = cli("validate", "scenarios/platform_number.yaml")
    assert result.stderr.strip().endswith("scenarios/platform_number.yaml: platform.0: Input should be a valid string")


@pytest.mark.parametrize("name", ["effort_inf.yaml", "effort_nan.yaml"])
def test_a_bad_effort_is_the_only_field_named(name):
    """The guard derived from an effort (time_limit_s) is not reported: the user never wrote it."""
    result = cli("validate", f"scenarios/{name}")
    assert result.stderr.strip().endswith(f"scenarios/{name}: effort: Input should be a finite number"), result.stderr


@pytest.mark.parametrize("name", sorted(REFUSED_GRAPHS))
@pytest.mark.parametrize("as_json", [False, True])
def test_a_hostile_graph_is_refused_in_one_line_and_never_as_invalid_json(name, as_json):
    refused(cli("graph", f"graphs/{name}", *(["--json"] if as_json else [])), f"graphs/{name}", REFUSED_GRAPHS[name])


def test_markup_and_script_in_names_print_as_plain_text(tmp_path):
    shown = cli("graph", "graphs/hostile_names.json")
    assert shown.exit_code == 0, shown.stderr
    assert f"graph {GRAPH_NAME}" in shown.stdout
    assert json.loads(cli("graph", "graphs/hostile_names.json", "--json").stdout)["name"] == GRAPH_NAME
    solved = cli("solve", "scenarios/hostile_names.yaml")
    assert solved.exit_code == 0, solved.stderr
    assert f"hybrid on {GRAPH_NAME} / nrf52840" in solved.stdout
    missing = cli("graph", "[bold red]gone[/].json")
    refused(missing, "[bold red]gone[/].json", "no such graph file")


def test_a_sweep_keeps_hostile_names_verbatim_in_runs_csv(tmp_path):
    scenario = load_scenario(HOSTILE / "scenarios" / "hostile_names.yaml")
    rows = list(csv.DictReader(run_sweep(scenario, tmp_path / "out", jobs=1).open(newline="")))
    assert [r["model_name"] for r in rows] == [GRAPH_NAME]
    assert rows[0]["status"] == "optimal"
    checked = cli("check", tmp_path / "out", "--baseline", tmp_path / "out" / "runs.csv")
    assert checked.exit_code == 0, checked.stderr


# --- files that are not regular, too large, or nested too deep (made here) ----------------------


def poetsim(*args, cwd: Path):
    """A real process with a deadline: a file read until memory runs out would hang it."""
    return subprocess.run(
        [sys.executable, "-m", "poetsim", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


def one_line(result, fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr, result.stderr


def test_a_device_a_pipe_or_a_folder_is_refused_before_a_byte_is_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "folder.json").mkdir()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        (HOSTILE / "scenarios" / "hostile_names.yaml").read_text().replace("../graphs/hostile_names.json", "/dev/zero")
    )
    one_line(poetsim("graph", "/dev/zero", cwd=tmp_path), "/dev/zero: not a regular file (a device, pipe or socket)")
    one_line(poetsim("graph", "pipe.json", cwd=tmp_path), "pipe.json: not a regular file")
    one_line(poetsim("graph", "folder.json", cwd=tmp_path), "folder.json: is a folder; give a graph file")
    one_line(poetsim("validate", scenario, cwd=tmp_path), "model: /dev/zero: not a regular file")
    one_line(poetsim("validate", "/dev/zero", cwd=tmp_path), "/dev/zero: not a regular file")
    one_line(
        poetsim("solve", HOSTILE / "scenarios" / "hostile_names.yaml", "--platform", "/dev/zero", cwd=tmp_path),
        "/dev/zero: not a regular file (a device, pipe or socket); give a platform file",
    )


def test_a_file_over_its_size_cap_is_refused_from_its_size(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(MAX_SCENARIO_BYTES + 1)  # sparse: nothing to read, and nothing is
    one_line(poetsim("validate", big, cwd=tmp_path), "1,048,577 bytes is more than a scenario file may have")


def test_documents_nested_100000_deep_are_one_line(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(cli("graph", "deep.json", cwd=tmp_path), "deep.json", "not a JSON file (nested too deeply)")
    (tmp_path / "deep.yaml").write_text("[" * 100_000 + "]" * 100_000)
    refused(cli("validate", "deep.yaml", cwd=tmp_path), "deep.yaml", "not valid YAML (nested too deeply)")


def test_yaml_aliases_within_bounds_still_work_and_a_recursive_one_is_refused():
    assert parse_yaml("a: &a [1, 2]\nb: *a", "x") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(UserInputError, match="aliases expand"):
        parse_yaml("a: &a [1, *a]", "x")


def test_a_byte_order_mark_is_allowed(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: x\n")
    assert read_text(path, "scenario file", 100) == "name: x\n"


# --- keys unique by construction ----------------------------------------------------------------


def scenario_with(tmp_path, **fields) -> Path:
    text = (
        (HOSTILE / "scenarios" / "hostile_names.yaml")
        .read_text()
        .replace("../graphs/hostile_names.json", str(HOSTILE / "graphs" / "tiny.json"))
    )
    for old, new in fields.items():
        text = text.replace(old, new)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_budgets_that_differ_in_any_digit_are_two_keys_and_two_folders(tmp_path):
    points = load_scenario(scenario_with(tmp_path, **{"runtime: 1.5x": "runtime: [1.0, 1.0000001]"})).points()
    assert [p.key.split("|")[3] for p in points] == ["1x", "1.0000001x"]
    assert len({point_slug(p) for p in points}) == 2


def test_two_graph_files_of_one_name_in_two_folders_get_two_keys_and_two_point_folders(tmp_path):
    tiny = json.loads((HOSTILE / "graphs" / "tiny.json").read_text())
    for folder, size in (("a", 4096), ("b", 8192)):
        (tmp_path / folder).mkdir()
        tiny["nodes"][0]["output_bytes"] = size
        (tmp_path / folder / "g.json").write_text(json.dumps(tiny))
    path = scenario_with(tmp_path, **{str(HOSTILE / "graphs" / "tiny.json"): "[a/g.json, b/g.json]"})
    scenario = load_scenario(path)
    keys = [p.model_key for p in scenario.points()]
    assert len(set(keys)) == 2 and all(k.startswith("g.json@") for k in keys)
    run_sweep(scenario, tmp_path / "out", jobs=1)
    folders = sorted(p.name for p in (tmp_path / "out" / "points").iterdir())
    assert folders == sorted(point_slug(p) for p in scenario.points()) and len(folders) == 2
