"""The covers' 0-1 programs: solved by HiGHS in a process of its own, which a deadline can kill."""

import math
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from poetsim.optimiser import work
from poetsim.optimiser.allowance import Allowance, effort
from poetsim.optimiser.milp import program
from poetsim.optimiser.milp.program import Program

#: A hang detector, not a speed claim.
HANG_S = 30


def _within(units: float) -> Allowance:
    return effort(units, units)


def knapsack_cover() -> Program:
    """Cover 10 with items of sizes 3, 4, 5, 6 and costs 3, 5, 4, 7."""
    p = Program()
    items = [p.column((name,), cost) for name, cost in (("a", 3.0), ("b", 5.0), ("c", 4.0), ("d", 7.0))]
    p.row(zip(items, (3.0, 4.0, 5.0, 6.0)), 10.0, math.inf)
    return p


def test_a_small_cover_is_solved_to_its_optimum_by_the_highs_process():
    """The cover a + b + c (3 + 4 + 5) costs 12, b + d 12, c + d (5 + 6) 11: c and d are optimal."""
    solved = knapsack_cover().solve(_within(10))
    assert not solved.infeasible and solved.exact
    assert solved.bound == pytest.approx(11.0)
    values = solved.values
    assert values is not None, "an exact solve has a solution"
    assert {key for key, value in values.items() if value > 0.5} == {("c",), ("d",)}


def test_the_linear_relaxation_of_a_cover_is_its_bound():
    """The knapsack's relaxation: c and a whole (8 of 10 for 7), then a third of d (7/3): 9 1/3."""
    solved = knapsack_cover().solve(_within(10), linear=True)
    assert not solved.infeasible and solved.exact
    assert solved.bound == pytest.approx(28 / 3)


def test_a_linear_program_stops_at_the_simplex_iterations_its_allowance_pays_for():
    """40 covering rows over 40 columns, with units for the build, the run's fixed part and 2 iterations.

    The run stops at its iteration limit with no bound, and charges no more than it was allowed.
    """
    rng = random.Random(7)
    p = Program()
    cols = [p.column((k,), rng.uniform(1.0, 2.0)) for k in range(40)]
    for _ in range(40):
        p.row([(c, rng.uniform(0.1, 1.0)) for c in rng.sample(cols, 10)], 1.0, math.inf)
    nonzeros, lines = len(p.index), len(p.cost) + len(p.row_lower)
    units = (
        work.BUILD_UNITS_PER_NONZERO * nonzeros
        + work.HIGHS_UNITS
        + work.HIGHS_UNITS_PER_NONZERO * nonzeros
        + 2.5 * work.HIGHS_UNITS_PER_LP_ITERATION_LINE * lines
    )
    allowance = effort(units, HANG_S)
    stopped = p.solve(allowance, linear=True, root_iterations_per_line=0.0)
    assert not stopped.exact and stopped.bound == 0.0
    assert allowance.meter.done <= units * (1 + 1e-9)
    assert p.solve(_within(10), linear=True).exact, "with room, the same program is solved"


def test_an_uncoverable_row_is_proven_infeasible():
    p = Program()
    p.row([(p.column(("a",), 1.0), 3.0)], 10.0, math.inf)
    solved = p.solve(_within(10))
    assert solved.infeasible and solved.values is None


def _runs_seen(monkeypatch) -> list[program.HighsJob]:
    """The jobs `run_checked` hands to the HiGHS process, each still run there."""
    seen: list[program.HighsJob] = []
    run = program.run_highs

    def spy(job, limit_s, watch=None):
        seen.append(job)
        return run(job, limit_s, watch)

    monkeypatch.setattr(program, "run_highs", spy)
    return seen


def test_an_infeasibility_is_confirmed_by_the_relaxation_without_presolve_where_that_is_infeasible(monkeypatch):
    """3a >= 10 with a in [0, 1]: even the relaxation has no solution, so the program itself is not run again."""
    seen = _runs_seen(monkeypatch)
    p = Program()
    p.row([(p.column(("a",), 1.0), 3.0)], 10.0, math.inf)
    solved = p.solve(_within(10))
    assert solved.infeasible and solved.values is None
    assert [job.options.get("presolve") for job in seen] == [None, "off"]
    assert not any(seen[1].model["integer"]), "the check is the linear relaxation"


def test_an_infeasibility_of_integrality_alone_is_confirmed_by_the_program_without_presolve(monkeypatch):
    """2a = 1 with a in {0, 1}: the relaxation has a = 0.5, so the 0-1 program is run without presolve."""
    seen = _runs_seen(monkeypatch)
    p = Program()
    p.row([(p.column(("a",), 1.0), 2.0)], 1.0, 1.0)
    solved = p.solve(_within(10))
    assert solved.infeasible and solved.values is None
    assert [job.options.get("presolve") for job in seen] == [None, "off", "off"]
    assert not any(seen[1].model["integer"]) and all(seen[2].model["integer"])


