"""The repository stands alone: no absolute paths in tracked files, scenarios that resolve in a clone."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: An absolute path of some machine: a path that starts at one of the usual roots.
ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:home|root|Users|work|mnt|opt|tmp|var|srv)/[\w.-]")


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_tracked_file_holds_an_absolute_path():
    offenders = []
    for path in tracked_files():
        if path.suffix in (".png", ".bin", ".pdf") or not path.is_file() or path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if ABSOLUTE.search(line) or "../shared" in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert offenders == []


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_every_shipped_scenario_resolves_in_a_clone_with_nothing_beside_it(tmp_path):
    clone = tmp_path / "empty" / "poetsim"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True)
    scenarios = sorted(str(p.relative_to(clone)) for p in (clone / "scenarios").glob("*.yaml"))
    result = subprocess.run(
        [sys.executable, "-m", "poetsim", "validate", *scenarios], cwd=clone, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ok  ") == len(scenarios)
