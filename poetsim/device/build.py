"""Cross-compiling the runtime, once per content: objects by a hash of sources and flags, an ELF per arena.

The C sources ship inside the package (`poetsim/device/runtime/`). Objects are compiled once
for a target and kept under `build/runtime/<target>/<hash>/`, the hash covering every source,
the linker script, the flags and the compiler's version; the arena's size is a link-time symbol
(link.ld), so a new RAM budget costs a link, not a compile. Files are written beside their
final name and renamed into place, so that processes building at once never see half a file.
Warnings are errors (-Wall -Wextra -Werror); nothing is allocated on a heap (the link has no
`_sbrk`, so a call to malloc would not link).
"""

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from poetsim.errors import InternalError, ToolMissingError, UserInputError

RUNTIME_DIR = Path(__file__).parent / "runtime"
#: The runtime's C sources, compiled for the device (the decoder, program checks, arena, kernels
#: and engine also build for the host, where the tests run them under sanitizers).
SOURCES = ("board.c", "runtime.c", "decode.c", "program.c", "arena.c", "kernels.c")
HEADERS = ("poet.h", "decode.h", "program.h", "arena.h", "kernels.h")
LINKER_SCRIPT = "link.ld"
CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-ffunction-sections", "-fdata-sections")
COMPILER = "arm-none-eabi-gcc"
#: RAM of the boards (SSRAM2/3) less what the runtime keeps besides the arena: its state, stack and margin.
BOARD_RAM_BYTES = 4 * 2**20
RUNTIME_RAM_BYTES = 64 * 2**10
DEFAULT_CACHE = Path("build") / "runtime"


@dataclass(frozen=True)
class Target:
    """A core the runtime is built for, and the emulated board that runs it."""

    name: str
    machine: str  # qemu-system-arm -M
    flags: tuple[str, ...]
    description: str


TARGETS = {
    "cortex-m4f": Target(
        "cortex-m4f",
        "mps2-an386",
        ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
        "Cortex-M4 with its single-precision FPU (the nRF52840's core), on QEMU's MPS2 AN386 board",
    ),
    "cortex-m0plus": Target(
        "cortex-m0plus",
        "mps2-an385",
        ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
        "ARMv6-M code with software floating point, as a Cortex-M0+ runs it (the MKR1000's SAMD21), on QEMU's "
        "MPS2 AN385 board (a Cortex-M3, which runs ARMv6-M code unchanged; QEMU has no M0+ board with the memory a step needs)",
    ),
}


@dataclass(frozen=True)
class Runtime:
    """A linked runtime: its ELF, its target and the arena it was linked with."""

    elf: Path
    target: Target
    arena_bytes: int


def compiler() -> str:
    """The cross-compiler's path; ToolMissingError (one line, what to install) if absent."""
    found = shutil.which(COMPILER)
    if found is None:
        raise ToolMissingError(
            f"{COMPILER} not found: poetsim device needs gcc-arm-none-eabi and libnewlib-arm-none-eabi (make setup installs them)"
        )
    return found


def source_hash(target: Target, gcc: str) -> str:
    """The hash that names a build: sources, headers, linker script, flags and compiler version."""
    digest = hashlib.sha256()
    for name in SOURCES + HEADERS + (LINKER_SCRIPT,):
        digest.update(name.encode() + b"\0" + (RUNTIME_DIR / name).read_bytes() + b"\0")
    digest.update(" ".join(CFLAGS + target.flags).encode())
    version = subprocess.run([gcc, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()
    digest.update((version[0] if version else "").encode())
    return digest.hexdigest()[:16]


#: The largest arena the emulated board holds beside the runtime.
MAX_ARENA_BYTES = BOARD_RAM_BYTES - RUNTIME_RAM_BYTES


def build_runtime(target: Target, arena_bytes: int, cache: Path = DEFAULT_CACHE) -> Runtime:
    """The runtime for `target` linked with an arena of exactly `arena_bytes`, built if not cached."""
    if arena_bytes < 1:
        raise UserInputError(f"the RAM budget must be at least 1 byte, got {arena_bytes}")
    if arena_bytes > MAX_ARENA_BYTES:
        raise UserInputError(
            f"a RAM budget of {arena_bytes:,} bytes does not fit the emulated board's {BOARD_RAM_BYTES // 2**20} MiB of RAM "
            f"beside the runtime (at most {MAX_ARENA_BYTES:,} bytes)"
        )
    gcc = compiler()
    folder = Path(cache) / target.name / source_hash(target, gcc)
    folder.mkdir(parents=True, exist_ok=True)
    objects = [_compile(gcc, target, source, folder) for source in SOURCES]
    elf = folder / f"runtime-{arena_bytes}.elf"
    if not elf.exists():
        partial = _partial(elf)
        _run(
            [
                gcc,
                *CFLAGS,
                *target.flags,
                "-nostartfiles",
                "--specs=nano.specs",
                "-T",
                str(RUNTIME_DIR / LINKER_SCRIPT),
                f"-Wl,--defsym=POET_ARENA_BYTES={arena_bytes}",
                "-Wl,--gc-sections",
                *map(str, objects),
                "-lm",
                "-o",
                str(partial),
            ],
            "link the runtime",
        )
        os.replace(partial, elf)
    return Runtime(elf, target, arena_bytes)


def _compile(gcc: str, target: Target, source: str, folder: Path) -> Path:
    obj = folder / (Path(source).stem + ".o")
    if not obj.exists():
        partial = _partial(obj)
        _run([gcc, *CFLAGS, *target.flags, "-c", str(RUNTIME_DIR / source), "-o", str(partial)], f"compile {source}")
        os.replace(partial, obj)
    return obj


def _partial(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.part")


def _run(command: list[str], doing: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = " ".join((done.stderr or done.stdout).split())[:400]
        raise InternalError(f"could not {doing}: {detail}")


def flash_bytes(sizes: Mapping[str, int]) -> int:
    """The flash a runtime takes, from its `code_sizes`: its code and constants (text) and the initial values of its data."""
    return sizes["text"] + sizes.get("data", 0)


def code_sizes(runtime: Runtime) -> dict[str, int]:
    """Bytes of the ELF's sections by name (text, data, bss, stack, arena): flash and RAM use."""
    size = shutil.which("arm-none-eabi-size")
    if size is None:
        raise ToolMissingError("arm-none-eabi-size not found: install gcc-arm-none-eabi (make setup does)")
    listing = subprocess.run([size, "-A", str(runtime.elf)], capture_output=True, text=True, check=True).stdout
    sections = {}
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0].lstrip(".")] = int(parts[1])
    return sections
