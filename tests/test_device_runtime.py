"""The runtime on QEMU's emulated Cortex-M.

A CNN step that recomputes and pages, the arena's hard limit, bad schedules refused by the
device itself, timeouts, and nothing left running.
"""

from dataclasses import replace

import psutil
import pytest
from device_networks import grouped

from poetsim import optimiser
from poetsim.device.build import TARGETS, build_runtime, code_sizes
from poetsim.device.formats import Kind, pack_image, pack_program
from poetsim.device.program import device_program, network_program
from poetsim.device.qemu import run_image
from poetsim.device.reference import REFERENCE_RTOL, reference_step
from poetsim.device.run import Session, execute, reference_error, run_on_device
from poetsim.device.tensors import make_tensors
from poetsim.errors import DeviceError
from poetsim.inputs.profiles import load_platform
from poetsim.pipeline import run_strategy
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import node_costs
from poetsim.schedule.formats import encode_binary
from poetsim.schedule.model import Compute, Free, PageOut, Schedule, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram


@pytest.fixture(scope="module")
def cnn():
    """The CNN on the MKR1000 (Cortex-M0+ code) at 70 % of keep-all: hybrid recomputes and pages."""
    problem = build_problem("mcu_cnn", "mkr1000", parse_ram("70%"), 1.5)
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
    assert run.schedule is not None and run.checked is not None
    return problem, run.schedule, run.checked


@pytest.fixture(scope="module")
def cnn_run(cnn, tmp_path_factory):
    problem, schedule, _ = cnn
    return run_on_device(problem, schedule, out_dir=tmp_path_factory.mktemp("cnn"))


def _qemu_left(folder) -> list:
    """Emulator processes still running in `folder` (none should ever be)."""
    found = []
    for process in psutil.process_iter(["name", "cwd"]):
        if process.info["name"] == "qemu-system-arm" and str(process.info["cwd"] or "").startswith(str(folder)):
            found.append(process)
    return found


def test_a_cnn_schedule_that_recomputes_and_pages_runs_as_predicted(cnn, cnn_run):
    _, _, predicted = cnn
    summary = cnn_run.summary()
    assert predicted.recomputations > 0 and predicted.page_outs > 0 and predicted.page_ins > 0
    assert cnn_run.ok, cnn_run.failed
    assert summary["gradients_bitwise_equal"]
    assert summary["peak_bytes"] == predicted.peak_ram_bytes <= summary["ram_budget_bytes"] == summary["arena_bytes"]
    assert summary["recomputations"] == predicted.recomputations
    assert (summary["page_outs"], summary["page_ins"]) == (predicted.page_outs, predicted.page_ins)
    assert summary["page_out_bytes"] == summary["expected"]["page_out_bytes"] > 0
    assert summary["reference_max_error"] < 1e-4
    assert summary["target"] == "cortex-m0plus"


def test_the_schedule_s_step_differs_from_keep_all_only_in_ram_and_work(cnn_run):
    """Same gradients, less RAM, more instructions (the recomputations)."""
    assert cnn_run.step.same_bits(cnn_run.keep_all)
    assert cnn_run.step.raw.fields["peak_bytes"] < cnn_run.keep_all.raw.fields["peak_bytes"]
    assert cnn_run.step.instructions("compute") > cnn_run.keep_all.instructions("compute")


def test_instruction_counts_are_the_same_from_run_to_run(cnn, cnn_run, tmp_path):
    problem, schedule, _ = cnn
    again = run_on_device(problem, schedule, out_dir=tmp_path)
    assert again.step.raw.fields == cnn_run.step.raw.fields
    assert again.step.raw.nodes == cnn_run.step.raw.nodes


def test_an_arena_one_byte_below_the_peak_is_a_hard_failure_of_the_runtime(cnn, tmp_path):
    problem, schedule, predicted = cnn
    program = device_program(problem.graph)
    tensors = make_tensors(program)
    peak = int(predicted.peak_ram_bytes)
    target = TARGETS["cortex-m0plus"]
    exact = execute(build_runtime(target, peak), program, tensors, encode_binary(schedule), tmp_path / "exact")
    assert exact.raw.fields["peak_bytes"] == peak
    with pytest.raises(DeviceError, match=rf"the arena is full.* of {peak - 1:,} live"):
        execute(build_runtime(target, peak - 1), program, tensors, encode_binary(schedule), tmp_path / "short")
    assert not _qemu_left(tmp_path)


