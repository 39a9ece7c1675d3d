"""A sweep's grid: its points' folders and row fields, their order, shared solves, and what is left.

The order is that of a cell's points; the points that ask the solver one question share its
solve; the plan says what is left to run.

Points of one grid cell are ordered: a solved strategy runs after the strategies at the same
cell whose schedules it may use (baselines it allows, and solved strategies with fewer moves),
and takes their schedules as starts. So hybrid is never reported worse than paging-only or
recompute-only at the same point: their schedules are hybrid schedules too. Two points that
ask the solver the same question (`twin_points`: recompute-only on rpi4 and on rpi4-nocache,
which differ only in storage) are solved once: the later takes the earlier's answer, checked
and simulated on its own platform.
"""

import contextlib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from poetsim import strategies
from poetsim.errors import PoetsimError, UserInputError
from poetsim.folders import POINTS_DIR, StudyFolder
from poetsim.inputs.files import check_output_dir
from poetsim.inputs.scenario import Point, Scenario
from poetsim.pipeline import problem_for_point
from poetsim.runs import RunsFile
from poetsim.strategies import Kind
from poetsim.units import number_text

#: Longest point folder name before it is cut and given a hash (file systems allow 255 bytes).
MAX_SLUG_CHARS = 120


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: where it writes, what is already done and what is left to run."""

    scenario: Scenario
    directory: Path
    runs: RunsFile
    done_keys: frozenset[str]
    todo: tuple[Point, ...]

    @property
    def total(self) -> int:
        """How many points the sweep has: those done and those to run."""
        return len(self.done_keys) + len(self.todo)


def point_slug(point: Point) -> str:
    """A folder name for a point's schedule and trace.

    Readable where the key's parts are plain (letters, digits, `_.@-`) and short; otherwise (a
    file name with spaces or other characters, a very long name) cut and followed by a hash of
    the key, so that such names never meet. `plan_sweep` checks that no two points of a sweep
    share a folder.
    """
    ram = point.ram.key.replace("%", "pct")
    text = f"{point.model_key}_{point.platform_key}_ram{ram}_rt{number_text(point.runtime_x)}x_{point.strategy}"
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "-", text)
    if safe == text and len(text) <= MAX_SLUG_CHARS:
        return text
    digest = hashlib.sha256(point.key.encode("utf-8")).hexdigest()[:12]
    return f"{safe[:MAX_SLUG_CHARS]}~{digest}"


def point_fields(scenario: Scenario, point: Point) -> dict:
    """The fields of a point's row that name it."""
    return {
        "scenario": scenario.name,
        "point_key": point.key,
        "model": point.model_key,
        "platform": point.platform_key,
        "ram": str(point.ram),
        "runtime_x": point.runtime_x,
        "strategy": point.strategy,
    }


def prerequisites(point: Point, cell: list[Point]) -> list[Point]:
    """The points of the same cell whose schedules `point`'s solve may start from.

    A baseline needs nothing. A solved strategy takes the baselines whose moves it allows and
    the solved strategies with strictly fewer moves (so that two strategies never wait for each
    other): hybrid waits for paging-only and recompute-only, both wait for keep-all.
    """
    own = strategies.get(point.strategy)
    if own.kind is Kind.BASELINE:
        return []
    found = []
    for other in cell:
        theirs = strategies.get(other.strategy)
        if other.strategy == point.strategy or not own.moves.allows(theirs.moves):
            continue
        if theirs.kind is Kind.BASELINE or _count(theirs.moves) < _count(own.moves):
            found.append(other)
    return found


def _count(moves) -> int:
    return int(moves.recompute) + int(moves.page)


def twin_points(scenario: Scenario) -> dict[str, str]:
    """For each solved point whose solve would repeat an earlier point's, that point's key.

    Two points are twins when they have the same strategy, the same solver inputs
    (`Problem.solver_inputs`: for recompute-only, rpi4 and rpi4-nocache are one problem) and,
    point by point, twin prerequisites (so the same starts). A solve is then the same
    question asked twice: the later point waits for the earlier and takes its answer (its
    schedule checked and simulated on its own platform, its bound and status). A point whose
    problem cannot be built here has no twin; it fails on its own.
    """
    points = scenario.points()
    cells: dict[tuple, list[Point]] = {}
    for point in points:
        cells.setdefault(point.cell, []).append(point)
    signatures: dict[str, object] = {}

    def signature(point: Point) -> object:
        if point.key not in signatures:
            inputs: object = point.key  # equal to no other point's, if the problem cannot be built
            with contextlib.suppress(PoetsimError):
                inputs = problem_for_point(scenario, point).solver_inputs(strategies.get(point.strategy).moves)
            starts = tuple(signature(other) for other in prerequisites(point, cells[point.cell]))
            signatures[point.key] = (point.strategy, inputs, starts)
        return signatures[point.key]

    leaders: list[tuple[object, str]] = []
    twins = {}
    for point in points:
        if strategies.get(point.strategy).kind is Kind.BASELINE:
            continue
        mine = signature(point)
        leader = next((key for theirs, key in leaders if theirs == mine), None)
        if leader is None:
            leaders.append((mine, point.key))
        else:
            twins[point.key] = leader
    return twins


def plan_sweep(scenario: Scenario, directory: Path, resume: bool = False) -> SweepPlan:
    """Check where a sweep writes and what is left, without writing anything.

    UserInputError when `directory` is a file or cannot be made, when it already holds a
    runs.csv and `resume` is not set, when that runs.csv is not one poetsim can extend, or when
    two points would share a folder.
    """
    directory = Path(directory)
    check_output_dir(directory, "--out")
    runs = RunsFile(StudyFolder(directory).runs_csv)
    if runs.path.exists() and not resume:
        raise UserInputError(f"{runs.path} exists: pass --resume to continue it, or choose another --out")
    done = frozenset(runs.done_keys()) if resume and runs.path.exists() else frozenset()
    points = scenario.points()
    _check_distinct_folders(points)
    todo = tuple(p for p in points if p.key not in done)
    return SweepPlan(scenario, directory, runs, done & {p.key for p in points}, todo)


def _check_distinct_folders(points: list[Point]) -> None:
    seen: dict[str, Point] = {}
    for point in points:
        slug = point_slug(point)
        if slug in seen:
            raise UserInputError(
                f"points {seen[slug].key} and {point.key} would share the folder {POINTS_DIR}/{slug}; rename one of their files"
            )
        seen[slug] = point
