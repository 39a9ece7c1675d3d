"""Terminal output: progress that reaches a log without a terminal, and nothing for short work."""

import io

from poetsim.cli.terminal import Progress, duration, make_console, table


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


def test_a_table_sent_to_a_file_keeps_every_digit():
    console = make_console()
    buffer = io.StringIO()
    console.file = buffer
    console.print(table(("point", "energy J"), [("resnet18_cifar|rpi4-nocache|35%|1.2x|recompute-only", "7.898285714285")]))
    text = buffer.getvalue()
    assert "resnet18_cifar|rpi4-nocache|35%|1.2x|recompute-only" in text and "7.898285714285" in text
    assert "…" not in text


def test_durations_read_as_people_write_them():
    assert [duration(s) for s in (4.2, 185, 3725)] == ["4 s", "3 min 05 s", "1 h 02 min"]
