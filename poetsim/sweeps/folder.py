"""A sweep's results folder, as its client writes and reads it.

It holds the point folders, the schedules later points start from, and the scenario's copy.

Only the sweep's own process writes here (workers send their files back,
`poetsim.sweeps.point`). A point's folder is written before its row is appended to runs.csv,
each file whole (written beside its name, then renamed over it): a row always has its folder,
and a sweep killed meanwhile leaves whole files of a point that has no row yet, which
`--resume` runs and writes again.
"""

import os
from pathlib import Path

import yaml

from poetsim.errors import PoetsimError, StorageError, UserInputError
from poetsim.folders import RunFolder, StudyFolder
from poetsim.inputs.scenario import Point, Scenario
from poetsim.runs import RunsFile
from poetsim.schedule.formats import load_json
from poetsim.schedule.model import Schedule
from poetsim.strategies import COMPARE_BASELINES
from poetsim.sweeps.grid import point_slug
from poetsim.units import number_text


def point_folder(directory: Path, point: Point) -> Path:
    """Where `point` keeps its schedule, trace and result in the results folder `directory`."""
    return StudyFolder(directory).point(point_slug(point)).path


def write_point(directory: Path, point: Point, files: tuple[tuple[str, bytes], ...]) -> None:
    """Write a point's files (as a worker sent them back) into its folder; StorageError if the machine refuses."""
    if not files:
        return
    folder = point_folder(directory, point)
    target = folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files:
            target = folder / name
            partial = folder / f".{name}.partial"
            partial.write_bytes(data)
            os.replace(partial, target)
    except OSError as exc:
        raise StorageError.from_os_error(exc, "write", target) from None


def read_schedule(folder: Path) -> Schedule | None:
    """The schedule a point saved in `folder`; None if it has none or it cannot be read.

    A start is a hint, and a file cut short by a kill in an earlier run is skipped.
    """
    try:
        if RunFolder(folder).schedule_json.is_file():
            return load_json(RunFolder(folder).schedule_json)
    except (PoetsimError, OSError):
        pass
    return None


def make_folder(directory: Path) -> None:
    """Make the results folder (and its parents); StorageError if the machine refuses."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError.from_os_error(exc, "make the folder", directory) from None


def _copy_data(scenario: Scenario, directory: Path) -> dict:
    """The scenario as its copy in `directory` holds it: file paths relative to the folder."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["model"] = [_relative(m, directory) for m in scenario.model]
    data["platform"] = [_relative(p, directory) for p in scenario.platform]
    data["budgets"] = {
        "ram": [str(r) for r in scenario.budgets.ram],
        "runtime": [f"{number_text(x)}x" for x in scenario.budgets.runtime],
    }
    if "strategies" in data:
        data["strategies"] = list(scenario.strategies)
    return data


#: What a resumed sweep may change of its folder's scenario: the text, and the wall-clock guard
#: (rows that reached it say so). Its grid may grow; every other field decides what a row means.
_FREE_ON_RESUME = ("description", "time_limit_s")
_GRID = {"model": "model", "platform": "platform", "strategies": "strategies", "ram": "budgets.ram", "runtime": "budgets.runtime"}


def check_resumable(scenario: Scenario, directory: Path) -> None:
    """UserInputError if the results in `directory` were swept with another scenario than `scenario`.

    The scenario may add models, platforms, budgets and strategies to the grid of the folder's
    copy, not drop any (the rows of what it dropped would stay in runs.csv beside the new grid),
    and must keep every other field (effort, timing, solver, batch and the rest) as it was.
    A folder without a copy, or without a row in runs.csv (a sweep stopped before its first
    point), has nothing to compare.
    """
    if not RunsFile(StudyFolder(directory).runs_csv).records():
        return
    path = StudyFolder(directory).scenario_yaml
    try:
        old = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return
    if not isinstance(old, dict):
        return
    new = _copy_data(scenario, directory)
    grids_old = {name: old.get(name, []) for name in ("model", "platform", "strategies")} | old.get("budgets", {})
    grids_new = {name: new.get(name, []) for name in ("model", "platform", "strategies")} | new["budgets"]
    if "strategies" not in old:
        grids_old["strategies"] = list(Scenario.model_fields["strategies"].default)
    if "strategies" not in new:
        grids_new["strategies"] = list(scenario.strategies)
    grids_new["strategies"] = [*grids_new["strategies"], *COMPARE_BASELINES]  # rows `compare` added, not the scenario's
    for name, field in _GRID.items():
        dropped = [str(v) for v in grids_old.get(name, []) if v not in grids_new.get(name, [])]
        if dropped:
            raise UserInputError(
                f"{path}: {field} no longer has {', '.join(dropped)}, whose rows runs.csv holds; "
                "resume with the folder's grid or a larger one, or choose another --out"
            )
    for field in sorted((set(old) | set(new)) - set(_FREE_ON_RESUME) - set(_GRID) - {"budgets"}):
        if old.get(field) != new.get(field):
            raise UserInputError(
                f"{path}: {field} was {old.get(field, 'the default')}, now {new.get(field, 'the default')}; the rows in "
                "runs.csv were swept with the folder's: resume with it, or choose another --out"
            )


def save_scenario_copy(scenario: Scenario, directory: Path) -> None:
    """Keep the scenario beside its results, so `compare` and `report` can find it again.

    File paths are written relative to `directory`, so the copy works wherever the repository
    (or the results folder with its inputs) is cloned or moved.
    """
    data = _copy_data(scenario, directory)
    path = StudyFolder(directory).scenario_yaml
    temporary = path.with_name(path.name + ".tmp")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temporary.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        os.replace(temporary, path)  # whole or not at all: `compare` and `report` read it later
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StorageError.from_os_error(exc, "write", path) from None


def _relative(spec: str, directory: Path) -> str:
    """A file path relative to `directory`; a name as it is."""
    return os.path.relpath(spec, directory.resolve()) if Path(spec).is_absolute() else spec
