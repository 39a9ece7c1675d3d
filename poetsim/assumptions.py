"""The cost and timing model's assumptions, in the words users see (--help, summaries, chart footers).

docs/cost-model.md states them in full; these are the short forms, kept in one place so that the
CLI and the report cannot drift apart.
"""

#: One line per timing model, as `--help` and report footers state it.
TIMING_MODELS = {
    "compute-only": (
        "the paper's model: the deadline counts compute time only, a page-in takes RAM from the next stage, no static power"
    ),
    "overlap": (
        "each stage lasts max(compute, DMA transfers / channels), a page-in holds RAM from the start of "
        "its stage, a page-out releases RAM at the stage end, energy adds static power x runtime"
    ),
}

TIMING_HELP = f"compute-only: {TIMING_MODELS['compute-only']}. overlap (default): {TIMING_MODELS['overlap']}."

#: What every figure poetsim reports assumes, whatever the timing model.
ASSUMPTIONS = (
    "Assumptions: activation RAM only (parameters, gradients and optimiser state outside the budget "
    "unless the scenario reserves them); costs from the platform profile: compute time the roofline "
    "max(FLOPs / rate, bytes moved / memory bus), compute energy proportional to FLOPs, a transfer = "
    "latency + bytes / bandwidth (docs/cost-model.md); runtime budget = multiple of one "
    "plain forward+backward pass"
)

#: What the simulator adds to the optimiser's model.
SIMULATOR_ASSUMPTIONS = (
    "Simulator: one compute engine, the profile's DMA channels serving transfers in issue order, RAM "
    "capacity = the RAM budget (at most platform RAM minus reserved state), a memory bus fairly shared by "
    "compute and transfers (contention stretches time, not per-op energy), static power x makespan; "
    "barrier mode (default) ends a stage when its computes and transfers end, as the overlap model does; "
    "free-running does not"
)

#: What a figure measured on the emulated device means (poetsim device; docs/device.md).
DEVICE_ASSUMPTIONS = (
    "Device: the runtime (poetsim/device/runtime, C99, no heap) on QEMU's emulated Cortex-M; time is the "
    "emulated instruction count at the profile's clock, one instruction a cycle (QEMU is not cycle-accurate: no "
    "wait states or stalls); weights, their gradients, the batch and paged activations live outside the arena, "
    "which is exactly the RAM budget; paging copies to an emulated flash region, its time is the profile's, not "
    "measured; docs/device.md"
)
