"""Fault injection on real sweeps, and what survives what (docs/dependability.md).

Signals at random moments, two writers, a full or read-only disk, dying workers, a Dask cluster
without workers.

Every case ends with the same invariant: runs.csv holds each finished point exactly once, with
no torn row and no row that records the fault itself, and `--resume` completes the grid.
"""

import contextlib
import csv
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from poetsim.errors import FolderBusyError, StorageError
from poetsim.inputs.scenario import load_scenario
from poetsim.runs import FolderLock, ResultRow, RunsFile
from poetsim.status import Status
from poetsim.sweeps.runner import run_sweep

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"
#: A hang detector, not a speed claim (the exit times are measured by `python -m benchmarks faults`).
HANG_S = 30

#: Keep-all-fits points at 100 % that end at once, a paging-only point at 35 % proven in about a
#: second, and a recompute-only point at 35 % that spends its whole effort (its proof is beyond the
#: optimiser: results/resnet18 leaves it `feasible`), a few seconds, so that a signal finds points
#: both finished and in flight.
SLOW = """\
name: slow
model: resnet18_cifar
batch_size: 8
platform: rpi4
budgets: {{ram: [100%, 35%], runtime: 1.5x}}
strategies: [{strategies}]
effort: {limit}
time_limit_s: {limit}
"""


def slow_scenario(tmp_path, strategies="recompute-only, paging-only", limit=3) -> Path:
    path = tmp_path / "slow.yaml"
    path.write_text(SLOW.format(strategies=strategies, limit=limit))
    return path


def small_mcu(tmp_path) -> Path:
    """The MCU scenario cut to one platform and two RAM budgets: 12 points in a second or two."""
    path = tmp_path / "small.yaml"
    path.write_text(
        MCU.read_text()
        .replace("platform: [mkr1000, nrf52840]", "platform: nrf52840")
        .replace("ram: [100%, 85%, 70%, 60%]", "ram: [100%, 70%]")
    )
    return path


def poetsim(*args, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "poetsim", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        **popen,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=HANG_S)
    return proc.returncode, out, err


def keys_on_disk(directory: Path) -> list[str]:
    """Every row's key, after checking the file ends with a whole row."""
    runs = directory / "runs.csv"
    if not runs.exists():
        return []
    text = runs.read_text()
    assert text == "" or text.endswith("\n"), "a torn last row"
    return [row["point_key"] for row in csv.DictReader(text.splitlines())]


def all_keys(scenario: Path) -> set[str]:
    return {p.key for p in load_scenario(scenario).points()}


