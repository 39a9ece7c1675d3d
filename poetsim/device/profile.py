"""Measuring the emulated core as a platform profile: each operation kind's cost per call and per FLOP.

`profile_device(platform)` runs probe networks of the runtime's operations at several sizes on
the platform's emulated core (keep-all steps; CNNs of widths and sides other than `mcu_cnn`'s
and `mcu_dscnn`'s, MLPs of other widths than `mlp`'s), reads each node's instruction count,
turns it into seconds at the platform's clock, and fits each graph op kind (conv, conv_grad,
relu, ...) with

    seconds = op_call_s[op] + FLOPs / op_flops_per_s[op]

by least squares on the relative error (each sample weighted by 1 / its time), the fixed cost
kept at or above zero. The profile it returns is the datasheet profile with those rates, an
overall `flops_per_s` (all probe FLOPs over all their time) and sources saying how each figure
was measured; powers, storage and the memory bus stay the datasheet's, with their sources. The
input node's cost stays the storage model's (a read of the batch), as in the cost model.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from poetsim import optimiser
from poetsim.device.build import build_runtime
from poetsim.device.program import DeviceProgram, network_program
from poetsim.device.qemu import DEFAULT_TIMEOUT_S, ICOUNT_SHIFT, instructions
from poetsim.device.run import execute, target_of
from poetsim.device.tensors import make_tensors
from poetsim.errors import UserInputError
from poetsim.graphs.layers import Network, Tensor
from poetsim.inputs.profiles import Platform
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import INPUT_OP, node_costs
from poetsim.schedule.formats import encode_binary
from poetsim.schedule.model import Timing


@dataclass(frozen=True)
class Sample:
    """One node of one probe: its op kind, FLOPs and measured seconds at the clock."""

    probe: str
    node: str
    op: str
    flops: float
    seconds: float


@dataclass(frozen=True)
class OpFit:
    """One op kind's fitted cost and how well it fits its samples."""

    op: str
    call_s: float
    flops_per_s: float
    samples: int
    worst_error: float  # largest |predicted - measured| / measured over its samples


def _probe_cnn(batch: int, side: int, width: int):
    """mcu_cnn's structure at another width and image side."""

    def build(net: Network) -> Tensor:
        """Record the probe into `net`; its logits."""
        x = net.input((batch, 1, side, side), labels=batch)
        x = net.relu(net.conv(x, width, 3, stride=2, padding=1, bias=True, name="conv1"), name="relu1")
        x = net.relu(net.conv(x, width, 3, padding=1, bias=True, name="conv2"), name="relu2")
        out = net.relu(net.conv(x, width, 3, padding=1, bias=True, name="block.conv1"), name="block.relu1")
        out = net.conv(out, width, 3, padding=1, bias=True, name="block.conv2")
        x = net.relu(net.add(out, x, name="block.add"), name="block.relu2")
        x = net.relu(net.conv(x, 2 * width, 1, stride=2, bias=True, name="conv3"), name="relu3")
        x = net.maxpool(x, 2, name="pool")
        return net.linear(net.flatten(x), 10, name="fc")

    return f"cnn-b{batch}-s{side}-w{width}", build


def _probe_dscnn(batch: int, side: int, width: int):
    """mcu_dscnn's operations at another width and image side, with a grouped pointwise convolution and ReLU6."""

    def build(net: Network) -> Tensor:
        """Record the probe into `net`; its logits."""

        def norm(x: Tensor, name: str, relu=net.relu) -> Tensor:
            return relu(net.batchnorm(x, name=f"{name}.bn"), name=f"{name}.relu")

        x = net.input((batch, 1, side, side), labels=batch)
        x = norm(net.conv(x, width, 3, stride=2, padding=1, name="conv1"), "conv1")
        x = norm(net.depthwise_conv(x, 3, padding=1, name="dw1"), "dw1")
        x = norm(net.conv(x, 2 * width, 1, groups=2, name="pw1"), "pw1", relu=net.relu6)
        x = norm(net.depthwise_conv(x, 3, stride=2, padding=1, name="dw2"), "dw2")
        x = norm(net.conv(x, 2 * width, 1, name="pw2"), "pw2")
        return net.linear(net.global_avgpool(x, name="pool"), 10, name="fc")

    return f"dscnn-b{batch}-s{side}-w{width}", build


