"""Scenarios: the YAML a user writes to say what to solve, validated once into frozen models.

    name: resnet18-rpi4
    model: resnet18_cifar        # zoo name or graph JSON path; or a list of them
    batch_size: 32
    platform: rpi4               # shipped name or profile YAML path; or a list
    budgets:
      ram: 50%                   # of the keep-all peak; or bytes (1048576) or units (256KiB); or a list
      runtime: 1.2x              # multiple of one plain forward+backward pass; or a list
    strategies: [hybrid, recompute-only, paging-only]

Any of model, platform, ram and runtime may be a list: the scenario is then the grid of their
combinations (`Scenario.points`). Errors name the file and the field path, one line each.
"""

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from poetsim.errors import UserInputError
from poetsim.profiles import format_validation_error
from poetsim.schedule import Timing
from poetsim.units import RamSpec, parse_ram, parse_runtime

#: What each training-state reservation keeps in RAM besides activations, in multiples of the
#: parameter bytes: the parameters, their gradients and the optimiser's state per parameter.
RESERVE_MULTIPLE = {"none": 0, "sgd": 2, "momentum": 3, "adam": 4}
BASELINES = ("keep-all", "checkpoint-sqrt")
SOLVED = ("hybrid", "recompute-only", "paging-only")


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def _ram_list(value: Any) -> list[RamSpec]:
    return [parse_ram(v) for v in _as_list(value)]


def _runtime_list(value: Any) -> list[float]:
    return [parse_runtime(v) for v in _as_list(value)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budgets(_Frozen):
    """RAM and runtime budgets; each a value or a list of values (a sweep axis)."""

    ram: Annotated[tuple[RamSpec, ...], BeforeValidator(_ram_list)] = Field(
        description="Activation RAM: bytes, a size with unit (256KiB) or a percentage of the keep-all peak.")
    runtime: Annotated[tuple[float, ...], BeforeValidator(_runtime_list)] = Field(
        default=(1.2,), description="Deadline as a multiple of one plain forward+backward pass (1.2x).")


class Scenario(_Frozen):
    """One scenario file: what to train, on what, under which budgets, with which strategies."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Used for the results folder.")
    description: str = ""
    model: Annotated[tuple[str, ...], BeforeValidator(_as_list)]
    batch_size: int = Field(default=1, gt=0)
    input_size: int | None = Field(default=None, gt=0, description="Image side for vision models.")
    seq_len: int | None = Field(default=None, gt=0, description="Sequence length for transformers.")
    flops_per_cost_unit: float = Field(default=1e6, gt=0, description="FLOPs per cost_cpu unit of imported node-link graphs.")
    platform: Annotated[tuple[str, ...], BeforeValidator(_as_list)]
    budgets: Budgets
    strategies: tuple[str, ...] = SOLVED
    timing: Timing = Timing.OVERLAP
    solver: str = "highs"
    time_limit_s: float = Field(default=120.0, gt=0)
    reserve_training_state: str = Field(
        default="none", description="Keep parameters, gradients and optimiser state in the RAM budget: none, sgd, momentum or adam.")

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [s for s in value if s not in SOLVED + BASELINES]
        if unknown:
            raise ValueError(f"unknown strategy '{unknown[0]}' (use {', '.join(SOLVED + BASELINES)})")
        if not value:
            raise ValueError("give at least one strategy")
        return value

    @field_validator("solver")
    @classmethod
    def _known_solver(cls, value: str) -> str:
        if value not in ("highs", "glpk", "cbc"):
            raise ValueError(f"unknown solver '{value}' (use highs, glpk or cbc)")
        return value

    @field_validator("reserve_training_state")
    @classmethod
    def _known_reserve(cls, value: str) -> str:
        if value not in RESERVE_MULTIPLE:
            raise ValueError(f"unknown reservation '{value}' (use {', '.join(RESERVE_MULTIPLE)})")
        return value

    def points(self) -> list["Point"]:
        """Every combination of model, platform, RAM, runtime and strategy, in a stable order."""
        return [
            Point(self.name, model, platform, ram, runtime, strategy)
            for model, platform, ram, runtime, strategy in itertools.product(
                self.model, self.platform, self.budgets.ram, self.budgets.runtime, self.strategies)
        ]


@dataclass(frozen=True)
class Point:
    """One point of a scenario's grid; `key` identifies it in results files."""

    scenario: str
    model: str
    platform: str
    ram: RamSpec
    runtime_x: float
    strategy: str

    @property
    def key(self) -> str:
        return f"{self.model}|{self.platform}|{self.ram}|{self.runtime_x:g}x|{self.strategy}"


def load_scenario(path: str | Path, check_references: bool = True) -> Scenario:
    """Read and validate a scenario file; UserInputError names the file and field.

    With `check_references`, also resolve every model and platform and check RAM budgets
    against the platforms' RAM (this builds the graphs, which takes well under a second each).
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such scenario file") from None
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise UserInputError(f"{path}: not valid YAML ({first})") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: a scenario must be a mapping of fields")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"{path}: {format_validation_error(exc)}") from None
    scenario = _resolve_relative_paths(scenario, path.parent)
    if check_references:
        check_scenario_references(scenario, path)
    return scenario


def _resolve_relative_paths(scenario: Scenario, base: Path) -> Scenario:
    """Graph and profile paths in a scenario are relative to the scenario file."""
    def fix(spec: str) -> str:
        if spec.endswith((".json", ".yaml", ".yml")) and not Path(spec).is_absolute():
            candidate = base / spec
            return str(candidate.resolve()) if candidate.exists() else spec
        return spec

    return scenario.model_copy(update={
        "model": tuple(fix(m) for m in scenario.model),
        "platform": tuple(fix(p) for p in scenario.platform),
    })


def check_scenario_references(scenario: Scenario, path: Path) -> None:
    """Resolve models and platforms; reject a RAM budget above a platform's RAM."""
    from poetsim.graphio import load_graph
    from poetsim.profiles import load_platform

    graphs = {}
    for index, model in enumerate(scenario.model):
        try:
            graphs[model] = load_graph(model, scenario.batch_size, scenario.input_size, scenario.seq_len, scenario.flops_per_cost_unit)
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
                    raise UserInputError(
                        f"{path}: budgets.ram{_at(scenario.budgets.ram, ram_index)}: {ram} is {total:,} bytes for {model}, "
                        f"above the {platform.ram_bytes:,} bytes of RAM of platform {platform.name}")


def reserved_bytes(graph, reserve_training_state: str) -> int:
    """RAM kept for parameters, gradients and optimiser state (0 unless the scenario asks)."""
    return RESERVE_MULTIPLE[reserve_training_state] * graph.param_bytes


def _at(values: tuple, index: int) -> str:
    return f"[{index}]" if len(values) > 1 else ""
