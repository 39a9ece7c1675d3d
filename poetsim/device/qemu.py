"""Running the runtime on QEMU's emulated Cortex-M board, with a timeout, leaving nothing behind.

The image is loaded into the board's PSRAM before reset (QEMU's generic loader device), the
runtime's ELF into its code memory; the runtime writes result.bin and grads.bin into the run's
folder through Arm semihosting and stops the emulator. QEMU runs in a session of its own and is
killed (the whole process group) on every way out: a timeout, an error, Ctrl-C.

Time: `-icount shift=ICOUNT_SHIFT` makes every guest instruction advance the virtual clock by
2**ICOUNT_SHIFT ns, whatever the host does, so the board's 25 MHz timer counts instructions and
two runs of one step read the same ticks. QEMU is not cycle-accurate: a count is instructions,
not cycles (no wait states, no pipeline stalls, a multiply as long as an add), and seconds are
that count at the platform's clock, one instruction per cycle.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from poetsim.device.build import Runtime
from poetsim.errors import DeviceError, ToolMissingError

QEMU = "qemu-system-arm"
ICOUNT_SHIFT = 6
#: The board's timer clock (the MPS2 peripheral clock), in Hz, and the virtual nanoseconds per instruction.
TIMER_HZ = 25_000_000
NS_PER_INSTRUCTION = 2**ICOUNT_SHIFT
EXTERNAL_BASE = 0x21000000
EXTERNAL_BYTES = 16 * 2**20
DEFAULT_TIMEOUT_S = 120.0


def instructions(ticks: int) -> float:
    """Instructions executed during `ticks` of the board's timer (exact to a fraction of one)."""
    return ticks * (1e9 / TIMER_HZ) / NS_PER_INSTRUCTION


@dataclass(frozen=True)
class Output:
    """What one emulator run left: result.bin, grads.bin (absent after a failure), its wall time."""

    result: bytes
    grads: bytes | None
    wall_s: float


def emulator() -> str:
    """The emulator's path; ToolMissingError (one line, what to install) if absent."""
    found = shutil.which(QEMU)
    if found is None:
        raise ToolMissingError(f"{QEMU} not found: poetsim device needs qemu-system-arm (make setup installs it)")
    return found


def run_image(runtime: Runtime, image: bytes, folder: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> Output:
    """Run `runtime` on `image` in `folder` (created); DeviceError on a timeout or without a result."""
    if len(image) > EXTERNAL_BYTES:
        raise DeviceError(f"the step needs {len(image):,} bytes of external memory, the board has {EXTERNAL_BYTES:,}")
    qemu = emulator()
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("result.bin", "grads.bin"):
        (folder / name).unlink(missing_ok=True)
    (folder / "image.bin").write_bytes(image)
    command = [
        qemu,
        "-M",
        runtime.target.machine,
        "-nographic",
        "-monitor",
        "none",
        "-serial",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-icount",
        f"shift={ICOUNT_SHIFT},align=off",
        "-kernel",
        str(runtime.elf.resolve()),
        "-device",
        f"loader,file=image.bin,addr={EXTERNAL_BASE:#x},force-raw=on",
    ]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DeviceError(f"the emulated step did not finish within {timeout_s:g} s (stopped)") from None
    finally:
        _stop(process)
    wall_s = time.perf_counter() - started
    result = folder / "result.bin"
    if not result.exists():
        detail = " ".join(stderr.decode(errors="replace").split())[:300]
        raise DeviceError(
            f"the emulator exited with code {process.returncode} without a result" + (f": {detail}" if detail else "")
        )
    grads = folder / "grads.bin"
    return Output(result.read_bytes(), grads.read_bytes() if grads.exists() else None, wall_s)


def _stop(process: subprocess.Popen) -> None:
    """Kill the emulator's process group if it still runs, and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