def _probe_mlp(batch: int, side: int, hidden: int):
    """A two-hidden-layer MLP at another width and input size."""

    def build(net: Network) -> Tensor:
        """Record the probe into `net`; its logits."""
        x = net.flatten(net.input((batch, 1, side, side), labels=batch))
        x = net.relu(net.linear(x, hidden, name="fc1"), name="relu1")
        x = net.relu(net.linear(x, hidden // 2, name="fc2"), name="relu2")
        return net.linear(x, 10, name="fc3")

    return f"mlp-b{batch}-s{side}-h{hidden}", build


#: The probes: three residual CNNs, three depthwise separable CNNs and three MLPs, none of them a
#: zoo model's shape.
PROBES = (
    _probe_cnn(1, 16, 4),
    _probe_cnn(1, 20, 12),
    _probe_cnn(2, 12, 6),
    _probe_dscnn(1, 16, 4),
    _probe_dscnn(1, 20, 12),
    _probe_dscnn(2, 12, 6),
    _probe_mlp(1, 16, 64),
    _probe_mlp(4, 12, 128),
    _probe_mlp(2, 20, 32),
)


def measure(platform: Platform, work: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Sample]:
    """Every node of every probe's keep-all step on the platform's emulated core, in seconds at its clock."""
    target, clock_hz = target_of(platform)
    samples = []
    for name, build in PROBES:
        program: DeviceProgram = network_program(name, build)
        graph = program.graph
        costs = node_costs(graph, platform)
        schedule, _ = optimiser.keep_all(graph, costs, Timing.OVERLAP)
        peak = int(check_schedule(schedule, graph, costs, Timing.OVERLAP).peak_ram_bytes)
        step = execute(
            build_runtime(target, peak), program, make_tensors(program), encode_binary(schedule), work / name, timeout_s
        )
        for node, ticks in zip(graph.nodes, step.raw.nodes):
            if node.op != INPUT_OP:
                samples.append(Sample(name, node.name, node.op, node.flops, instructions(ticks.first) / clock_hz))
    return samples


def fit(samples: list[Sample]) -> dict[str, OpFit]:
    """Each op kind's fixed cost and rate (module doc), by weighted least squares."""
    fits = {}
    for op in sorted({s.op for s in samples}):
        mine = [s for s in samples if s.op == op]
        flops = np.array([s.flops for s in mine])
        seconds = np.array([s.seconds for s in mine])
        weight = 1.0 / seconds
        design = np.stack([np.ones_like(flops), flops], axis=1) * weight[:, None]
        (call_s, per_flop), *_ = np.linalg.lstsq(design, np.ones_like(flops), rcond=None)
        if call_s < 0 or per_flop <= 0:  # no fixed cost: a rate through the origin
            call_s, per_flop = 0.0, float(np.sum(flops * weight**2 * seconds) / np.sum((flops * weight) ** 2))
        predicted = call_s + flops * per_flop
        worst = float(np.max(np.abs(predicted - seconds) / seconds))
        fits[op] = OpFit(op, float(call_s), float(1.0 / per_flop), len(mine), worst)
    return fits


#: What a measured profile's title ends with; `measured_name` and a second measurement read it.
EMULATED_TITLE = ", compute as emulated by QEMU"
_MEASURED_NOTE = "Compute costs measured by `poetsim device profile`"
_KEPT_NOTE = "Powers, storage and memory bus are the "


def measured_name(platform: Platform) -> str:
    """The default name of `platform` measured: <name>-qemu, or its own name if it was measured before."""
    return platform.name if platform.title.endswith(EMULATED_TITLE) else f"{platform.name}-qemu"


def profile_device(
    platform: Platform, name: str, work: Path, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[Platform, dict[str, OpFit]]:
    """The platform's profile with compute costs measured on its emulated core (module doc), and the fits."""
    target, clock_hz = target_of(platform)
    samples = measure(platform, work, timeout_s)
    fits = fit(samples)
    overall = sum(s.flops for s in samples) / sum(s.seconds for s in samples)
    how = (
        f"poetsim device profile: the runtime on QEMU {target.machine} ({target.name}, -icount shift={ICOUNT_SHIFT}), "
        f"instructions at {clock_hz / 1e6:g} MHz, one a cycle"
    )
    sources = dict(platform.sources)
    sources["compute.flops_per_s"] = f"{how}: all FLOPs of {len(PROBES)} probe networks over their time"
    for op, found in fits.items():
        sources[f"compute.op_flops_per_s.{op}"] = (
            f"{how}: least-squares fit over {found.samples} {op} nodes of the probes "
            f"(largest error {100 * found.worst_error:.1f} %)"
        )
        sources[f"compute.op_call_s.{op}"] = f"{how}: the same fit's fixed cost per call"
    compute = platform.compute.model_copy(
        update={
            "flops_per_s": overall,
            "op_flops_per_s": {op: f.flops_per_s for op, f in fits.items()},
            "op_call_s": {op: f.call_s for op, f in fits.items()},
        }
    )
    # A profile measured before is measured again: its own measurement notes give way to the new ones.
    inherited = [note for note in platform.notes if not note.startswith(_MEASURED_NOTE)]
    if not any(note.startswith(_KEPT_NOTE) for note in inherited):
        inherited.insert(0, f"{_KEPT_NOTE}{platform.name} datasheet profile's, with its sources.")
    notes = (
        f"{_MEASURED_NOTE} on QEMU's emulated {target.name}: instruction counts at the "
        f"{clock_hz / 1e6:g} MHz clock, one instruction a cycle. QEMU is not cycle-accurate (no flash wait states, no "
        "pipeline stalls, every instruction one cycle), so these are the runtime's instruction costs, not the chip's cycles.",
        *inherited,
    )
    measured = Platform.model_validate(
        {
            **platform.model_dump(),
            "name": name,
            "title": platform.title.removesuffix(EMULATED_TITLE) + EMULATED_TITLE,
            "compute": compute.model_dump(),
            "sources": sources,
            "notes": notes,
        }
    )
    return measured, fits


def write_profile(platform: Platform, path: Path, command: str) -> None:
    """Write a profile as YAML that `load_platform` reads back, headed by the command that measured it."""
    data = platform.model_dump(mode="json", exclude_none=True)
    data["notes"] = list(data["notes"])
    header = f"# Measured by `{command}` (docs/device.md): compute costs on the emulated core.\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=1000), encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"{path}: cannot write: {exc.strerror or exc}") from None
