"""Hardware profiles: one YAML file per platform, every figure with its unit and its source.

Units live in the field names (`latency_s`, `bytes_per_s`, `power_w`). The `sources` map
names, for every numeric field path, where the figure comes from; a profile without a source
for a figure is rejected, so that no number in poetsim is unexplained.
"""

from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from poetsim.errors import UserInputError
from poetsim.inputs.files import MAX_PLATFORM_BYTES, check_text, load_yaml
from poetsim.units import MAX_BYTES

PROFILE_DIR = Path(__file__).parent / "platforms"

#: Ranges of a profile's figures: wide enough for any device from a microcontroller to a
#: rack, narrow enough that every derived time and energy stays a finite number.
MAX_RATE = 1e18  # FLOP/s or bytes/s
MAX_POWER_W = 1e6
MAX_LATENCY_S = 3600.0
MAX_DMA_CHANNELS = 1024


class _Frozen(BaseModel):
    # NaN and infinity are refused however written (.inf, .nan, 1e999).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Compute(_Frozen):
    """The compute engine: one operator at a time."""

    flops_per_s: float = Field(ge=1, le=MAX_RATE, description="Sustained FLOP/s that sets compute time: FLOPs / flops_per_s.")
    power_w: float = Field(
        ge=0,
        le=MAX_POWER_W,
        description="Power drawn while computing, above static_power_w (the two add up to the "
        "device's draw while busy); compute energy = power_w x FLOPs / energy rate.",
    )
    energy_flops_per_s: float | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="Throughput at which power_w was measured, when it differs from flops_per_s "
        "(the POET authors time the Cortex-A72 at 2 GFLOP/s but measured energy at a lower rate). "
        "Energy per FLOP = power_w / energy_flops_per_s.",
    )

    op_flops_per_s: dict[str, float] = Field(
        default_factory=dict,
        description="Optional sustained FLOP/s per operator kind (a node's `op`: conv, relu, conv_grad, ...), "
        "as `poetsim profile` measures them; a node whose op is listed is timed at its kind's rate, and "
        "its energy is power_w x that time. Other nodes use flops_per_s.",
    )

    op_call_s: dict[str, float] = Field(
        default_factory=dict,
        description="Optional fixed seconds per call of an operator kind (loop set-up, the runtime's dispatch), as "
        "`poetsim device profile` measures them: a node whose op is listed in op_flops_per_s takes op_call_s + "
        "FLOPs / its rate. Each kind listed here needs a rate in op_flops_per_s.",
    )

    @model_validator(mode="after")
    def _op_rates_positive(self) -> "Compute":
        bad = sorted(op for op, rate in self.op_flops_per_s.items() if not 1 <= rate <= MAX_RATE)
        if bad:
            raise ValueError(f"op_flops_per_s.{bad[0]}: must be between 1 and {MAX_RATE:g} FLOP/s")
        bad = sorted(op for op, call_s in self.op_call_s.items() if not 0 <= call_s <= MAX_LATENCY_S)
        if bad:
            raise ValueError(f"op_call_s.{bad[0]}: must be between 0 and {MAX_LATENCY_S:g} s")
        unrated = sorted(set(self.op_call_s) - set(self.op_flops_per_s))
        if unrated:
            raise ValueError(f"op_call_s.{unrated[0]}: the kind has no rate in op_flops_per_s")
        return self

    @property
    def joules_per_flop(self) -> float:
        """Compute energy per FLOP: power_w over the rate at which that power was measured."""
        return self.power_w / (self.energy_flops_per_s or self.flops_per_s)

    def seconds(self, op: str, flops: float) -> float:
        """Compute time of `flops` FLOPs of an operator of kind `op` (its fixed cost per call included)."""
        if op in self.op_flops_per_s:
            return self.op_call_s.get(op, 0.0) + flops / self.op_flops_per_s[op]
        return flops / self.flops_per_s

    def joules(self, op: str, flops: float) -> float:
        """Compute energy of `flops` FLOPs of kind `op`: at its measured rate, power_w x time."""
        if op in self.op_flops_per_s:
            return self.power_w * self.seconds(op, flops)
        return flops * self.joules_per_flop


class Transfer(_Frozen):
    """One direction of paging between RAM and secondary storage: latency + bytes / bandwidth."""

    latency_s: float = Field(ge=0, le=MAX_LATENCY_S, description="Fixed cost of one transfer (seek, command, file-system call).")
    bytes_per_s: float = Field(ge=1, le=MAX_RATE, description="Sustained throughput of a transfer once started.")

    def seconds(self, size_bytes: float) -> float:
        """Time to move `size_bytes` in this direction."""
        return self.latency_s + size_bytes / self.bytes_per_s


