"""The public API as the README shows it, in a fresh interpreter: names resolve to the functions."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_poetsim_sweep_is_the_function_after_another_public_name_was_used(tmp_path):
    """`poetsim.sweep` stays the API function after `poetsim.solve` imported poetsim.api.

    Using `poetsim.solve` imports poetsim.api and its submodules; the package's name `sweep`
    must still be the API function that the README calls next.
    """
    script = (
        "import poetsim\n"
        "run = poetsim.solve('scenarios/mcu.yaml', platform='nrf52840', ram='100%', runtime='1.5x', "
        "strategy='hybrid')\n"
        "assert run.status == 'optimal', run.status\n"
        f"result = poetsim.sweep('scenarios/mcu.yaml', {str(tmp_path / 'mcu')!r}, jobs=1)\n"
        "assert result.counts() == {'infeasible': 28, 'optimal': 20}, result.counts()\n"
        f"assert len(poetsim.compare({str(tmp_path / 'mcu')!r}).table) > 0\n"
        "from poetsim import sweep\n"
        "assert callable(sweep) and sweep.__module__ == 'poetsim.api'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
