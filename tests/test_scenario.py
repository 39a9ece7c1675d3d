"""Scenario files: the grid they describe and every rejection, one line naming file and field."""

import textwrap
from pathlib import Path

import pytest

from poetsim.errors import UserInputError
from poetsim.inputs.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
name: resnet18-rpi4
model: resnet18_cifar
batch_size: 32
platform: rpi4
budgets:
  ram: 50%
  runtime: 1.2x
strategies: [hybrid, recompute-only, paging-only]
"""


def _write(tmp_path, text, name="s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_scenario_loads_with_defaults(tmp_path):
    scenario = load_scenario(_write(tmp_path, GOOD))
    assert scenario.model == ("resnet18_cifar",)
    assert scenario.budgets.ram[0].fraction_of_keep_all == 0.5
    assert scenario.budgets.runtime == (1.2,)
    assert scenario.timing.value == "overlap"
    assert len(scenario.points()) == 3


def test_lists_make_a_grid(tmp_path):
    text = (
        GOOD.replace("platform: rpi4", "platform: [rpi4, jetson-tx2]")
        .replace("ram: 50%", "ram: [100%, 50%, 1MiB]")
        .replace("runtime: 1.2x", "runtime: [1x, 1.5x]")
    )
    scenario = load_scenario(_write(tmp_path, text))
    points = scenario.points()
    assert len(points) == 2 * 3 * 2 * 3
    assert len({p.key for p in points}) == len(points)
    assert points[0].key == "resnet18_cifar|rpi4|100%|1x|hybrid"


def test_a_single_strategy_may_be_written_without_a_list(tmp_path):
    scenario = load_scenario(
        _write(tmp_path, GOOD.replace("strategies: [hybrid, recompute-only, paging-only]", "strategies: hybrid"))
    )
    assert scenario.strategies == ("hybrid",) and len(scenario.points()) == 1


def test_graph_paths_are_relative_to_the_scenario(tmp_path, checkmate_graphs):
    (tmp_path / "g").mkdir()
    target = tmp_path / "g" / "vgg16.json"
    target.write_text((checkmate_graphs / "vgg16_256_224x224x3_train.json").read_text())
    text = (
        GOOD.replace("model: resnet18_cifar", "model: g/vgg16.json")
        .replace("ram: 50%", "ram: 1GB")
        .replace("platform: rpi4", "platform: jetson-tx2")
    )
    scenario = load_scenario(_write(tmp_path, text))
    assert scenario.model == (str(target),)


@pytest.mark.parametrize(
    "change,field,fragment",
    [
        (("name: resnet18-rpi4", "name: resnet18-rpi4\ncolour: red"), "colour", "unknown field"),
        (("batch_size: 32", "batch_size: many"), "batch_size", "integer"),
        (("batch_size: 32", "batch_size: -4"), "batch_size", "greater than 0"),
        (("ram: 50%", "ram: -5"), "budgets.ram", "at least one byte"),
        (("ram: 50%", "ram: 0%"), "budgets.ram", "above 0"),
        (("ram: 50%", "ram: 12 parsecs"), "budgets.ram", "unknown unit"),
        (("runtime: 1.2x", "runtime: 0x"), "budgets.runtime", "above 0"),
        (
            ("strategies: [hybrid, recompute-only, paging-only]", "strategies: [hybird]"),
            "strategies",
            "unknown strategy 'hybird'",
        ),
        (("platform: rpi4", "platform: rpi4\nsolver: cplex"), "solver", "unknown solver 'cplex'"),
        (("platform: rpi4", "platform: rpi4\ntiming: exact"), "timing", "overlap"),
        (("budgets:\n  ram: 50%\n  runtime: 1.2x\n", ""), "budgets", "Field required"),
    ],
)
def test_field_errors_name_file_and_field(tmp_path, change, field, fragment):
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(UserInputError) as caught:
        load_scenario(path, check_references=False)
    message = str(caught.value)
    assert message.startswith(f"{path}: {field}")
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "change,fragment",
    [
        (("model: resnet18_cifar", "model: resnet19"), "model: unknown model 'resnet19'"),
        (("platform: rpi4", "platform: [rpi4, pdp11]"), "platform[1]: unknown platform 'pdp11'"),
        (("ram: 50%", "ram: 64GiB"), "budgets.ram: 64GiB"),
    ],
)
def test_reference_errors_name_file_and_field(tmp_path, change, fragment):
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(UserInputError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert fragment in str(caught.value)


def test_ram_above_the_platform_is_rejected_with_both_figures(tmp_path):
    path = _write(tmp_path, GOOD.replace("platform: rpi4", "platform: mkr1000").replace("ram: 50%", "ram: 64KiB"))
    with pytest.raises(UserInputError, match=r"budgets.ram: 64KiB is 65,536 bytes .* above the 32,768 bytes of RAM"):
        load_scenario(path)


def test_not_yaml_and_not_a_mapping(tmp_path):
    with pytest.raises(UserInputError, match="not valid YAML"):
        load_scenario(_write(tmp_path, "name: [unclosed"))
    with pytest.raises(UserInputError, match="must be a mapping"):
        load_scenario(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(UserInputError, match="no such scenario file"):
        load_scenario(tmp_path / "missing.yaml")


def test_shipped_scenarios_validate():
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(paths) >= 4
    for path in paths:
        assert load_scenario(path).points()
