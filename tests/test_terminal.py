"""Terminal output: tables, help, progress, and nothing for short work.

Tables fit a terminal and print whole in a pipe, help wraps between words, progress shows in a
terminal and in a log.

The commands run as real processes, on a pseudo-terminal (a pty of the given size, COLUMNS set
to match) or on a pipe.
"""

import csv
import fcntl
import io
import itertools
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from rich.console import Console

from poetsim.cli.terminal import Progress, duration, table

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"
#: Figures of the shipped platforms as `poetsim platforms` prints them: none may be broken.
PLATFORM_NUMBERS = ("1.67e+05", "6.37e+06", "0.00165", "0.0051", "0.0185", "45.5", "24.5", "256.00", "0.0066")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def in_terminal(args: list[str], columns: int, stderr_too: bool = False) -> tuple[str, str]:
    """Run `poetsim ARGS` with stdout (and, with `stderr_too`, stderr) on a pty `columns` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "poetsim", *args],
        stdout=follower,
        stderr=follower if stderr_too else subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    error = process.stderr.read().decode() if process.stderr else ""
    assert process.wait(timeout=120) == 0, error
    text = _ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")
    return text, error


def in_a_pipe(args: list[str], columns: int) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "poetsim", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": str(columns)},
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    return result.stdout


def test_a_table_in_an_80_column_terminal_fits_and_breaks_no_number():
    text, _ = in_terminal(["platforms"], 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = {word for line in lines for word in line.replace("│", " ").split()}
    for number in PLATFORM_NUMBERS:
        assert number in words, number


def test_compare_in_an_80_column_terminal_prints_records_that_fit(tmp_path):
    """The ten columns of compare cannot sit side by side in 80: one record per point, every line within them."""
    out = tmp_path / "mcu"
    sweep = [sys.executable, "-m", "poetsim", "sweep", str(MCU), "--out", str(out)]
    subprocess.run(sweep, cwd=ROOT, check=True, capture_output=True)
    text, _ = in_terminal(["compare", str(out)], 80)
    lines = text.splitlines()
    # A path is never broken: one wider than the window stands alone on its line.
    assert all(len(line) <= 80 or " " not in line for line in lines)
    with (out / "runs.csv").open() as runs:
        keys = {(row["model"], row["platform"], row["timing"], row["runtime_x"], row["ram"]) for row in csv.DictReader(runs)}
    points = len(keys)
    records = [line for line in lines if re.match(r"row \d+ of \d+ ─", line)]
    assert len(records) == points and records[-1].startswith(f"row {points} of {points} ")
    assert {line.split()[0] for line in lines if line[:1].isalpha()} >= {"model", "platform", "ram", "hybrid", "recompute-only"}


def test_a_table_in_a_wide_terminal_keeps_each_row_on_one_line():
    text, _ = in_terminal(["platforms"], 200)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == 5 and any("rpi4-nocache" in row and "17.1 MB/s" in row for row in rows)


def test_through_a_pipe_a_table_prints_whole_whatever_columns_says():
    text = in_a_pipe(["platforms"], 80)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == 5 and any("rpi4-nocache" in row and "4.24 ms + 17.1 MB/s" in row for row in rows)
    assert max(len(line) for line in text.splitlines()) > 80


def test_help_wraps_between_words_and_fills_its_lines():
    """The description is refilled to the window: no line stops short of a word that would fit."""
    text, _ = in_terminal(["solve", "--help"], 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    start = next(i for i, line in enumerate(lines) if "Every schedule shown" in line)
    paragraph = []
    for line in lines[start:]:
        if not line.strip():
            break
        paragraph.append(line)
    assert len(paragraph) >= 3
    for line, following in itertools.pairwise(paragraph):
        assert len(line) + 1 + len(following.split()[0]) > 78, (line, following)
    assert "Energy in joules; the overhead is relative to keep-all" in " ".join(" ".join(paragraph).split())


def test_help_never_breaks_a_hyphenated_word_and_every_command_lists_the_exit_codes():
    """A path (docs/cost-model.md) or a word (keep-all) stays whole at the end of a line: help breaks at spaces only."""
    for command in (["--help"], ["sweep", "--help"], ["device", "run", "--help"]):
        text, _ = in_terminal(command, 80)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 80, command
        assert not [line for line in lines if re.search(r"[A-Za-z]-$", line)], command
    assert "docs/cost-model.md" in in_terminal(["--help"], 80)[0]
    assert "75 another poetsim writes into that results folder" in " ".join(in_terminal(["solve", "--help"], 80)[0].split())


def test_the_command_list_wraps_each_summary_whole():
    text, _ = in_terminal(["--help"], 80)
    listed = text.split("Commands:")[1].split("\n\n")[0]
    assert "..." not in listed and max(len(line) for line in text.splitlines()) <= 80
    assert "Run every point of a scenario's grid: solve, check, simulate; one row per point in runs.csv." in " ".join(
        text.split()
    )


def test_messages_wrap_between_words_and_a_longer_path_stays_whole(tmp_path):
    """The 'wrote' line of simulate breaks only between words in 60 columns; a path wider than the window is not cut."""
    point = ["--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--strategy", "hybrid", "--no-charts"]
    files = "(result.json, schedule.json, schedule.bin, trace.csv, summary.json, comparison.json)"
    for out in (tmp_path / "s", tmp_path / ("a_folder_whose_name_is_longer_than_the_window_" * 2)):
        text, _ = in_terminal(["simulate", str(MCU), *point, "--out", str(out)], 60)
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("wrote"))
        last = next(i for i in range(first, len(lines)) if lines[i].endswith(")"))
        message = lines[first : last + 1]
        assert [line.split() for line in message if len(line) > 60] in ([], [[f"{out}/"]])
        assert len(message) > 1 and " ".join(message) == f"wrote {out}/ {files}"


def test_solve_shows_its_progress_in_a_terminal():
    text, _ = in_terminal(
        ["solve", str(MCU), "--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--strategy", "hybrid"],
        100,
        stderr_too=True,
    )
    # The live line redraws a few times a second: a stage as short as reading the scenario may
    # be replaced before it is drawn, the solve's stages are not.
    assert "solve: solving hybrid" in text
    assert "optimal (proven)" in text


def test_a_table_whose_columns_cannot_sit_side_by_side_prints_one_record_per_row():
    buffer = io.StringIO()
    headers = ("point", "keep-all J", "hybrid J", "recompute-only J", "paging-only J", "checkpoint-sqrt J", "notes")
    rows = [
        ("resnet18_cifar|rpi4|35%|1.2x", "7.898285714285", "8.01*", "8.52", "9.01", "10.2", "optimal as before"),
        ("resnet18_cifar|rpi4|50%|1.2x", "7.898285714285", "7.9", "8.1", "8.2", "9.3", ""),
    ]
    Console(file=buffer, width=50, markup=False).print(table(headers, rows, title="compare"), crop=False)
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 50
    assert lines[0].strip() == "compare" and [line.split()[:4] for line in lines if "row" in line] == [
        ["row", "1", "of", "2"],
        ["row", "2", "of", "2"],
    ]
    first = lines[2 : 2 + len(headers)]
    assert [line[: len(headers[n])] for n, line in enumerate(first)] == list(headers)
    assert [line.rstrip().split("  ")[-1].strip() for line in first] == [*rows[0][:-1], "optimal as before"]
    second = lines[3 + len(headers) :]
    assert [line[: len(headers[n])] for n, line in enumerate(second)] == list(headers[:-1])  # no empty "notes"


def test_a_table_too_wide_for_its_output_is_printed_wider_never_cut():
    buffer = io.StringIO()
    key = "resnet18_cifar|rpi4-nocache|35%|1.2x|recompute-only"
    shown = table(("point", "energy J", "detail"), [(key, "7.898285714285", "status optimal as before")])
    Console(file=buffer, width=18, markup=False).print(shown, crop=False)
    text = buffer.getvalue()
    assert "…" not in text and "7.898285714285" in text
    assert "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")) == key


def test_a_table_sent_to_a_file_keeps_every_digit():
    buffer = io.StringIO()
    Console(file=buffer, width=100_000, markup=False).print(
        table(("point", "energy J"), [("resnet18_cifar|rpi4-nocache|35%|1.2x|recompute-only", "7.898285714285")])
    )
    text = buffer.getvalue()
    assert "resnet18_cifar|rpi4-nocache|35%|1.2x|recompute-only" in text and "7.898285714285" in text
    assert "…" not in text


def test_without_a_terminal_progress_prints_a_line_each_period_and_a_last_one():
    stream = io.StringIO()
    progress = Progress("sweep x", stream=stream, every_s=0.0)
    progress.update("1/3 points")
    progress.update("2/3 points")
    progress.close("done")
    assert stream.getvalue().splitlines() == [
        "poetsim: sweep x: 1/3 points",
        "poetsim: sweep x: 2/3 points",
        "poetsim: sweep x: done",
    ]


def test_short_work_prints_no_progress_so_an_error_stays_one_line():
    stream = io.StringIO()
    progress = Progress("solve", stream=stream, every_s=30.0)
    progress.update("building", force=True)
    progress.close("optimal")
    assert stream.getvalue() == ""


def test_durations_read_as_people_write_them():
    assert [duration(s) for s in (4.2, 185, 3725)] == ["4 s", "3 min 05 s", "1 h 02 min"]
