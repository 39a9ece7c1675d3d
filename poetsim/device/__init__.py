"""Running schedules on an emulated microcontroller: a C runtime on QEMU's Cortex-M, held to the prediction.

    from poetsim.device import run_on_device
    run = run_on_device(problem, schedule)      # a poetsim.schedule.problem.Problem and its Schedule
    print(run.ok, run.summary()["peak_bytes"])   # every check passed; the arena's measured peak

The parts: `program` (a zoo graph as the runtime's operations), `tensors` (seeded weights and
batch), `formats` (the bytes between host and device), `build` (cross-compiling, cached),
`qemu` (the emulator, with a timeout), `run` (one schedule against its prediction),
`reference` (the NumPy step the gradients are held to), `profile` (measured costs as a
platform profile) and `study` (every schedule of a sweep on the device). The C sources are in
`runtime/`; docs/device.md describes the whole.
"""

from poetsim.device.program import DeviceProgram, device_program
from poetsim.device.run import DeviceRun, Session, run_on_device

__all__ = ["DeviceProgram", "DeviceRun", "Session", "device_program", "run_on_device"]
