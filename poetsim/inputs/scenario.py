"""Scenarios: the YAML a user writes to say what to solve, validated once into frozen models.

    name: resnet18-rpi4
    model: resnet18_cifar        # zoo name or graph JSON path; or a list of them
    batch_size: 32
    platform: rpi4               # shipped name or profile YAML path; or a list
    budgets:
      ram: 50%                   # of the keep-all peak; or bytes (1048576) or units (256KiB); or a list
      runtime: 1.2x              # multiple of one plain forward+backward pass; or a list
    strategies: [hybrid, recompute-only, paging-only]
    effort: 12                   # work units per solved point; the guard: time_limit_s (default 30 s per unit)

Any of model, platform, ram and runtime may be a list: the scenario is then the grid of their
combinations (`Scenario.points`). Errors name the file and the field path, one line each.
"""

import functools
import hashlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from poetsim.errors import UserInputError
from poetsim.graphs.io import load_graph
from poetsim.inputs.files import MAX_GRAPH_BYTES, MAX_SCENARIO_BYTES, load_yaml, read_bytes
from poetsim.inputs.profiles import Platform, format_validation_error, load_platform
from poetsim.inputs.solvers import known as known_solver
from poetsim.schedule.model import Timing
from poetsim.schedule.problem import RESERVE_MULTIPLE, reserved_bytes
from poetsim.strategies import Kind, known, names
from poetsim.units import GUARD_S_PER_UNIT, RamSpec, number_text, parse_ram, parse_runtime, resolve_limits

#: A solved point's effort when the scenario states neither it nor a time limit.
DEFAULT_EFFORT = 24.0

#: Most points a scenario's grid may have: far more than any sweep can run.
MAX_POINTS = 100_000
#: Most values in one list of a scenario (models, platforms, budgets, strategies).
MAX_LIST = 1000


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def _ram_list(value: Any) -> list[RamSpec]:
    values = _as_list(value)
    return _unique_as_written(values, [parse_ram(v) for v in values], lambda r: r.key)


def _runtime_list(value: Any) -> list[float]:
    values = _as_list(value)
    return _unique_as_written(values, [parse_runtime(v) for v in values], number_text)


def _unique_as_written(written: list, parsed: list, key) -> list:
    """`parsed` if no two values have the same key; ValueError quoting both as written otherwise.

    Keys are made at full precision (`number_text`), so values that differ in any digit are two
    budgets (1.0 and 1.0000001), and values that are the same number however written are one
    repeat (70% and 70.0%, 1.0 and 1.0x, 256KiB and 262144).
    """
    seen: dict = {}
    for text, value in zip(written, parsed):
        k = key(value)
        if k in seen:
            raise ValueError(
                f"{text!s} is the same budget as {seen[k]!s}: give each value once, or two results would share a key"
            )
        seen[k] = text
    return parsed


class _Frozen(BaseModel):
    # NaN and infinity are refused however written (.inf, .nan, 1e999).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class BudgetGrid(_Frozen):
    """The RAM and runtime budgets of a scenario; each a value or a list of values (a sweep axis)."""

    ram: Annotated[tuple[RamSpec, ...], BeforeValidator(_ram_list)] = Field(
        min_length=1,
        max_length=MAX_LIST,
        description="Activation RAM: bytes, a size with unit (256KiB) or a percentage of the keep-all peak.",
    )
    runtime: Annotated[tuple[float, ...], BeforeValidator(_runtime_list)] = Field(
        default=(1.2,),
        min_length=1,
        max_length=MAX_LIST,
        description="Deadline as a multiple of one plain forward+backward pass (1.2x).",
    )


