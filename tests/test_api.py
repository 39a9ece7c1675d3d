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


def test_a_script_that_sweeps_without_the_main_guard_is_refused_with_the_cause(tmp_path):
    """A script file calling `poetsim.sweep` at its top level gets one error naming the line and the guard it needs.

    Its local workers would import the script again and die at start-up; under `if __name__ ==
    "__main__":` the same call sweeps every point.
    """
    call = f"poetsim.sweep('scenarios/mcu.yaml', {str(tmp_path / 'mcu')!r}, jobs=2)"
    bare = tmp_path / "bare.py"
    bare.write_text(f"import poetsim\nresult = {call}\n")
    refused = subprocess.run([sys.executable, str(bare)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert 'bare.py, line 2: a sweep on local worker processes must be called under `if __name__ == "__main__":`' in (
        refused.stderr
    )
    assert not (tmp_path / "mcu").exists()
    guarded = tmp_path / "guarded.py"
    guarded.write_text(f"import poetsim\n\nif __name__ == '__main__':\n    print(len({call}.rows))\n")
    swept = subprocess.run([sys.executable, str(guarded)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert swept.returncode == 0, swept.stderr
    assert swept.stdout.strip() == "48"
