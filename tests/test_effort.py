"""The optimiser counts its effort in work, not seconds: the same answer on a quiet and a loaded machine.

The wall clock only guards (`optimiser.work`, `poetsim.units.resolve_limits`).
"""

import subprocess
import sys

import pytest

from poetsim.inputs.scenario import DEFAULT_EFFORT, Scenario
from poetsim.optimiser import optimise
from poetsim.optimiser.allowance import Allowance, effort
from poetsim.optimiser.clock import Clock
from poetsim.optimiser.work import Work
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.model import Moves, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import GUARD_MIN_S, GUARD_S_PER_UNIT, LIMIT_S_PER_UNIT, limits_or, parse_ram, resolve_limits

RECOMPUTE_ONLY = Moves(recompute=True, page=False)


def _row(outcome) -> tuple:
    """What a results row says of a solve (its times aside), and the schedule itself."""
    return (
        outcome.status,
        outcome.message,
        outcome.found_by,
        outcome.objective_j,
        outcome.bound_j,
        outcome.gap_overhead,
        outcome.work,
        outcome.schedule.stages if outcome.schedule is not None else None,
    )


def test_an_unproven_point_gives_the_same_row_beside_two_busy_processes():
    """An unproven point stops at the same place on a quiet and on a loaded machine.

    ResNet-18 (CIFAR, batch 8, Pi) at 35 % RAM, recompute-only, 1.2x, with 3 units of effort: the
    search stops with a gap, at the same point and with the same schedule, bound and message
    whether the machine is quiet or two processes keep both of its cores busy.
    """
    p = build_problem("resnet18_cifar", "rpi4", parse_ram("35%"), 1.2, Timing.OVERLAP, batch_size=8)
    args = (p.graph, p.costs, p.budgets, RECOMPUTE_ONLY, Timing.OVERLAP)
    quiet = optimise(*args, effort=3.0)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = optimise(*args, effort=3.0)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert quiet.status == "feasible" and quiet.gap_overhead is not None and quiet.gap_overhead > 0.01, quiet.message
    assert _row(loaded) == _row(quiet)
    assert "time limit" not in quiet.message
    assert quiet.schedule is not None
    check_schedule(quiet.schedule, p.graph, p.costs, Timing.OVERLAP, p.budgets)


def test_a_call_that_the_guard_stops_says_so_and_still_returns_a_checked_schedule():
    """An effort far beyond what the wall clock allows: the guard ends the call.

    The schedule found so far comes back, and the message says that the answer depends on the machine.
    """
    p = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP, batch_size=8)
    outcome = optimise(p.graph, p.costs, p.budgets, RECOMPUTE_ONLY, Timing.OVERLAP, effort=1000.0, time_limit_s=1.0)
    assert outcome.schedule is not None
    assert "stopped by the time limit of 1 s before the effort of 1000 units was spent" in outcome.message
    check_schedule(outcome.schedule, p.graph, p.costs, Timing.OVERLAP, p.budgets)


def test_once_the_guard_trips_every_allowance_is_spent():
    work = Work(Clock(0.0))
    whole = Allowance(work, 100.0)
    assert whole.over() and whole.left() == 0.0 and whole.part(0.5).over()
    assert work.guard_tripped


def test_an_allowance_is_spent_by_work_charged_not_by_time():
    whole = effort(10.0)
    step = whole.part(0.5)
    assert step.left() == pytest.approx(5.0)
    step.charge(4.0)
    assert not step.over() and whole.left() == pytest.approx(6.0)
    whole.charge(1.0)
    assert step.over() and whole.left() == pytest.approx(5.0)


@pytest.mark.parametrize(
    "stated, resolved",
    [
        ((12.0, None), (12.0, 12.0 * GUARD_S_PER_UNIT)),
        ((None, 60.0), (60.0 / LIMIT_S_PER_UNIT, 60.0)),
        ((12.0, 30.0), (12.0, 30.0)),
        ((None, None), (None, None)),
    ],
)
def test_an_effort_or_a_time_limit_stated_alone_derives_the_other(stated, resolved):
    assert resolve_limits(*stated) == resolved


@pytest.mark.parametrize(
    "stated, resolved",
    [
        ((None, None), (6.0, 6.0 * GUARD_S_PER_UNIT)),
        ((12.0, None), (12.0, 12.0 * GUARD_S_PER_UNIT)),
        ((None, 60.0), (60.0 / LIMIT_S_PER_UNIT, 60.0)),
        ((12.0, 30.0), (12.0, 30.0)),
    ],
)
def test_training_and_validation_take_their_default_effort_only_when_neither_limit_is_stated(stated, resolved):
    """`poetsim.pytorch.scheduled` and `validate_run` solve with a default effort, else with what is stated."""
    assert limits_or(6.0, *stated) == resolved


def test_a_scheduled_model_solves_with_the_effort_it_is_given(tmp_path, monkeypatch):
    """`scheduled(..., effort=0.5)` solves with 0.5 units and its guard; the same effort gives the same schedule twice."""
    torch = pytest.importorskip("torch")
    from poetsim import pipeline
    from poetsim.pytorch.training import scheduled

    limits = []
    real = pipeline.run_strategy

    def run_strategy(*args, **kwargs):
        limits.append((kwargs["effort"], kwargs["time_limit_s"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "run_strategy", run_strategy)

    def schedule(effort: float):
        torch.manual_seed(0)
        layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)]
        labels = torch.zeros(8, dtype=torch.long)
        return scheduled(
            torch.nn.Sequential(*layers), torch.randn(8, 16), labels=labels, ram="80%", effort=effort, swap_dir=tmp_path
        )

    first, again = schedule(0.5), schedule(0.5)
    assert limits == [(0.5, max(0.5 * GUARD_S_PER_UNIT, GUARD_MIN_S))] * 2
    assert first.plan.schedule == again.plan.schedule


def _scenario(**limits) -> Scenario:
    return Scenario.model_validate(
        {"name": "t", "model": "mlp", "platform": "rpi4", "budgets": {"ram": "50%", "runtime": "1.2x"}, **limits}
    )


def test_a_scenario_states_its_effort_and_the_command_line_may_replace_it():
    assert (_scenario().effort, _scenario().time_limit_s) == (DEFAULT_EFFORT, GUARD_S_PER_UNIT * DEFAULT_EFFORT)
    assert (_scenario(effort=12).effort, _scenario(effort=12).time_limit_s) == (12.0, 12.0 * GUARD_S_PER_UNIT)
    assert _scenario(time_limit_s=30).effort == 30.0 / LIMIT_S_PER_UNIT
    stated = _scenario(effort=12, time_limit_s=100)
    assert (stated.effort, stated.time_limit_s) == (12.0, 100.0)
    assert stated.with_limits(effort=50.0).time_limit_s == 50.0 * GUARD_S_PER_UNIT
    assert stated.with_limits() is stated
