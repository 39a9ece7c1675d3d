"""The core installs alone and runs; a command that needs an extra says which in one line.

`pip install .` into a fresh virtual environment, without PyTorch, SCIP, gurobipy or Playwright,
runs the core commands; a command that needs an extra exits 4.

Slow (a fresh install takes minutes): `make test-slow`.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from poetsim.extras import EXTRAS, SOLVERS, TORCH

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"
POINT = ["--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--strategy", "hybrid"]


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """The `bin` folder of a fresh venv holding poetsim's core alone."""
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)], capture_output=True, text=True, timeout=3600
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv / "bin"


def poetsim(core: Path, cwd: Path, *args: str | Path) -> subprocess.CompletedProcess:
    """The installed `poetsim` (its own script, so that the source tree is not on sys.path)."""
    return subprocess.run([str(core / "poetsim"), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_the_core_installs_without_any_extra(core):
    listed = subprocess.run([str(core / "pip"), "list", "--format=freeze"], capture_output=True, text=True, check=True)
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert "poetsim" in names
    assert not names & {module.lower() for extra in EXTRAS for module in extra.modules}


def test_the_core_commands_run_without_the_extras(core, tmp_path):
    for args in (["--version"], ["models"], ["platforms"], ["validate", MCU], ["graph", "mlp"]):
        result = poetsim(core, tmp_path, *args)
        assert result.returncode == 0, (args, result.stderr)
    solved = poetsim(core, tmp_path, "solve", MCU, *POINT)
    assert solved.returncode == 0 and "optimal (proven)" in solved.stdout, solved.stderr
    simulated = poetsim(core, tmp_path, "simulate", MCU, *POINT, "--out", tmp_path / "sim")
    assert simulated.returncode == 0, simulated.stderr
    assert (tmp_path / "sim" / "run.html").is_file() and (tmp_path / "sim" / "trace.csv").is_file()

    scenario = tmp_path / "small.yaml"
    scenario.write_text(
        "name: small\nmodel: mlp\nplatform: nrf52840\nbudgets:\n  ram: [100%, 70%]\n  runtime: 1.5x\nstrategies: [hybrid]\n"
    )
    for args in (
        ["sweep", scenario, "--out", tmp_path / "study"],
        ["compare", tmp_path / "study"],
        ["report", tmp_path / "study"],
    ):
        result = poetsim(core, tmp_path, *args)
        assert result.returncode == 0, (args, result.stderr)
    assert (tmp_path / "study" / "report.html").is_file()
    guard = poetsim(core, tmp_path, "check", tmp_path / "study", "--baseline", tmp_path / "study" / "runs.csv")
    assert guard.returncode == 0 and guard.stdout.startswith("ok: no point regressed"), guard.stderr


def test_a_command_that_needs_torch_names_its_extra_in_one_line(core, tmp_path):
    result = poetsim(core, tmp_path, "import-torch", "poetsim.pytorch.models:mlp", "--input-shape", "2,784", "--out", "g.json")
    assert result.returncode == 4
    assert result.stderr.splitlines() == [
        f"poetsim: error: this command needs PyTorch (torch), which is not installed: {TORCH.install}"
    ]


def test_a_solver_of_the_solvers_extra_names_it_in_one_line(core, tmp_path):
    result = poetsim(core, tmp_path, "solve", MCU, *POINT, "--solver", "scip")
    assert result.returncode == 4
    assert len(result.stderr.splitlines()) == 1 and SOLVERS.install in result.stderr