def _bad_schedules(problem, schedule) -> dict[str, tuple[bytes, str]]:
    blob = encode_binary(schedule)
    stages = list(schedule.stages)
    stages[3] = (Free(20),) + stages[3]  # node 20 is not in RAM in stage 3
    freed_early = Schedule(schedule.graph_name, schedule.num_nodes, schedule.timing, tuple(stages))
    other, _ = optimiser.keep_all(build_problem("mlp", "mkr1000", parse_ram("100%"), 1.0).graph, problem.costs, problem.timing)
    return {
        "truncated": (blob[: len(blob) // 2], "truncated"),
        "magic": (b"PEOT" + blob[4:], "does not start with b'POET'"),
        "trailing": (blob + b"\x00", "bytes follow"),
        "other graph": (encode_binary(other), "another number of nodes"),
        "not in RAM": (encode_binary(freed_early), "stage 3, instruction 0, node 20 (block.relu2.grad): the node is not in RAM"),
    }


def test_bad_schedules_are_refused_by_the_device_in_one_line_and_nothing_is_left_running(cnn, tmp_path):
    problem, schedule, _ = cnn
    program = device_program(problem.graph)
    tensors = make_tensors(program)
    runtime = build_runtime(TARGETS["cortex-m0plus"], problem.budgets.ram_bytes)
    for name, (blob, message) in _bad_schedules(problem, schedule).items():
        with pytest.raises(DeviceError) as raised:
            execute(runtime, program, tensors, blob, tmp_path / name.replace(" ", "-"))
        assert message in str(raised.value) and "\n" not in str(raised.value), (name, str(raised.value))
    assert not _qemu_left(tmp_path)


def test_a_step_past_its_timeout_is_stopped_and_reaped(cnn, tmp_path):
    problem, schedule, _ = cnn
    program = device_program(problem.graph)
    tensors = make_tensors(program)
    image = pack_image(
        pack_program(program.records), encode_binary(schedule), tensors.weight_bytes(), tensors.batch_bytes(), 1 << 20
    )
    runtime = build_runtime(TARGETS["cortex-m0plus"], problem.budgets.ram_bytes)
    with pytest.raises(DeviceError, match=r"did not finish within 0\.01 s"):
        run_image(runtime, image, tmp_path, timeout_s=0.01)
    assert not _qemu_left(tmp_path)
    assert not [p for p in psutil.Process().children(recursive=True) if p.name() == "qemu-system-arm"]


def test_an_mlp_step_on_the_m4f_recomputes_as_scheduled_with_any_seed():
    """The MLP of scenarios/mcu.yaml on the nRF52840 at 70 % of keep-all, with other weights and batch."""
    problem = build_problem("mlp", "nrf52840", parse_ram("70%"), 1.5, batch_size=2)
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
    assert run.schedule is not None
    result = run_on_device(problem, run.schedule, session=Session(seed=3))
    assert result.ok, result.failed
    assert result.target == "cortex-m4f"
    scheduled = check_schedule(run.schedule, problem.graph, problem.costs, problem.timing).recomputations
    assert result.step.raw.fields["recomputations"] == scheduled > 0


def test_the_reference_check_holds_the_losses_too(tmp_path):
    """The step's losses are held to the NumPy reference as its gradients are: a loss off by 1 % fails the check."""
    problem = build_problem("mlp", "nrf52840", parse_ram("100%"), 1.5, batch_size=2)
    schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    result = run_on_device(problem, schedule)
    program = device_program(problem.graph)
    reference = reference_step(program, make_tensors(program, 0))
    assert reference_error(result.step, reference, program) <= REFERENCE_RTOL
    losses = tuple(loss * 1.01 for loss in result.step.raw.losses)
    off = replace(result.step, raw=replace(result.step.raw, losses=losses))
    assert reference_error(off, reference, program) > REFERENCE_RTOL


def test_the_runtime_fits_a_microcontroller_s_flash_and_keeps_little_ram_of_its_own():
    sizes = code_sizes(build_runtime(TARGETS["cortex-m4f"], 4096))
    assert sizes["text"] < 32 * 1024
    assert sizes["data"] + sizes["bss"] < 16 * 1024
    assert sizes["arena"] == 4096


def test_compute_only_timing_lands_page_ins_at_the_stage_end_and_keeps_the_predicted_peak():
    problem = build_problem("mcu_cnn", "mkr1000", parse_ram("65%"), 1.5, timing="compute-only")
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
    assert run.schedule is not None and run.checked is not None
    assert run.checked.page_ins > 0 and run.checked.recomputations > 0
    result = run_on_device(problem, run.schedule)
    assert result.ok, result.failed
    assert result.step.raw.fields["timing"] == 0


def test_both_cores_give_the_same_gradients_bit_for_bit(tmp_path):
    """IEEE single precision without fused multiply-add, in hardware on the M4F and in software on the M0+."""
    problem = build_problem("mcu_cnn", "nrf52840", parse_ram("100%"), 1.0)
    program = device_program(problem.graph)
    schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    tensors = make_tensors(program, seed=7)
    steps = [
        execute(
            build_runtime(TARGETS[core], problem.budgets.ram_bytes), program, tensors, encode_binary(schedule), tmp_path / core
        )
        for core in ("cortex-m4f", "cortex-m0plus")
    ]
    assert steps[0].same_bits(steps[1])
    assert steps[0].instructions("step") < steps[1].instructions("step")  # software floats take more


def test_an_output_freed_twice_while_being_paged_out_holds_both_buffers_to_the_stage_end():
    """An output freed twice while being paged out holds both buffers until the stage ends.

    PageOut(0), Free(0), Compute(0), Free(0) in one stage: under overlap timing both copies of
    the batch stay until the stage ends (the checker's rule), so the arena's peak holds them
    both.
    """
    base = build_problem("mlp", "nrf52840", parse_ram("100%"), 2.0, batch_size=2)
    keep_all, _ = optimiser.keep_all(base.graph, base.costs, base.timing)
    stages = list(keep_all.stages)
    stages[5] = (PageOut(0), Free(0), Compute(0), Free(0)) + stages[5]
    stages[6] = (Compute(0),) + stages[6]
    schedule = Schedule(keep_all.graph_name, keep_all.num_nodes, keep_all.timing, tuple(stages))
    peak = int(check_schedule(schedule, base.graph, base.costs, base.timing).peak_ram_bytes)
    assert peak > base.graph.keep_all_peak_bytes
    problem = build_problem("mlp", "nrf52840", parse_ram(f"{peak}B"), 2.0, batch_size=2)
    result = run_on_device(problem, schedule)
    assert result.ok, result.failed
    assert result.step.raw.fields["peak_bytes"] == peak == result.ram_budget_bytes


def test_a_depthwise_separable_cnn_schedule_that_recomputes_and_pages_runs_as_predicted(tmp_path):
    """mcu_dscnn on the MKR1000 at 70 % of keep-all: depthwise convolutions and global pooling, recomputed and paged."""
    problem = build_problem("mcu_dscnn", "mkr1000", parse_ram("70%"), 1.5)
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
    assert run.schedule is not None and run.checked is not None
    assert run.checked.recomputations > 0 and run.checked.page_outs > 0
    result = run_on_device(problem, run.schedule, out_dir=tmp_path)
    assert result.ok, result.failed
    summary = result.summary()
    assert summary["gradients_bitwise_equal"] and summary["reference_max_error"] < 1e-4
    assert summary["peak_bytes"] == run.checked.peak_ram_bytes
    assert summary["recomputations"] == run.checked.recomputations


def test_batch_norm_and_a_grouped_convolution_run_within_the_reference_and_alike_on_both_cores(tmp_path):
    """Batch norm, a grouped convolution, ReLU6, a depthwise convolution and global pooling: held to the NumPy step."""
    program = network_program("grouped", grouped)
    graph = program.graph
    costs = node_costs(graph, load_platform("nrf52840"))
    schedule, _ = optimiser.keep_all(graph, costs, Timing.OVERLAP)
    peak = int(check_schedule(schedule, graph, costs, Timing.OVERLAP).peak_ram_bytes)
    tensors = make_tensors(program, seed=5)
    reference = reference_step(program, tensors)
    steps = [
        execute(build_runtime(TARGETS[core], peak), program, tensors, encode_binary(schedule), tmp_path / core)
        for core in ("cortex-m4f", "cortex-m0plus")
    ]
    assert steps[0].same_bits(steps[1])
    assert reference_error(steps[0], reference, program) <= REFERENCE_RTOL


@pytest.mark.parametrize(
    "kind, change, check",
    [
        (Kind.MAXPOOL_GRAD, {"output_bytes": 0}, "output size does not match the shape"),
        (Kind.CONV, {"dims_at": (10, 3)}, "dimensions that do not fit together"),  # 3 groups: 1 channel in, 8 out
        (Kind.BATCHNORM, {"param_offset": 10**6}, "weights outside the weights region"),
    ],
    ids=["pooling gradient without output", "groups not dividing the channels", "batch norm weights outside"],
)
def test_a_malformed_program_record_is_refused_before_anything_runs(kind, change, check, tmp_path):
    """A pooling gradient with no output, groups that do not divide the channels, batch norm's scale outside the weights."""
    model = "mcu_dscnn" if kind is Kind.BATCHNORM else "mcu_cnn"
    problem = build_problem(model, "nrf52840", parse_ram("100%"), 1.0)
    program = device_program(problem.graph)
    at = next(i for i, r in enumerate(program.records) if r.kind is kind)
    record = program.records[at]
    if "dims_at" in change:
        where, value = change["dims_at"]
        record = replace(record, dims=(*record.dims[:where], value, *record.dims[where + 1 :]))
    else:
        record = replace(record, **change)
    broken = replace(program, records=(*program.records[:at], record, *program.records[at + 1 :]))
    schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    runtime = build_runtime(TARGETS["cortex-m4f"], problem.budgets.ram_bytes)
    with pytest.raises(DeviceError, match=rf"the device refused the program: .*: {check}"):
        execute(runtime, broken, make_tensors(program), encode_binary(schedule), tmp_path)