class Scenario(_Frozen):
    """One scenario file: what to train, on what, under which budgets, with which strategies."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        max_length=100,
        description="Used for the results folder: letters, digits, '_', '.', '-', starting with a letter or digit.",
    )
    description: str = Field(default="", max_length=10_000)
    model: Annotated[tuple[Annotated[str, Field(min_length=1, max_length=4096)], ...], BeforeValidator(_as_list)] = Field(
        min_length=1, max_length=MAX_LIST
    )
    batch_size: int = Field(default=1, gt=0, le=1 << 20)
    input_size: int | None = Field(default=None, gt=0, le=1 << 16, description="Image side for vision models.")
    seq_len: int | None = Field(default=None, gt=0, le=1 << 24, description="Sequence length for transformers.")
    flops_per_cost_unit: float = Field(
        default=1e6, gt=0, le=1e15, description="FLOPs per cost_cpu unit of imported node-link graphs."
    )
    platform: Annotated[tuple[Annotated[str, Field(min_length=1, max_length=4096)], ...], BeforeValidator(_as_list)] = Field(
        min_length=1, max_length=MAX_LIST
    )
    budgets: BudgetGrid
    strategies: Annotated[tuple[str, ...], BeforeValidator(_as_list)] = Field(default=names(Kind.SOLVED), max_length=MAX_LIST)
    timing: Timing = Timing.OVERLAP
    solver: str = "highs"
    effort: float = Field(
        default=DEFAULT_EFFORT,
        gt=0,
        le=1e6,
        description=(
            "Work per solved point, in work units (about a second each on the reference machine, idle): "
            "the same answer on any machine and at any load."
        ),
    )
    time_limit_s: float = Field(
        default=GUARD_S_PER_UNIT * DEFAULT_EFFORT,
        gt=0,
        le=1e6,
        description=f"Wall-clock guard per solved point, seconds; by default {GUARD_S_PER_UNIT:g} s per unit of effort.",
    )
    reserve_training_state: str = Field(
        default="none",
        description="Keep parameters, gradients and optimiser state in the RAM budget: none, sgd, momentum or adam.",
    )

    @field_validator("batch_size", "input_size", "seq_len", "flops_per_cost_unit", "effort", "time_limit_s", mode="before")
    @classmethod
    def _not_a_yes_or_no(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic would read true as 1
            raise ValueError(f"{str(value).lower()} is a yes or no, not a number")
        return value

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            known(name)
        if not value:
            raise ValueError("give at least one strategy")
        return value

    @field_validator("solver")
    @classmethod
    def _known_solver(cls, value: str) -> str:
        return known_solver(value)

    @field_validator("reserve_training_state")
    @classmethod
    def _known_reserve(cls, value: str) -> str:
        if value not in RESERVE_MULTIPLE:
            raise ValueError(f"unknown reservation '{value}' (use {', '.join(RESERVE_MULTIPLE)})")
        return value

    @field_validator("model", "platform", "strategies")
    @classmethod
    def _no_repeats(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _unique(value, lambda v: v)

    @model_validator(mode="before")
    @classmethod
    def _limits(cls, data: Any) -> Any:
        """An effort or a guard stated alone derives the other (`work.resolve_limits`)."""
        if not isinstance(data, dict) or ("effort" in data) == ("time_limit_s" in data):
            return data
        if any(isinstance(data.get(name), bool) for name in ("effort", "time_limit_s")):
            return data  # a yes or no is not a number: its field says so
        try:
            given = [None if data.get(name) is None else float(data[name]) for name in ("effort", "time_limit_s")]
            if not all(value is None or math.isfinite(value) for value in given):
                return data  # its field says so, and no guard the user never wrote is derived from it
            effort, time_limit_s = resolve_limits(*given)
        except (TypeError, ValueError):
            return data  # the fields' own validation says what is wrong
        return {**data, "effort": effort, "time_limit_s": time_limit_s}

    def with_limits(self, effort: float | None = None, time_limit_s: float | None = None) -> "Scenario":
        """The scenario with the effort or the guard given elsewhere (the command line).

        Either alone derives the other, as in a scenario file.
        """
        if effort is None and time_limit_s is None:
            return self
        effort, time_limit_s = resolve_limits(effort, time_limit_s)
        return self.model_copy(update={"effort": effort, "time_limit_s": time_limit_s})

    @model_validator(mode="after")
    def _grid_size(self) -> "Scenario":
        size = len(self.model) * len(self.platform) * len(self.budgets.ram) * len(self.budgets.runtime) * len(self.strategies)
        if size > MAX_POINTS:
            raise ValueError(f"the grid has {size:,} points, more than the {MAX_POINTS:,} a scenario may have")
        return self

    def points(self) -> list["Point"]:
        """Every combination of model, platform, RAM, runtime and strategy, in a stable order."""
        return [
            Point(self.name, model, platform, ram, runtime, strategy, source_key(model), source_key(platform))
            for model, platform, ram, runtime, strategy in itertools.product(
                self.model, self.platform, self.budgets.ram, self.budgets.runtime, self.strategies
            )
        ]


def _unique(values: tuple, key):
    """`values` if no two have the same key; ValueError naming the repeat otherwise."""
    seen: dict = {}
    for value in values:
        k = key(value)
        if k in seen:
            raise ValueError(f"{value} repeats {seen[k]} (each value once, or two results would share a key)")
        seen[k] = value
    return values


@dataclass(frozen=True)
class Point:
    """One point of a scenario's grid; `key` identifies it in results files.

    `model` and `platform` are what loads them (a zoo or shipped name, or a file's absolute
    path); `model_key` and `platform_key` name a file by its name and a hash of its content
    instead (`source_key`, taken once when the grid is made), so that results made in one clone
    match those of another wherever it lies, and two different files of the same name never
    share a key.
    """

    scenario: str
    model: str
    platform: str
    ram: RamSpec
    runtime_x: float
    strategy: str
    model_key: str
    platform_key: str

    @property
    def key(self) -> str:
        """The point's identity in results files (runs.csv's point_key): its five coordinates joined by "|".

        Model and platform enter by `model_key` and `platform_key`, not by how they are loaded, so
        that the key is the same in every clone; the runtime is written as `number_text` writes it.
        """
        return f"{self.model_key}|{self.platform_key}|{self.ram.key}|{number_text(self.runtime_x)}x|{self.strategy}"

    @property
    def cell(self) -> tuple[str, str, str, float]:
        """The grid cell of the point: everything but the strategy."""
        return (self.model, self.platform, self.ram.key, self.runtime_x)


def source_key(spec: str) -> str:
    """A zoo or shipped name as it is; a file as `name@hash`, eight hex digits of its content's SHA-256."""
    path = Path(spec)
    if not path.is_absolute():
        return spec
    try:
        stat = path.stat()
    except OSError:
        return f"{path.name}@missing"
    return f"{path.name}@{_content_hash(str(path), stat.st_mtime_ns, stat.st_size)}"


