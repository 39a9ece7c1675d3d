"""`poetsim device run` as a user runs it: the issue's command, its JSON, and bad input in one line."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"


def poetsim(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "poetsim", *map(str, args)], capture_output=True, text=True, cwd=cwd or ROOT, timeout=600, env=env
    )


def assert_one_line_error(result, code, fragment):
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def test_the_mlp_of_the_mcu_scenario_runs_on_the_nrf52840_as_predicted(tmp_path):
    result = poetsim(
        "device",
        "run",
        MCU,
        "--platform",
        "nrf52840",
        "--ram",
        "70%",
        "--runtime",
        "1.5x",
        "--strategy",
        "hybrid",
        "--json",
        "--out",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and all(check["ok"] for check in report["checks"].values())
    assert report["gradients_bitwise_equal"]
    assert report["peak_bytes"] == report["predicted_peak_bytes"] <= report["ram_budget_bytes"] == report["arena_bytes"]
    assert report["recomputations"] == 2 and report["page_outs"] == report["expected"]["page_outs"] == 0
    assert report["schedule_bytes"] == 38
    assert report["target"] == "cortex-m4f" and report["clock_hz"] == 64e6
    assert report["compute_s"] > 0 and report["predicted_compute_s"] > 0
    # The runtime's flash: its code and constants, a few KB for the kernels of an MLP (not the arena).
    assert 4_000 < report["runtime_flash_bytes"] < report["ram_budget_bytes"] + 64_000
    assert (tmp_path / "schedule" / "result.bin").is_file() and (tmp_path / "keep-all" / "grads.bin").is_file()


def test_a_saved_schedule_runs_and_a_corrupted_one_is_refused_in_one_line(tmp_path):
    solved = poetsim(
        "solve", MCU, "--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--strategy", "hybrid", "--out", tmp_path
    )
    assert solved.returncode == 0, solved.stderr
    args = ("device", "run", MCU, "--platform", "nrf52840", "--ram", "85%", "--runtime", "1.5x", "--json", "--schedule")
    good = poetsim(*args, tmp_path / "schedule.bin")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["schedule"] == "schedule.bin"
    blob = (tmp_path / "schedule.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(blob[:-3])
    assert_one_line_error(poetsim(*args, tmp_path / "cut.bin"), 2, "cut.bin: binary schedule: truncated")
    corrupted = bytearray(blob)
    corrupted[8] ^= 0x10  # a stage header: the instructions no longer make sense
    (tmp_path / "flipped.bin").write_bytes(bytes(corrupted))
    flipped = poetsim(*args, tmp_path / "flipped.bin")
    assert flipped.returncode in (2, 6), flipped.stderr
    assert_one_line_error(flipped, flipped.returncode, "")


def test_a_schedule_for_another_graph_is_refused_in_one_line(tmp_path):
    solved = poetsim(
        "solve", MCU, "--platform", "nrf52840", "--ram", "100%", "--runtime", "1x", "--strategy", "hybrid", "--out", tmp_path
    )
    assert solved.returncode == 0, solved.stderr
    args = ("--model", "mcu_cnn", "--platform", "nrf52840", "--ram", "100%", "--runtime", "1x")
    result = poetsim("device", "run", MCU, *args, "--schedule", tmp_path / "schedule.json")
    assert_one_line_error(result, 6, "the schedule is for 13 nodes but graph 'mcu_cnn' has 29")


def test_a_budget_below_the_minimum_is_refused_in_one_line():
    result = poetsim("device", "run", MCU, "--platform", "nrf52840", "--ram", "8KiB", "--runtime", "1.5x", "--strategy", "hybrid")
    assert_one_line_error(result, 3, "below the 12,288 bytes")


@pytest.mark.parametrize(
    "options, fragment",
    [
        (("--platform", "rpi4", "--ram", "100%"), "platform rpi4 has no 'device' section"),
        (("--model", "resnet18_cifar", "--platform", "nrf52840", "--ram", "2%"), "137 nodes, more than the device runtime's 128"),
    ],
)
def test_what_the_runtime_cannot_run_is_refused_in_one_line(options, fragment):
    point = ("--runtime", "1x", "--strategy", "hybrid")
    assert_one_line_error(poetsim("device", "run", MCU, *point, *options), 2, fragment)


def test_a_missing_toolchain_is_named_in_one_line(tmp_path):
    """PATH without the cross-compiler, then without the emulator: each is named, nothing runs."""
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare)}
    args = ("device", "run", MCU, "--platform", "nrf52840", "--ram", "100%", "--runtime", "1x", "--strategy", "hybrid")
    assert_one_line_error(poetsim(*args, env=env), 4, "arm-none-eabi-gcc not found")
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size"):
        (bare / tool).symlink_to(shutil.which(tool))
    assert_one_line_error(poetsim(*args, "--out", tmp_path / "run", env=env), 4, "qemu-system-arm not found")


@pytest.mark.parametrize("command", [("sweep", MCU), ("profile", "--platform", "nrf52840", "--out")])
def test_a_missing_toolchain_stops_sweep_and_profile_before_any_work(tmp_path, command):
    """Without the cross-compiler, device sweep neither sweeps nor records failed rows, and profile measures nothing."""
    bare = tmp_path / "bin"
    bare.mkdir()
    out = tmp_path / "out"
    args = ("device", *command, out / "profile.yaml") if command[0] == "profile" else ("device", *command, "--out", out)
    assert_one_line_error(poetsim(*args, env={**os.environ, "PATH": str(bare)}), 4, "arm-none-eabi-gcc not found")
    assert not out.exists()


def test_no_emulator_outlives_the_command(tmp_path):
    point = ("--platform", "nrf52840", "--ram", "100%", "--runtime", "1x", "--strategy", "hybrid", "--out", tmp_path)
    assert poetsim("device", "run", MCU, *point).returncode == 0
    left = [p for p in psutil.process_iter(["name", "cwd"]) if p.info["name"] == "qemu-system-arm"]
    assert not [p for p in left if str(p.info["cwd"] or "").startswith(str(tmp_path))]
