"""What every benchmark writes the same way: the machine it ran on, and rows as they finish."""

import csv
import os
import platform
from collections.abc import Iterable
from dataclasses import asdict, fields
from importlib.metadata import version
from pathlib import Path

import pandas as pd


def machine(with_highs: bool = False) -> str:
    """The `machine` column: architecture, cores, Python (and HiGHS for the solver benchmarks)."""
    text = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if with_highs:  # highspy's version is the HiGHS release it wraps
        text += f", HiGHS {version('highspy')}"
    return text


def write_rows(out_csv: Path, kind: type, rows: Iterable) -> pd.DataFrame:
    """Write dataclass rows of `kind` to `out_csv` as each one finishes, and return them as a frame.

    An interrupted run keeps what it measured.
    """
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in fields(kind)]
    done = []
    with out_csv.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for row in rows:
            writer.writerow({name: getattr(row, name) for name in names})
            handle.flush()
            done.append(asdict(row))
    return pd.DataFrame(done, columns=names)