@functools.lru_cache(maxsize=256)
def _content_hash(path: str, mtime_ns: int, size: int) -> str:
    """The first eight hex digits of the file's SHA-256 (cached while the file is unchanged).

    Only a regular file under the graph size cap is read (`poetsim.inputs.files`); anything else
    is "unreadable", and loading it fails with the reason.
    """
    try:
        return hashlib.sha256(read_bytes(path, "file", MAX_GRAPH_BYTES)).hexdigest()[:8]
    except UserInputError:
        return "unreadable"


#: Specs ending like this are files; anything else is a zoo model or a shipped platform name.
FILE_SUFFIXES = (".json", ".yaml", ".yml")


def load_scenario(path: str | Path, check_references: bool = True) -> Scenario:
    """Read and validate a scenario file; UserInputError names the file and field.

    Graph and profile paths in the file are relative to the file's folder, never to the
    working directory. With `check_references`, also resolve every model and platform and check
    RAM budgets against the platforms' RAM (this builds the graphs, well under a second each).
    """
    path = Path(path)
    data = load_yaml(path, "scenario file", MAX_SCENARIO_BYTES)
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: a scenario must be a mapping of fields")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"{path}: {format_validation_error(exc)}") from None
    written = scenario
    scenario = _resolve_relative_paths(scenario, path)
    _check_distinct_sources(scenario, written, path)
    if check_references:
        check_scenario_references(scenario, path)
    return scenario


def _resolve_relative_paths(scenario: Scenario, path: Path) -> Scenario:
    """Graph and profile paths in a scenario are relative to the scenario file's folder."""
    base = path.parent.resolve()

    def fix(spec: str, field: str, values: tuple) -> str:
        if not spec.endswith(FILE_SUFFIXES):
            return spec
        target = (base / spec).resolve()
        if not target.is_file():
            index = values.index(spec)
            raise UserInputError(
                f"{path}: {field}{_at(values, index)}: no such file {spec} (paths are relative to the scenario's folder, {base})"
            )
        return str(target)

    return scenario.model_copy(
        update={
            "model": tuple(fix(m, "model", scenario.model) for m in scenario.model),
            "platform": tuple(fix(p, "platform", scenario.platform) for p in scenario.platform),
        }
    )


def _check_distinct_sources(scenario: Scenario, written: Scenario, path: Path) -> None:
    """Refuse two entries that are the same file (or the same name and content): they would share keys.

    `written` is the scenario before its paths were resolved, to quote the entries as written.
    """
    for field in ("model", "platform"):
        values, shown = getattr(scenario, field), getattr(written, field)
        seen: dict[str, int] = {}
        for index, spec in enumerate(values):
            key = source_key(spec)
            if key in seen:
                first = seen[key]
                raise UserInputError(
                    f"{path}: {field}[{index}]: {shown[index]} has the same name and content as "
                    f"{field}[{first}] ({shown[first]}); list it once"
                )
            seen[key] = index


def check_scenario_references(scenario: Scenario, path: Path) -> None:
    """Resolve models and platforms; reject a RAM budget above a platform's RAM."""
    graphs = {}
    for index, model in enumerate(scenario.model):
        try:
            graphs[model] = load_graph(
                model, scenario.batch_size, scenario.input_size, scenario.seq_len, scenario.flops_per_cost_unit
            )
        except UserInputError as exc:
            raise UserInputError(f"{path}: model{_at(scenario.model, index)}: {exc}") from None
    for index, name in enumerate(scenario.platform):
        try:
            platform = load_platform(name)
        except UserInputError as exc:
            raise UserInputError(f"{path}: platform{_at(scenario.platform, index)}: {exc}") from None
        for model, graph in graphs.items():
            for ram_index, ram in enumerate(scenario.budgets.ram):
                total = ram.resolve(graph.keep_all_peak_bytes) + reserved_bytes(graph, scenario.reserve_training_state)
                if total > platform.ram_bytes:
                    above = above_platform_ram(ram, total, model, platform)
                    raise UserInputError(f"{path}: budgets.ram{_at(scenario.budgets.ram, ram_index)}: {above}")


def above_platform_ram(ram: RamSpec, total_bytes: int, model: str, platform: Platform) -> str:
    """In words: the budget `ram` (with the reserved training state, `total_bytes`) is more than the platform's RAM."""
    return (
        f"{ram} is {total_bytes:,} bytes for {source_key(model)}, "
        f"above the {platform.ram_bytes:,} bytes of RAM of platform {platform.name}"
    )


def _at(values: tuple, index: int) -> str:
    return f"[{index}]" if len(values) > 1 else ""