def wait_for(condition, what: str, timeout_s: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def gone(processes: list[psutil.Process]) -> bool:
    def ended(process: psutil.Process) -> bool:
        try:
            return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return all(ended(p) for p in processes)


def family_of(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


# --- signals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "signum, to_group",
    [
        (signal.SIGINT, False),  # `kill -INT` to the sweep alone
        (signal.SIGINT, True),  # Ctrl-C: the terminal signals the whole process group
        (signal.SIGTERM, False),
        (signal.SIGKILL, False),
    ],
)
def test_a_signal_at_a_random_moment_keeps_every_row_and_ends_every_worker(tmp_path, signum, to_group):
    scenario, out = slow_scenario(tmp_path), tmp_path / "out"
    delay = random.uniform(0.0, 3.0)
    proc = poetsim("sweep", scenario, "-j", "2", "--out", out, start_new_session=True)
    wait_for(lambda: (out / "scenario.yaml").exists() or proc.poll() is not None, "the sweep to start")
    time.sleep(delay)
    family = family_of(proc.pid)
    (os.killpg if to_group else os.kill)(proc.pid, signum)
    code, _, err = finish(proc)
    kept = keys_on_disk(out)
    assert len(kept) == len(set(kept)), f"a row twice after {delay:.2f} s"
    if code == 0:  # the signal came after the last point
        assert set(kept) == all_keys(scenario)
    elif code == -signum and signum != signal.SIGKILL and set(kept) == all_keys(scenario):
        pass  # it came while Python was exiting after the last point: the default handlers are back then
    elif signum == signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        assert code == 128 + signum, err
        assert err.strip().splitlines() == [f"poetsim: interrupted: {len(kept)} of 4 points kept; rerun with --resume"]
        assert "Traceback" not in err
    wait_for(lambda: gone(family), "every worker to end", timeout_s=10)
    if signum != signal.SIGKILL:
        return  # resuming is the same after any signal (test_sweep resumes after an interrupt); kept short

    code, _, err = finish(poetsim("sweep", scenario, "-j", "2", "--out", out, "--resume"))
    assert code == 0, err
    resumed = keys_on_disk(out)
    assert sorted(resumed) == sorted(all_keys(scenario)), f"after a signal {delay:.2f} s in"


# --- one writer per folder ----------------------------------------------------------------------


def test_a_second_writer_is_refused_at_once_naming_the_folder_and_the_holder(tmp_path):
    scenario, out = slow_scenario(tmp_path, limit=10), tmp_path / "out"
    first = poetsim("sweep", scenario, "-j", "1", "--out", out)
    wait_for(lambda: (out / "scenario.yaml").exists(), "the first sweep to hold the folder")
    for command in (("sweep", scenario, "--out", out, "--resume"), ("compare", out)):
        code, _, err = finish(poetsim(*command))
        assert code == 75
        assert err.strip().splitlines() == [
            (
                f"poetsim: error: {out}: another poetsim (pid {first.pid}) is writing into this folder; "
                "wait for it to end, or choose another --out"
            )
        ]
    first.send_signal(signal.SIGTERM)
    code, _, _ = finish(first)
    assert code == 143
    kept = keys_on_disk(out)
    assert len(kept) == len(set(kept))


def test_the_lock_is_exclusive_within_one_process_too_and_released_on_exit(tmp_path):
    with FolderLock(tmp_path), pytest.raises(FolderBusyError, match=f"pid {os.getpid()}"), FolderLock(tmp_path):
        pass
    with FolderLock(tmp_path):
        pass


# --- the machine refuses files ------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (root only); skipped where mounting is not permitted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.strip() or 'mount failed'}); needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def remount(mount: Path, options: str) -> None:
    """Remount `mount` with `options`, waiting while a file on it is open for writing.

    The kernel refuses a read-only remount ("mount point is busy") while any file on it is
    open for writing, and a sweep's worker may be writing the next point's files while the
    parent reports a row (seen once in four runs): the remount waits for that file to close.
    """
    deadline = time.monotonic() + HANG_S
    while True:
        done = subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        assert "busy" in done.stderr and time.monotonic() < deadline, f"mount -o remount,{options} failed: {done.stderr.strip()}"
        time.sleep(0.005)


def fill(mount: Path) -> None:
    """Fill the file system to the last byte."""
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


def test_a_full_disk_never_leaves_a_torn_row(small_disk):
    runs = RunsFile(small_disk / "runs.csv")
    row = ResultRow(point_key="k0", status=Status.OPTIMAL, message="x" * 3000)
    runs.append(row)
    fill(small_disk)
    for attempt in range(1, 6):  # the first may fill the rest of a page (a short write), then nothing fits
        before = runs.path.read_bytes()
        try:
            runs.append(ResultRow(point_key=f"k{attempt}", status=Status.OPTIMAL, message="y" * 3000))
        except StorageError as exc:
            assert "No space left on device" in str(exc) and "(ENOSPC)" in str(exc)
            assert runs.path.read_bytes() == before
            break
    else:
        pytest.fail("the disk never filled")
    assert runs.done_keys() == {f"k{n}" for n in range(attempt)}


def test_a_disk_filling_mid_sweep_stops_it_and_records_no_fault_as_a_result(small_disk, tmp_path):
    scenario = load_scenario(small_mcu(tmp_path))
    out = small_disk / "out"

    def fill_after_three(row, done, total):
        if done == 3:
            fill(small_disk)

    with pytest.raises(
        StorageError,
        match=r"No space left on device \(ENOSPC\); the sweep stopped with 3 of 12 "
        r"points kept; rerun with --resume",
    ):
        run_sweep(scenario, out, jobs=1, on_row=fill_after_three)
    assert len(keys_on_disk(out)) == 3
    (small_disk / "filler").unlink()
    run_sweep(scenario, out, jobs=1, resume=True)
    kept = keys_on_disk(out)
    assert sorted(kept) == sorted(p.key for p in scenario.points())
    assert "No space" not in (out / "runs.csv").read_text()


def test_a_read_only_disk_mid_sweep_stops_it_in_one_line(small_disk, tmp_path):
    scenario = load_scenario(small_mcu(tmp_path))
    out = small_disk / "out"

    def read_only_after_two(row, done, total):
        if done == 2:
            remount(small_disk, "ro")

    try:
        with pytest.raises(StorageError, match=r"Read-only file system \(EROFS\); the sweep stopped with 2 of 12"):
            run_sweep(scenario, out, jobs=1, on_row=read_only_after_two)
    finally:
        remount(small_disk, "rw")
    assert len(keys_on_disk(out)) == 2


def test_a_point_folder_the_machine_refuses_stops_the_sweep_and_is_not_the_points_result(tmp_path):
    """An OSError writing a point's folder (the client writes it) stops the sweep (exit 74); no `failed` row says it."""
    scenario, out = small_mcu(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "points").write_text("a file where the points folder goes")
    code, _, err = finish(poetsim("sweep", scenario, "-j", "1", "--out", out))
    assert code == 74
    (line,) = err.strip().splitlines()
    assert line.startswith(f"poetsim: error: cannot write {out}/points/") and "(ENOTDIR)" in line
    assert "rerun with --resume once that is fixed" in line
    rows = list(csv.DictReader((out / "runs.csv").open())) if (out / "runs.csv").exists() else []
    assert all(r["status"] != "failed" for r in rows)
    (out / "points").unlink()
    code, _, err = finish(poetsim("sweep", scenario, "-j", "1", "--out", out, "--resume"))
    assert code == 0, err
    assert sorted(keys_on_disk(out)) == sorted(all_keys(scenario))


def test_resume_reruns_failed_points_and_keeps_each_key_once(tmp_path):
    graph = tmp_path / "mlp.json"
    subprocess.run(
        [sys.executable, "-m", "poetsim", "graph", "mlp", "--batch-size", "2", "--save", graph], check=True, capture_output=True
    )
    path = small_mcu(tmp_path)
    path.write_text(path.read_text().replace("model: mlp", f"model: [mlp, {graph}]"))
    scenario, out = load_scenario(path), tmp_path / "out"
    good = graph.read_text()
    graph.write_text("{broken")  # valid when loaded, broken when the points run: failed rows
    run_sweep(scenario, out, jobs=2)
    statuses = [r["status"] for r in csv.DictReader((out / "runs.csv").open())]
    assert statuses.count("failed") == 12
    graph.write_text(good)
    run_sweep(scenario, out, jobs=2, resume=True)
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert sorted(r["point_key"] for r in rows) == sorted(p.key for p in scenario.points())
    assert all(r["status"] != "failed" for r in rows)


# --- dying workers ------------------------------------------------------------------------------


def workers_of(pid: int) -> list[psutil.Process]:
    """The sweep's live worker processes (not the resource tracker, not a killed one not yet reaped)."""
    found = []
    for child in psutil.Process(pid).children():
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # a zombie, or gone
            continue
    return found


def test_a_point_whose_worker_dies_twice_is_a_failed_row_and_the_sweep_goes_on(tmp_path):
    scenario, out = slow_scenario(tmp_path, strategies="recompute-only", limit=60), tmp_path / "out"
    proc = poetsim("sweep", scenario, "-j", "1", "--out", out)
    wait_for(lambda: len(keys_on_disk(out)) == 1, "the fast point's row")  # the slow one is running now
    killed = set()
    for _ in range(2):
        wait_for(lambda: [w for w in workers_of(proc.pid) if w.pid not in killed], "a worker on the slow point")
        (worker,) = [w for w in workers_of(proc.pid) if w.pid not in killed]
        time.sleep(0.3)
        worker.kill()
        killed.add(worker.pid)
    code, _, err = finish(proc)
    assert code == 0, err
    rows = {r["point_key"]: r for r in csv.DictReader((out / "runs.csv").open())}
    assert len(rows) == 2
    slow = rows["resnet18_cifar|rpi4|35%|1.5x|recompute-only"]
    assert slow["status"] == "failed"
    assert slow["message"].startswith("its worker process died 2 times (last killed by SIGKILL")
    assert rows["resnet18_cifar|rpi4|100%|1.5x|recompute-only"]["status"] == "optimal"


# --- Dask ---------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Port .* is already in use:UserWarning")
def test_a_dask_scheduler_without_workers_fails_in_one_line_naming_it(tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=True, dashboard_address=None, silence_logs=40) as cluster:
        address = cluster.scheduler_address
        code, _, err = finish(
            poetsim(
                "sweep",
                small_mcu(tmp_path),
                "--out",
                tmp_path / "out",
                "--executor",
                "dask",
                "--scheduler",
                address,
                "--worker-wait",
                "2",
            )
        )
    assert code == 69
    assert err.strip().splitlines() == [
        (
            f"poetsim: error: the Dask scheduler {address} has had no worker for 2 s; "
            "the sweep stopped with 0 of 12 points kept; rerun with --resume once that is fixed"
        )
    ]


@pytest.mark.filterwarnings("ignore:Port .* is already in use:UserWarning")
def test_a_point_that_kills_its_dask_worker_twice_is_a_failed_row_and_the_rest_are_kept(tmp_path):
    import dask
    from dask.distributed import Client, LocalCluster

    scenario = load_scenario(slow_scenario(tmp_path, strategies="recompute-only", limit=60))
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50) as cluster,
        Client(cluster) as client,
    ):
        stop = threading.Event()

        def kill_the_slow_point() -> None:
            """Kill whichever worker is running the point at 35 % (call_stack: what runs now)."""
            while not stop.is_set():
                for address, running in client.call_stack().items():
                    if any("|35%|" in str(key) for key in running):
                        pid = client.run(os.getpid, workers=[address], on_error="return").get(address)
                        with contextlib.suppress(psutil.Error, TypeError, ValueError):  # gone already, or no pid came back
                            psutil.Process(pid).kill()
                time.sleep(0.1)

        killer = threading.Thread(target=kill_the_slow_point, daemon=True)
        killer.start()
        try:
            path = run_sweep(scenario, tmp_path / "out", scheduler=cluster.scheduler_address)
        finally:
            stop.set()
            killer.join(5)
    rows = {r["point_key"]: r for r in csv.DictReader(path.open())}
    assert rows["resnet18_cifar|rpi4|35%|1.5x|recompute-only"]["status"] == "failed"
    assert "its Dask worker died each time it ran" in rows["resnet18_cifar|rpi4|35%|1.5x|recompute-only"]["message"]
    assert rows["resnet18_cifar|rpi4|100%|1.5x|recompute-only"]["status"] == "optimal"
