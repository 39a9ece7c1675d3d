"""What a sweep's points tell about each other, carried across its grid once every point has its row.

A point takes the cheapest checked schedule of another point that fits its budgets and moves,
if cheaper than its own (`_Donors`); then proofs travel (`poetsim.sweeps.implied`): a
relaxation proven infeasible, a higher lower bound. The sweep's client runs this, and alone
writes what it changes.
"""

import json
from dataclasses import replace
from pathlib import Path

from poetsim import strategies
from poetsim.errors import PoetsimError
from poetsim.folders import StudyFolder
from poetsim.inputs.scenario import Point, Scenario
from poetsim.pipeline import adopt_schedule, problem_for_point, result_row, write_run
from poetsim.runs import ResultRow, RunsFile
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.formats import load_json
from poetsim.schedule.model import Schedule
from poetsim.schedule.problem import Problem
from poetsim.status import Status
from poetsim.sweeps.grid import point_fields, point_slug
from poetsim.sweeps.implied import apply_implied, is_open, judged, moves_used, same_graph, schedule_donor
from poetsim.sweeps.implied import name as implied_name
from poetsim.tolerances import cheaper


def carry_across_grid(scenario: Scenario, directory: Path) -> int:
    """Apply what the points of a sweep tell about each other (`poetsim.sweeps.implied`); how many rows changed.

    First schedules: a point takes the cheapest checked schedule of another point that fits its
    budgets and moves, if cheaper than its own (`_Donors`: of the same graph, on any platform);
    it is checked again against this point's budgets, simulated, and written to its folder.
    Then proofs: infeasibility and lower bounds of relaxations. Run once every point has its
    row, so that the result does not depend on which point ran first; runs.csv is rewritten
    atomically (the unchanged rows byte for byte) and each changed point's result.json with it,
    its rows in the grid's order (`Scenario.points`), not the order the points finished in.
    """
    runs = RunsFile(StudyFolder(directory).runs_csv)
    rows = [ResultRow.from_dict(record, str(runs.path)) for record in runs.records()]
    points = {point.key: point for point in scenario.points()}
    donors = _Donors(scenario, directory, points, rows)
    adopted = list(rows)
    for position, row in enumerate(rows):
        donor = donors.best_for(row)
        if donor is None:
            continue
        try:
            schedule = donors.schedule(donor)
            if schedule is not None:
                adopted[position] = (
                    _adopt(scenario, donors.problem(row.point_key), directory, points[row.point_key], row, schedule, donor) or row
                )
        except PoetsimError:
            continue  # the donor's files cannot be read or checked here: the point keeps its own
    carried = apply_implied(adopted)
    changed = {position: new for position, (old, new) in enumerate(zip(rows, carried)) if new is not old}
    for row in changed.values():
        result = StudyFolder(directory).point(point_slug(points[row.point_key])).result_json if row.point_key in points else None
        if result is not None and result.exists():
            result.write_text(json.dumps(row.to_dict(), indent=1) + "\n")
    runs.rewrite(changed, tuple(points))
    return len(changed)


class _Donors:
    """The checked schedules of a sweep, offered to its points that a solve left unproven.

    A schedule of the same graph, timing and platform is judged by its row's figures
    (`implied.schedule_donor`). One made on another platform is an instruction list like any
    other: its peak RAM is the same there (bytes do not depend on the platform), and its time
    and energy are the checker's under this point's costs. So rpi4 and rpi4-nocache, whose
    recompute-only schedules cost the same, never report different ones.
    """

    def __init__(self, scenario: Scenario, directory: Path, points: dict[str, Point], rows: list[ResultRow]):
        self.scenario, self.directory, self.points, self.rows = scenario, directory, points, rows
        self._schedules: dict[str, Schedule | None] = {}
        self._problems: dict[str, Problem] = {}

    def best_for(self, row: ResultRow) -> ResultRow | None:
        """The row whose schedule costs least at `row`'s point, fits and beats `row`'s own; or None."""
        if row.point_key not in self.points or not is_open(row):
            return None
        same = schedule_donor(row, self.rows)
        best = None if same is None or same.point_key not in self.points else (same.predicted_total_j, same.point_key, same)
        others = [other for other in self.rows if self._elsewhere(other, row)]
        if not others:
            return None if best is None else best[2]
        try:
            problem = self.problem(row.point_key)
        except PoetsimError:
            return None if best is None else best[2]
        own_j = row.predicted_total_j
        for other in others:
            schedule = self.schedule(other)
            if schedule is None:
                continue
            try:
                figures = check_schedule(schedule, problem.graph, problem.costs, problem.timing, problem.budgets)
            except PoetsimError:
                continue  # invalid here, or over this point's budgets
            if own_j is not None and not cheaper(figures.total_j, own_j):
                continue
            if best is None or (figures.total_j, other.point_key) < best[:2]:
                best = (figures.total_j, other.point_key, other)
        return None if best is None else best[2]

    def _elsewhere(self, other: ResultRow, row: ResultRow) -> bool:
        """Whether `other` has a schedule of `row`'s graph, made on another platform, that may fit."""
        if other.platform == row.platform or not other.status.has_schedule or other.point_key not in self.points:
            return False
        if not same_graph(other, row) or other.predicted_peak_ram_bytes is None or row.ram_budget_bytes is None:
            return False
        return other.predicted_peak_ram_bytes <= row.ram_budget_bytes and strategies.get(row.strategy).moves.allows(
            moves_used(other)
        )

    def problem(self, point_key: str) -> Problem:
        """The problem of a point (built once: the donors are judged on it, then one is adopted)."""
        if point_key not in self._problems:
            self._problems[point_key] = problem_for_point(self.scenario, self.points[point_key])
        return self._problems[point_key]

    def schedule(self, row: ResultRow) -> Schedule | None:
        """`row`'s saved schedule (read once), or None if it cannot be read."""
        if row.point_key not in self._schedules:
            path = StudyFolder(self.directory).point(point_slug(self.points[row.point_key])).schedule_json
            try:
                self._schedules[row.point_key] = load_json(path)
            except PoetsimError:
                self._schedules[row.point_key] = None
        return self._schedules[row.point_key]


def _adopt(
    scenario: Scenario, problem: Problem, directory: Path, point: Point, row: ResultRow, schedule: Schedule, donor: ResultRow
) -> ResultRow | None:
    """`row` (a point of `problem`) with `donor`'s schedule, checked here, simulated and saved.

    None if it does not check.
    """
    where = "" if donor.platform == row.platform else f" on {donor.platform}"
    found_by = f"the schedule of {implied_name(donor)}{where}"
    run = adopt_schedule(
        problem, row.strategy, schedule, f"{found_by}, which fits here and costs less than this point's own solve found"
    )
    if run is None:
        return None
    new = replace(
        result_row(run, **point_fields(scenario, point)),
        solver=row.solver,
        build_s=row.build_s,
        solve_s=row.solve_s,
        work=row.work,
        wall_s=row.wall_s,
    )
    if row.bound_j is not None:
        new = judged(new, row.bound_j, "this point's solve")
        if new.status is Status.OPTIMAL:
            new = replace(new, message=f"proven optimal: {found_by} fits here and meets this point's lower bound")
    meta = {
        **dict(schedule.meta),
        "found_by": found_by,
        "status": new.status.value,
        "ram_budget_bytes": str(run.problem.budgets.ram_bytes),
        "runtime_budget_s": repr(run.problem.budgets.runtime_s),
    }
    write_run(
        replace(run, schedule=replace(schedule, meta=tuple(sorted(meta.items())))),
        StudyFolder(directory).point(point_slug(point)).path,
        new,
    )
    return new
