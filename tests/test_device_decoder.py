"""The runtime's decoder and engine on the host under AddressSanitizer and UBSan.

1,000 random, mutated and truncated schedule files, each a clean status, and the same verdict as
poetsim's own decoder and checker. Also: the C structures have the sizes poetsim.device.formats
reads.
"""

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from poetsim import optimiser
from poetsim.device.build import RUNTIME_DIR
from poetsim.device.formats import (
    IMAGE_HEADER_BYTES,
    NODE_WORDS,
    RESULT_BYTES,
    STATUS_TEXT,
    pack_image,
    pack_program,
)
from poetsim.device.program import device_program
from poetsim.device.tensors import make_tensors
from poetsim.errors import ScheduleError, UserInputError
from poetsim.pipeline import run_strategy
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.formats import decode_binary, encode_binary
from poetsim.schedule.model import Compute, Free, PageIn, PageOut, Schedule, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

HOST_SOURCES = ("runtime.c", "decode.c", "program.c", "arena.c", "kernels.c")
HARNESS = Path(__file__).parent / "test_device_host.c"
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")


def _gcc() -> str:
    found = shutil.which("gcc")
    assert found, "the host's gcc is needed (make setup installs it)"
    return found


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    binary = tmp_path_factory.mktemp("host") / "runtime-host"
    command = [_gcc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-g", *SANITIZE, f"-I{RUNTIME_DIR}", str(HARNESS)]
    command += [str(RUNTIME_DIR / name) for name in HOST_SOURCES] + ["-lm", "-o", str(binary)]
    subprocess.run(command, check=True)
    return binary


def _case(model: str):
    """`model` on the MKR1000 at 70 %: its hybrid schedule, which recomputes and pages, and keep-all."""
    problem = build_problem(model, "mkr1000", parse_ram("70%"), 1.5)
    run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
    assert run.checked is not None and run.checked.page_outs > 0 and run.checked.recomputations > 0
    keep_all, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    return problem, run.schedule, keep_all


@pytest.fixture(scope="module")
def cnn():
    """The residual CNN's case (`_case`)."""
    return _case("mcu_cnn")


def _random_schedule(rng: random.Random, num_nodes: int) -> Schedule:
    """A well-formed schedule of random instructions: each stage ends with its own compute."""
    kinds = (Compute, PageOut, PageIn, Free)
    stages = []
    for t in range(num_nodes):
        stage = [rng.choice(kinds)(rng.randrange(num_nodes)) for _ in range(rng.randrange(4))]
        stages.append((*stage, Compute(t)))
    return Schedule("random", num_nodes, rng.choice((Timing.OVERLAP, Timing.COMPUTE_ONLY)), tuple(stages))


def _files(base: list[bytes], num_nodes: int, count: int) -> list[bytes]:
    """Truncations, mutations, garbage and random well-formed schedules: `count` in all."""
    rng = random.Random(40)
    files = [blob[:cut] for blob in base for cut in range(len(blob))]  # every truncation
    while len(files) < count:
        choice = rng.random()
        blob = bytearray(rng.choice(base))
        if choice < 0.35:  # flip, insert or delete a few bytes
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(blob))
                action = rng.randrange(3)
                if action == 0:
                    blob[at] ^= 1 << rng.randrange(8)
                elif action == 1:
                    blob.insert(at, rng.randrange(256))
                elif len(blob) > 1:
                    del blob[at]
            files.append(bytes(blob))
        elif choice < 0.5:  # garbage, with or without the magic
            garbage = bytes(rng.randrange(256) for _ in range(rng.randint(0, 80)))
            files.append((b"POET\x01" + garbage) if rng.random() < 0.5 else garbage)
        elif choice < 0.6:  # numbers too long or too large
            files.append(b"POET\x01\x01" + bytes([0xFF] * rng.randint(1, 12)) + b"\x01")
        else:
            files.append(encode_binary(_random_schedule(rng, num_nodes)))
    return files[:count]