def test_enough_stops_at_a_solution_that_costs_no_more_and_calls_it_optimal():
    """With a known bound of 11 from elsewhere, the first solution of cost 11 is proven optimal."""
    solved = knapsack_cover().solve(_within(10), enough=11.0)
    assert solved.exact and solved.bound == pytest.approx(11.0)


def test_a_process_that_does_not_answer_by_the_deadline_is_killed_and_the_next_solve_gets_a_new_one():
    """A HiGHS process stopped by SIGSTOP stands for one stuck in presolve, which checks no clock in places.

    The solve returns no bound at its deadline, and that process is gone.
    """
    program.prestart()
    stuck = next(solver for solver in program._IDLE if solver.usable())
    os.kill(stuck.process.pid, signal.SIGSTOP)
    try:
        program._IDLE[:] = [stuck]
        solved = knapsack_cover().solve(_within(0.5))
    finally:
        if stuck.process.poll() is None:
            os.kill(stuck.process.pid, signal.SIGKILL)
    assert not solved.infeasible and not solved.exact and solved.bound == 0.0 and solved.values is None
    assert stuck.process.poll() == -signal.SIGKILL
    assert stuck not in program._IDLE
    assert knapsack_cover().solve(_within(10)).exact


def test_the_highs_process_is_in_a_session_of_its_own_so_ctrl_c_reaches_only_its_parent():
    program.prestart()
    solver = next(solver for solver in program._IDLE if solver.usable())
    assert os.getsid(solver.process.pid) != os.getsid(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_highs_process_dies_with_its_parent_however_the_parent_ends():
    """SIGKILL leaves the parent no chance to clean up; the kernel ends the HiGHS process."""
    code = (
        "import sys, time; from poetsim.optimiser.milp import program; program.prestart(); "
        "print(program._IDLE[0].process.pid, flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None, "Popen was asked for a stdout pipe"
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + HANG_S
    while _alive(child):
        assert time.monotonic() < deadline, "the HiGHS process outlived its parent"
        time.sleep(0.05)


def test_the_highs_process_ends_quietly_when_its_parent_stops_waiting_for_the_answer():
    """The parent closes its end of the pipe before the answer comes: no traceback on the shared terminal."""
    from multiprocessing import Pipe
    from pathlib import Path

    parent_end, child_end = Pipe()
    root = str(Path(program.__file__).resolve().parents[3])
    process = subprocess.Popen(
        [sys.executable, "-P", program.__file__, root, str(child_end.fileno()), str(os.getpid())],
        pass_fds=(child_end.fileno(),),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    child_end.close()
    p = knapsack_cover()
    model = program.model_arrays(
        p.cost, [0.0] * len(p.cost), p.upper, p.row_lower, p.row_upper, p.starts, p.index, p.value, p.integer
    )
    parent_end.send((vars(program.HighsJob(model=model, options={"threads": 1})), False))
    parent_end.close()
    _, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 0 and err == ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


class _Pipe:
    """The HiGHS process's end of the pipe, keeping what it sends."""

    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


def _sixty_item_cover() -> tuple[Program, float]:
    """A covering knapsack of 60 items (sizes and costs 5-50, seed 1), and its optimum."""
    import random

    rng = random.Random(1)
    sizes = [rng.randint(5, 50) for _ in range(60)]
    costs = [rng.randint(5, 50) for _ in range(60)]
    p = Program()
    columns = [p.column((n,), float(c)) for n, c in enumerate(costs)]
    p.row(zip(columns, map(float, sizes)), sum(sizes) // 2, math.inf)
    optimum = p.solve(_within(HANG_S))
    assert optimum.exact
    return p, optimum.bound


@pytest.mark.parametrize("start", ["partial", "whole, one value fractional"])
def test_no_dual_bound_the_highs_process_sends_exceeds_the_optimum_when_given_a_start(start):
    """No bound a HiGHS process reports, nor the one it ends with, is above the optimum.

    HiGHS 1.16 completes a partial start (and repairs a whole one it finds infeasible) with a
    sub-MIP in the same instance, whose callbacks report the sub-MIP's dual bound: 595.5 and 1781 on
    this cover, whose optimum is 512. Such a report, kept when a run is killed, would be a bound
    above the optimum. Every bound the process sends, and the one it ends with, is at most the
    optimum.
    """
    p, optimum = _sixty_item_cover()
    n = len(p.cost)
    job = program.HighsJob(
        model=program.model_arrays(p.cost, [0.0] * n, p.upper, p.row_lower, p.row_upper, p.starts, p.index, p.value, p.integer),
        options={"threads": 1, "random_seed": 0, "mip_rel_gap": 0.0, "time_limit": float(HANG_S)},
        partial_start=(list(range(10)), [1.0] * 10) if start == "partial" else None,
        full_start=None if start == "partial" else [1.0] * (n - 1) + [0.5],
    )
    pipe = _Pipe()
    status, objective, dual, *_ = program._solve(job, False, pipe)
    assert status == "kOptimal" and objective == pytest.approx(optimum)
    sent = [message[-1] for message in pipe.sent if message[-1] is not None]
    assert max([*sent, dual]) <= optimum + 1e-6