class Storage(_Frozen):
    """Secondary storage (flash, SD card, eMMC) that pages activations out and in."""

    kind: str = Field(description="What the storage is, in words (e.g. 'microSD over SPI').")
    page_in: Transfer
    page_out: Transfer
    power_w: float = Field(
        ge=0, le=MAX_POWER_W, description="Power drawn while a transfer runs (either direction), above static power."
    )


class Device(_Frozen):
    """The core `poetsim device` builds its runtime for, and the clock that turns its counts into time."""

    core: Literal["cortex-m4f", "cortex-m0plus"] = Field(
        description="The runtime's build target: cortex-m4f (hardware single-precision floats) or cortex-m0plus "
        "(ARMv6-M, software floats); docs/device.md."
    )
    clock_hz: float = Field(
        gt=0,
        le=1e11,
        description="Core clock: a step's emulated instruction count / clock_hz is its time (an instruction a cycle).",
    )


class Platform(_Frozen):
    """A device: RAM, compute engine, storage, DMA and memory bus, with sources."""

    name: str
    title: str
    ram_bytes: int = Field(gt=0, le=MAX_BYTES, description="Physical RAM; what the simulator may allocate (less reserved state).")
    compute: Compute
    static_power_w: float = Field(
        ge=0, le=MAX_POWER_W, description="Drawn for the whole iteration, busy or idle; charged x makespan by the overlap timing."
    )
    storage: Storage
    dma_channels: int = Field(
        ge=1, le=MAX_DMA_CHANNELS, description="Transfers that can run at once between RAM and storage (usually 1: one device)."
    )
    memory_bus_bytes_per_s: float = Field(
        ge=1, le=MAX_RATE, description="RAM bandwidth shared by compute and transfers; only the simulator uses it."
    )
    device: Device | None = Field(
        default=None, description="For `poetsim device`: the core to emulate and its clock (microcontroller profiles)."
    )
    notes: tuple[str, ...] = Field(default=(), description="What a user of this profile should know.")
    sources: dict[str, str] = Field(
        description="For every numeric field path (e.g. 'storage.page_in.latency_s'), where the figure comes from."
    )

    @field_validator("name", "title")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty")
        return check_text(value, "", 200)

    @model_validator(mode="after")
    def _every_figure_has_a_source(self) -> "Platform":
        figures = _numeric_paths(self)
        missing = [path for path in figures if not self.sources.get(path)]
        if missing:
            raise ValueError(f"no source given for {', '.join(missing)} (add them under 'sources')")
        # A source under a misspelt key would leave its figure silently unexplained.
        stray = sorted(set(self.sources) - set(figures))
        if stray:
            raise ValueError(f"sources: {', '.join(stray)} names no figure of this profile")
        return self


def _numeric_paths(model: BaseModel, prefix: str = "") -> list[str]:
    paths = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        path = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            paths += _numeric_paths(value, path + ".")
        elif isinstance(value, dict):  # a table of figures (op_flops_per_s): one source per entry
            paths += [f"{path}.{key}" for key, item in value.items() if _is_number(item)]
        elif _is_number(value):
            paths.append(path)
    return paths


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shipped_platforms() -> list[str]:
    """Names of the profiles shipped with poetsim."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_platform(spec: str | Path) -> Platform:
    """A shipped profile by name, or a user's profile YAML by path (a shipped name wins over a file of that name)."""
    path = Path(spec)
    shipped = str(spec) in shipped_platforms()
    if shipped or not (path.suffix in (".yaml", ".yml") or path.exists()):
        path = PROFILE_DIR / f"{spec}.yaml"
        if not shipped:
            raise UserInputError(f"unknown platform '{spec}' (shipped: {', '.join(shipped_platforms())}; or give a YAML path)")
    data = load_yaml(path, "platform file", MAX_PLATFORM_BYTES)
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: a platform profile must be a mapping")
    try:
        return Platform.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"{path}: {format_validation_error(exc)}") from None


def format_validation_error(exc: ValidationError) -> str:
    """One line per pydantic error, joined with '; ': 'field.path: message'.

    A list too short only because an item of it was refused (pydantic counts the items left) is
    that item's error alone.
    """
    parts = []
    errors = exc.errors()
    refused_items = {tuple(err["loc"][:-1]) for err in errors if err["loc"] and isinstance(err["loc"][-1], int)}
    for err in errors:
        if err["type"] == "too_short" and tuple(err["loc"]) in refused_items:
            continue
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)