def _python_verdict(blob: bytes, problem) -> str:
    """'format', 'meaning', 'full' (valid but above the arena) or 'ok', by poetsim's decoder and checker."""
    try:
        schedule = decode_binary(blob)
    except UserInputError:
        return "format"
    try:
        figures = check_schedule(schedule, problem.graph, problem.costs, schedule.timing)
    except ScheduleError:
        return "meaning"
    return "ok" if figures.peak_ram_bytes <= problem.graph.keep_all_peak_bytes else "full"


def test_a_thousand_bad_schedules_each_give_a_clean_status_and_the_checker_s_verdict(harness, cnn, tmp_path):
    problem, schedule, keep_all = cnn
    program = device_program(problem.graph)
    tensors = make_tensors(program)
    base = [encode_binary(schedule), encode_binary(keep_all)]
    files = _files(base, len(problem.graph), 1000)
    assert len(files) == 1000 and sum(len(f) < len(base[0]) and base[0].startswith(f) for f in files) >= len(base[0])
    room = max(len(f) for f in files) + 16  # poisoned bytes after even the longest file
    image = pack_image(
        pack_program(program.records), bytes(room), tensors.weight_bytes(), tensors.batch_bytes(), sum(problem.graph.output_bytes)
    )
    (tmp_path / "base.bin").write_bytes(image)
    paths = []
    for i, blob in enumerate(files):
        path = tmp_path / f"s{i:04d}.bin"
        path.write_bytes(blob)
        paths.append(str(path))
    env = {"POET_ARENA_BYTES": str(problem.graph.keep_all_peak_bytes), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(harness), str(tmp_path / "base.bin"), *paths], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 1000
    agree = {"format": range(10, 20), "meaning": (*range(15, 20), *range(30, 38)), "full": (40,), "ok": (0,)}
    for blob, line in zip(files, lines):
        status = int(line.split()[1])
        assert status in STATUS_TEXT, line
        verdict = _python_verdict(blob, problem)
        assert status in agree[verdict], (line, verdict, blob.hex())
    refused = sum(int(line.split()[1]) != 0 for line in lines)
    assert refused >= 990  # a random change rarely leaves a valid schedule


@pytest.mark.parametrize("model", ["mcu_cnn", "mcu_dscnn"])
def test_valid_schedules_run_to_the_end_on_the_host(harness, model, tmp_path):
    """The base schedules run (status 0) under the sanitizers, both CNNs' kernels: the harness is not refusing everything."""
    problem, schedule, keep_all = _case(model)
    program = device_program(problem.graph)
    tensors = make_tensors(program)
    blobs = [encode_binary(schedule), encode_binary(keep_all)]
    image = pack_image(
        pack_program(program.records), bytes(max(map(len, blobs))), tensors.weight_bytes(), tensors.batch_bytes(), 1 << 20
    )
    (tmp_path / "base.bin").write_bytes(image)
    for i, blob in enumerate(blobs):
        (tmp_path / f"v{i}.bin").write_bytes(blob)
    env = {"POET_ARENA_BYTES": str(problem.graph.keep_all_peak_bytes), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(harness), str(tmp_path / "base.bin"), str(tmp_path / "v0.bin"), str(tmp_path / "v1.bin")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert [line.split()[1] for line in done.stdout.splitlines()] == ["0", "0"]


def test_the_c_structures_have_the_sizes_the_host_reads(tmp_path):
    source = tmp_path / "sizes.c"
    source.write_text(
        '#include <stdio.h>\n#include "poet.h"\n'
        'int main(void) { printf("%zu %zu %zu\\n", sizeof(poet_image_header), sizeof(poet_node), sizeof(poet_result)); '
        "return 0; }\n"
    )
    binary = tmp_path / "sizes"
    subprocess.run([_gcc(), "-std=c99", f"-I{RUNTIME_DIR}", str(source), "-o", str(binary)], check=True)
    header, node, result = map(int, subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.split())
    assert (header, node, result) == (IMAGE_HEADER_BYTES, 4 * NODE_WORDS, RESULT_BYTES)
