"""The outside architectures: their imports, their committed graphs, and scheduled steps.

Each imports with its own dropout and stochastic depth, its committed graph is what the capture
gives, and a step that recomputes and pages has plain PyTorch's gradients.
"""

import inspect
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from pytorch_cases import recompute_and_page  # noqa: E402

from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pipeline import run_strategy  # noqa: E402
from poetsim.pytorch import architectures  # noqa: E402
from poetsim.pytorch.executor import execute  # noqa: E402
from poetsim.pytorch.source import capture_graph_file  # noqa: E402
from poetsim.schedule.checker import check_schedule  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402
from poetsim.schedule.model import Timing  # noqa: E402
from poetsim.schedule.problem import make_problem  # noqa: E402
from poetsim.units import parse_ram  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ROOT / "scenarios" / "graphs" / "outside"
FACTORIES = sorted(
    name
    for name, function in inspect.getmembers(architectures, inspect.isfunction)
    if function.__module__ == architectures.__name__
    and not name.startswith("_")
    and not inspect.signature(function).parameters
    and inspect.signature(function).return_annotation is torch.nn.Module
)
#: Two in the default suite: stochastic depth with dropout, and attention dropout.
QUICK = ("efficientnet_b0", "vit_tiny")


def test_every_architecture_has_a_committed_graph_listed_in_the_scenario():
    scenario = yaml.safe_load((ROOT / "scenarios" / "outside.yaml").read_text())
    assert len(FACTORIES) >= 8
    assert sorted(Path(model).stem for model in scenario["model"]) == FACTORIES
    assert sorted(p.stem for p in GRAPHS.glob("*.json")) == FACTORIES


def _step_with_recomputation_and_paging(name: str, swap: Path):
    captured = capture_graph_file(GRAPHS / f"{name}.json")  # refuses if the file is not what the capture gives now
    graph = captured.graph
    costs = node_costs(graph, load_platform("rpi4"))
    random = {k for k, program in enumerate(captured.programs) if program.random}
    schedule = recompute_and_page(graph, costs, prefer=random)
    predicted = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, swap, threads=1)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes
    assert predicted.recomputations > 0 and predicted.page_outs > 0
    recomputed = {r.node for r in result.records if r.kind == "recompute"}
    assert recomputed & random or not random
    return captured, random


@pytest.mark.parametrize("name", QUICK)
def test_a_step_that_recomputes_and_pages_has_bitwise_gradients(name, tmp_path):
    _, random = _step_with_recomputation_and_paging(name, tmp_path)
    assert random, "the quick ones carry dropout or stochastic depth"


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in FACTORIES if n not in QUICK])
def test_every_other_architecture_recomputes_and_pages_with_bitwise_gradients(name, tmp_path):
    _step_with_recomputation_and_paging(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", FACTORIES)
def test_the_hybrid_schedule_at_half_the_peak_runs_with_bitwise_gradients(name, tmp_path):
    """POET's own schedule (the MILP, 30 s) at 50 % of keep-all and 2x on rpi4: executed as checked."""
    captured = capture_graph_file(GRAPHS / f"{name}.json")
    problem = make_problem(captured.graph, load_platform("rpi4"), parse_ram("50%"), 2.0)
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False, threads=1)
    assert run.ok and run.schedule is not None and run.checked is not None, run.message
    result = execute(captured, run.schedule, tmp_path, budget_bytes=problem.budgets.ram_bytes, threads=1)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == run.checked.peak_ram_bytes <= problem.budgets.ram_bytes
