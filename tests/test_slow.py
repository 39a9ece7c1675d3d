"""Slow checks on full-size graphs (`make test-slow`; excluded from `make test`).

They solve POET's main case, ResNet-18 (CIFAR), with HiGHS under a time limit, and one outside
architecture with its benchmark's effort, and hold every answer against the independent checker
(and the simulator).
"""

import pytest

from poetsim.optimiser import checkpoint_sqrt, keep_all, optimise
from poetsim.pipeline import build_problem
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.model import Timing
from poetsim.simulator import simulate
from poetsim.units import parse_ram

from optimiser_cases import HYBRID, MOVES, PAGING_ONLY, RECOMPUTE_ONLY

pytestmark = pytest.mark.slow

LIMIT_S = 30.0


@pytest.fixture(scope="module")
def resnet18_half_ram():
    return build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, batch_size=8)


@pytest.fixture(scope="module")
def outcomes(resnet18_half_ram):
    """Each strategy; hybrid last, started from the single-mode schedules, as a sweep does."""
    p = resnet18_half_ram
    found = {
        s: optimise(p.graph, p.costs, p.budgets, s, Timing.OVERLAP, time_limit_s=LIMIT_S) for s in (PAGING_ONLY, RECOMPUTE_ONLY)
    }
    starts = [outcome.schedule for outcome in found.values() if outcome.schedule is not None]
    found[HYBRID] = optimise(p.graph, p.costs, p.budgets, HYBRID, Timing.OVERLAP, time_limit_s=LIMIT_S, starts=starts)
    return found


@pytest.mark.parametrize("strategy", list(MOVES))
def test_every_resnet18_schedule_passes_the_checker_within_its_budgets(resnet18_half_ram, outcomes, strategy):
    p, outcome = resnet18_half_ram, outcomes[strategy]
    assert outcome.status in ("optimal", "feasible"), outcome.message
    checked = check_schedule(outcome.schedule, p.graph, p.costs, Timing.OVERLAP, p.budgets)
    assert compare_figures(outcome.predicted, checked) == []
    assert outcome.bound_j <= outcome.objective_j * (1 + 1e-9)


def test_hybrid_is_no_worse_than_either_single_mode_strategy(outcomes):
    hybrid = outcomes[HYBRID].objective_j
    assert hybrid <= outcomes[PAGING_ONLY].objective_j * (1 + 1e-9)
    assert hybrid <= outcomes[RECOMPUTE_ONLY].objective_j * (1 + 1e-9)


def test_the_hybrid_schedule_costs_more_than_keep_all_and_less_than_checkpoint_sqrt(resnet18_half_ram, outcomes):
    p = resnet18_half_ram
    _, everything = keep_all(p.graph, p.costs, Timing.OVERLAP)
    _, checkpointed = checkpoint_sqrt(p.graph, p.costs, Timing.OVERLAP)
    assert everything.total_j < outcomes[HYBRID].objective_j < checkpointed.total_j


def test_the_simulated_hybrid_schedule_fits_the_device_and_stays_near_the_prediction(resnet18_half_ram, outcomes):
    p, outcome = resnet18_half_ram, outcomes[HYBRID]
    result = simulate(outcome.schedule, p.graph, p.costs, p.platform, budgets=p.budgets)
    assert result.figures.total_j == pytest.approx(outcome.predicted.total_j, rel=0.02)
    assert result.makespan_s <= p.budgets.runtime_s * 1.02


#: POET's main case (resnet18_cifar, batch 8, rpi4, 50 % RAM, 1.2x): the proven optimal energy above
#: keep-all, equal in both timing models (every transfer hides behind compute). It depends on the
#: cost model: re-pin it (with the value `optimise` proves) when poetsim/schedule/costs.py changes.
RESNET18_MAIN_OVERHEAD_J = 0.18028516108


@pytest.mark.parametrize("timing", list(Timing))
def test_poets_main_case_is_proven_optimal_in_both_timing_models(timing):
    """The eviction covers' bound is met by a schedule made from their choice: a proof with no MILP."""
    p = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, timing, batch_size=8)
    outcome = optimise(p.graph, p.costs, p.budgets, HYBRID, timing, time_limit_s=60.0)
    assert outcome.status == "optimal", outcome.message
    assert outcome.schedule is not None and outcome.predicted is not None  # an optimal outcome has both
    assert outcome.objective_j is not None and outcome.bound_j is not None
    checked = check_schedule(outcome.schedule, p.graph, p.costs, timing, p.budgets)
    assert compare_figures(outcome.predicted, checked) == []
    static_j = p.costs.static_power_w * p.costs.plain_runtime_s if timing is Timing.OVERLAP else 0.0
    overhead_j = checked.total_j - p.costs.plain_compute_j - static_j
    assert outcome.objective_j - outcome.bound_j <= 1e-4 * overhead_j
    assert overhead_j == pytest.approx(RESNET18_MAIN_OVERHEAD_J, rel=1e-6)


def test_vit_tiny_on_the_pi_is_placed_by_the_milp_confined_to_the_page_in_priced_choice():
    """ViT-Tiny of the outside set (Pi, 50 %, 1.2x, hybrid, 60 units), as `make bench BENCH=outside` solves it.

    The plain cover's placements leave 93 % of the overhead unproven there; the MILP confined to
    the choice of the cover with page-in stalls priced places that choice within 30 %.
    """
    p = build_problem("scenarios/graphs/outside/vit_tiny.json", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP)
    outcome = optimise(p.graph, p.costs, p.budgets, HYBRID, Timing.OVERLAP, effort=60.0)
    assert outcome.found_by == "the MILP confined to the page-in-priced cover's choice", outcome.message
    assert outcome.gap_overhead is not None and outcome.gap_overhead <= 0.3
    assert outcome.schedule is not None and outcome.predicted is not None
    checked = check_schedule(outcome.schedule, p.graph, p.costs, Timing.OVERLAP, p.budgets)
    assert compare_figures(outcome.predicted, checked) == []
