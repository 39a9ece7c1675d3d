"""Sweeps on a real Dask cluster: a scheduler and two workers on the loopback address.

`dask scheduler` and two `dask worker` processes start from folders of their own, and the sweep
runs from a third with a relative --out.

The client alone writes the results folder: every file lands there, none where the workers
run, nothing changes once the client has exited, and each point is recorded once whatever the
cluster loses (a worker, the scheduler, Ctrl-C). Cluster faults are one line with their exit
code (docs/scale-out.md, docs/dependability.md).
"""

import contextlib
import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from poetsim.inputs.scenario import load_scenario

if TYPE_CHECKING:
    from distributed import Client

ROOT = Path(__file__).resolve().parent.parent
MCU = ROOT / "scenarios" / "mcu.yaml"
BIN = Path(sys.executable).parent
#: A hang detector, not a speed claim (sweep figures come from `python -m benchmarks cluster`).
HANG_S = 120
#: Each point's effort (units) and guard (seconds) in SLOW; the points at 100 % and paging-only
#: end within a second or two, recompute-only at 45 % and 35 % spends it all: a signal finds
#: points done and running.
LIMIT_S = 3
SLOW = f"""\
name: slow
model: resnet18_cifar
batch_size: 8
platform: rpi4
budgets: {{ram: [100%, 45%, 35%], runtime: 1.5x}}
strategies: [recompute-only, paging-only]
effort: {LIMIT_S}
time_limit_s: {LIMIT_S}
"""
#: How long a point abandoned on a worker may still run after the client has gone (its limit, and
#: what a solver overruns it by), where the workers cannot be asked (their scheduler is gone).
ABANDONED_S = LIMIT_S + 3


class Cluster:
    """A scheduler and its workers, each in a session of its own under `root`, all killed by `close`."""

    def __init__(self, root: Path):
        self.root = root
        self.processes: list[subprocess.Popen] = []
        self.scheduler: subprocess.Popen | None = None
        self.address = ""
        self._client: Client | None = None

    def start(self, workers: int = 2, python_args: tuple = (), env: dict | None = None) -> str:
        """Start a scheduler on a free loopback port, then `workers` workers; its address.

        `python_args` and `env` start the scheduler another way.
        """
        here = self.folder("scheduler")
        info = here / f"scheduler-{len(self.processes)}.json"
        command = [*python_args, "-m", "distributed.cli.dask_scheduler"] if python_args else [BIN / "dask", "scheduler"]
        self.scheduler = self._spawn(
            [*command, "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", info], here, env
        )
        deadline = time.monotonic() + HANG_S
        while not info.exists() or not info.read_text().strip().endswith("}"):
            assert self.scheduler.poll() is None and time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]
        for _ in range(workers):
            self.add_worker()
        if workers:
            self.wait_for_workers(workers)
        return self.address

    def add_worker(self, python_args: tuple = (), env: dict | None = None) -> subprocess.Popen:
        """A worker of this cluster, started in the workers' folder (`python_args` run it another way)."""
        command = [*python_args, "-m", "distributed.cli.dask_worker"] if python_args else [BIN / "dask", "worker"]
        scratch = self.root / "dask-scratch"
        return self._spawn(
            [*command, self.address, "--nthreads", "1", "--no-dashboard", "--local-directory", scratch],
            self.folder("workers"),
            env,
        )

    def client(self) -> "Client":
        """A client of the cluster's scheduler, made on first use."""
        if self._client is None:
            from distributed import Client

            self._client = Client(self.address, timeout="30s", set_as_default=False)
        return self._client

    def wait_for_workers(self, count: int) -> None:
        """Wait until `count` workers have joined (at most HANG_S)."""
        self.client().wait_for_workers(count, timeout=HANG_S)

    def kill_worker_running(self, fragment: str) -> bool:
        """Kill (SIGKILL) the worker process running a task whose key holds `fragment`; whether one was."""
        client = self.client()
        for address, running in client.call_stack().items():
            if any(fragment in str(key) for key in running):
                os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)
                return True
        return False

    def tasks(self) -> list[str]:
        """The keys of every task the scheduler holds."""
        return self.client().run_on_scheduler(lambda dask_scheduler: sorted(map(str, dask_scheduler.tasks)))

    def wait_until_idle(self) -> None:
        """Wait until no worker runs a task: the points a stopped sweep abandoned have run out."""
        client = self.client()

        def executing() -> int:
            return sum(client.run(lambda dask_worker: dask_worker.state.executing_count).values())

        wait_for(lambda: executing() == 0, "the workers to end the points they were running")

    def kill_scheduler(self) -> None:
        """Kill the scheduler's process group (SIGKILL), dropping the client first."""
        self.drop_client()
        assert self.scheduler is not None
        os.killpg(self.scheduler.pid, signal.SIGKILL)
        self.scheduler.wait()

    def drop_client(self) -> None:
        """Close the client, if there is one."""
        if self._client is not None:
            self._client.close(timeout=5)
            self._client = None

    def folder(self, name: str) -> Path:
        """The folder `name` under the cluster's root, made if missing."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def close(self) -> None:
        """Kill every process of the cluster and remove its root."""
        self.drop_client()
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _spawn(self, command: list, cwd: Path, env: dict | None = None) -> subprocess.Popen:
        log = (self.root / f"process-{len(self.processes)}.log").open("w")
        process = subprocess.Popen(
            list(map(str, command)), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.processes.append(process)
        return process


@pytest.fixture
def cluster(tmp_path):
    found = Cluster(tmp_path / "cluster")
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def client_dir(tmp_path) -> Path:
    """The folder the sweep runs from (its --out is relative to it), apart from the cluster's."""
    path = tmp_path / "client"
    path.mkdir()
    return path


def _interruptible() -> None:
    """In the child: SIGINT as a terminal's shell leaves it, even under a parent that ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sweep(client_dir: Path, scenario: Path, *args, **popen) -> subprocess.Popen:
    popen.setdefault("preexec_fn", _interruptible)
    return subprocess.Popen(
        [sys.executable, "-m", "poetsim", "sweep", str(scenario), "--out", "results", *map(str, args)],
        cwd=client_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def finish(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=HANG_S)
    return process.returncode, err


def slow_scenario(tmp_path) -> Path:
    path = tmp_path / "slow.yaml"
    path.write_text(SLOW)
    return path


def keys_on_disk(results: Path) -> list[str]:
    """Every row's key, after checking the file ends with a whole row."""
    runs = results / "runs.csv"
    if not runs.exists():
        return []
    text = runs.read_text()
    assert text == "" or text.endswith("\n"), "a torn last row"
    return [row["point_key"] for row in csv.DictReader(text.splitlines())]


def all_keys(scenario: Path) -> list[str]:
    return sorted(point.key for point in load_scenario(scenario).points())


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` and a hash of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != ".poetsim.lock"
    }


def family(pid: int) -> set[int]:
    """`pid` and its descendants (a `dask worker` command runs its worker in a child process)."""
    import psutil

    return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}


def stray_points(cluster: Cluster) -> list[Path]:
    """Point folders or results written anywhere under the cluster's own folders."""
    return [p for p in cluster.root.rglob("*") if p.name in ("points", "runs.csv", "schedule.json")]


def assert_nothing_written_after_exit(results: Path, cluster: Cluster, scheduler_alive: bool = True) -> None:
    """No file of the results folder changes while the points abandoned on workers run out."""
    before = snapshot(results)
    if scheduler_alive:
        cluster.wait_until_idle()
    else:
        time.sleep(ABANDONED_S)
    assert snapshot(results) == before, "a file of the results folder changed after the sweep had exited"
    assert stray_points(cluster) == []


def rows_without_timings(runs: Path) -> dict[str, dict]:
    timings = {"build_s", "solve_s", "wall_s"}
    return {row["point_key"]: {k: v for k, v in row.items() if k not in timings} for row in csv.DictReader(runs.open())}


def test_a_relative_out_keeps_every_file_in_the_results_folder_and_rows_equal_a_local_sweep(cluster, client_dir, tmp_path):
    address = cluster.start()
    code, err = finish(sweep(client_dir, MCU, "--scheduler", address))
    assert code == 0, err
    results = client_dir / "results"
    folders = sorted((results / "points").iterdir())
    assert len(folders) == 20  # the MCU sweep's points with a schedule
    for folder in folders:
        assert {"result.json", "schedule.json", "schedule.bin", "trace.csv", "summary.json"} <= {p.name for p in folder.iterdir()}
    assert stray_points(cluster) == []

    local = subprocess.run(
        [sys.executable, "-m", "poetsim", "sweep", MCU, "--out", tmp_path / "local", "-j", "2"], capture_output=True, text=True
    )
    assert local.returncode == 0, local.stderr
    assert rows_without_timings(results / "runs.csv") == rows_without_timings(tmp_path / "local" / "runs.csv")
    for folder in folders:
        for name in ("schedule.json", "schedule.bin", "trace.csv", "summary.json"):
            assert (folder / name).read_bytes() == (tmp_path / "local" / "points" / folder.name / name).read_bytes()

    checked = subprocess.run(
        [sys.executable, "-m", "poetsim", "check", "results", "--baseline", tmp_path / "local" / "runs.csv"],
        cwd=client_dir,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_a_killed_worker_loses_nothing_and_each_point_is_recorded_once(cluster, client_dir, tmp_path):
    scenario = slow_scenario(tmp_path)
    address = cluster.start()
    process = sweep(client_dir, scenario, "--scheduler", address)
    results = client_dir / "results"
    wait_for(lambda: len(keys_on_disk(results)) >= 1, "a finished point")
    wait_for(lambda: cluster.kill_worker_running("|recompute-only"), "a worker running a slow point, killed")
    code, err = finish(process)
    assert code == 0, err
    kept = keys_on_disk(results)
    assert sorted(kept) == all_keys(scenario)  # every point once: none lost, none twice
    assert all(row["status"] != "failed" for row in csv.DictReader((results / "runs.csv").open()))
    assert_nothing_written_after_exit(results, cluster)


def test_a_killed_scheduler_is_one_line_keeps_every_finished_row_and_resume_completes(cluster, client_dir, tmp_path):
    scenario = slow_scenario(tmp_path)
    address = cluster.start()
    process = sweep(client_dir, scenario, "--scheduler", address)
    results = client_dir / "results"
    wait_for(lambda: len(keys_on_disk(results)) >= 2, "two finished points")
    cluster.kill_scheduler()
    code, err = finish(process)
    kept = keys_on_disk(results)
    assert code == 69, err
    assert err.strip().splitlines() == [
        f"poetsim: error: lost the Dask scheduler {address}: its connection closed; the sweep stopped with "
        f"{len(kept)} of 6 points kept; rerun with --resume once that is fixed"
    ]
    assert 2 <= len(kept) < 6 and len(set(kept)) == len(kept)
    assert_nothing_written_after_exit(results, cluster, scheduler_alive=False)

    address = cluster.start()
    code, err = finish(sweep(client_dir, scenario, "--scheduler", address, "--resume"))
    assert code == 0, err
    assert sorted(keys_on_disk(results)) == all_keys(scenario)


def test_ctrl_c_exits_130_cancels_the_clusters_work_and_resume_completes(cluster, client_dir, tmp_path):
    scenario = slow_scenario(tmp_path)
    address = cluster.start()
    process = sweep(client_dir, scenario, "--scheduler", address, start_new_session=True)
    results = client_dir / "results"
    wait_for(lambda: len(keys_on_disk(results)) >= 2, "two finished points")
    assert any("poetsim" in key for key in cluster.tasks())  # points queued or running on the cluster
    os.killpg(process.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    code, err = finish(process)
    kept = keys_on_disk(results)
    assert code == 130, err
    assert err.strip().splitlines() == [f"poetsim: interrupted: {len(kept)} of 6 points kept; rerun with --resume"]
    assert [key for key in cluster.tasks() if "poetsim" in key] == []  # cancelled: none of its points is left to start
    assert_nothing_written_after_exit(results, cluster)

    code, err = finish(sweep(client_dir, scenario, "--scheduler", address, "--resume"))
    assert code == 0, err
    assert sorted(keys_on_disk(results)) == all_keys(scenario)


# --- one line for each cluster fault ------------------------------------------------------------


@pytest.mark.parametrize(
    "address, fragment",
    [
        ("notanaddress", "is not a Dask scheduler address (no port)"),
        ("tcp://127.0.0.1", "is not a Dask scheduler address (no port)"),
        ("tcp://127.0.0.1:99999", "is not a Dask scheduler address (port 99999 is not one from 1 to 65535)"),
        ("tcp://:8786", "is not a Dask scheduler address (no host)"),
        ("tcp://", "is not a Dask scheduler address (no host and port)"),
        ("http://127.0.0.1:8786", "is a web address (the dashboard's), not the Dask scheduler's"),
        ("udp://127.0.0.1:8786", "unknown protocol udp://"),
    ],
)
def test_a_malformed_scheduler_address_is_one_line_before_anything_is_written(client_dir, address, fragment):
    code, err = finish(sweep(client_dir, MCU, "--scheduler", address))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"poetsim: error: --scheduler: '{address}'") and fragment in line
    assert not (client_dir / "results").exists()


def test_a_scheduler_that_does_not_answer_is_one_line_and_nothing_is_written(client_dir):
    code, err = finish(sweep(client_dir, MCU, "--scheduler", "tcp://127.0.0.1:9"))  # the discard port: nobody listens
    assert code == 69
    (line,) = err.strip().splitlines()
    assert line.startswith("poetsim: error: cannot reach the Dask scheduler tcp://127.0.0.1:9 (")
    assert not (client_dir / "results").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--executor", "process"), "--scheduler tcp://127.0.0.1:9: a scheduler serves --executor dask, not --executor process"),
        (
            ("-j", "4"),
            "--jobs 4: with --scheduler the cluster's workers decide how many points run at once "
            "(start them with `dask worker ADDRESS --nworkers N --nthreads 1`); leave --jobs out",
        ),
    ],
)
def test_an_option_that_contradicts_scheduler_is_one_line(client_dir, extra, message):
    """--scheduler implies --executor dask (every other test here gives it alone); what contradicts it is refused."""
    code, err = finish(sweep(client_dir, MCU, "--scheduler", "tcp://127.0.0.1:9", *extra))
    assert code == 2
    assert err.strip().splitlines() == [f"poetsim: error: {message}"]
    assert not (client_dir / "results").exists()


@pytest.fixture
def bare_python(tmp_path) -> dict:
    """The environment of a Python with Dask's packages but not poetsim.

    Run with -S: no .pth files, so not poetsim's editable install.
    """
    bare = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import distributed, poetsim"], env=bare, cwd=tmp_path, capture_output=True
    )
    if probe.returncode == 0:
        pytest.skip("poetsim is installed in site-packages itself here: no Python without it to start a process with")
    return bare


def test_a_scheduler_needs_no_poetsim(cluster, client_dir, bare_python):
    cluster.start(workers=2, python_args=(sys.executable, "-S"), env=bare_python)
    code, err = finish(sweep(client_dir, MCU, "--scheduler", cluster.address))
    assert code == 0, err
    assert len(keys_on_disk(client_dir / "results")) == 48


@pytest.mark.parametrize("joins", ["before the sweep", "mid-sweep"])
def test_a_worker_without_poetsim_is_refused_naming_it_and_lives(cluster, client_dir, tmp_path, bare_python, joins):
    """A worker without poetsim is refused, named, and lives on; the sweep stops in one line.

    Refused when the sweep sees it or when it is handed a point, whichever comes first: it
    answers (it cannot read the point, yet does not die on it).
    """
    scenario = slow_scenario(tmp_path)
    cluster.start(workers=0 if joins == "before the sweep" else 1)
    if joins == "before the sweep":
        bare = cluster.add_worker((sys.executable, "-S"), env=bare_python)
        cluster.wait_for_workers(1)
        process = sweep(client_dir, scenario, "--scheduler", cluster.address)
    else:
        process = sweep(client_dir, scenario, "--scheduler", cluster.address)
        wait_for(lambda: len(keys_on_disk(client_dir / "results")) >= 1, "a finished point")
        bare = cluster.add_worker((sys.executable, "-S"), env=bare_python)
    code, err = finish(process)
    workers = cluster.client().nthreads()
    (address,) = [a for a in workers if cluster.client().run(os.getpid, workers=[a])[a] in family(bare.pid)]
    assert code == 69
    (line,) = err.strip().splitlines()
    assert line.startswith(
        f"poetsim: error: the Dask worker {address} cannot import poetsim (ModuleNotFoundError: No module named 'poetsim'); "
        "the client has poetsim 0."
    )
    assert "on every worker (docs/scale-out.md)" in line
    kept = keys_on_disk(client_dir / "results")
    if joins == "before the sweep":
        assert not (client_dir / "results").exists()
    else:
        assert line.endswith(f"the sweep stopped with {len(kept)} of 6 points kept; rerun with --resume once that is fixed")
    assert bare.poll() is None and address in cluster.client().nthreads()  # alive and still a worker


@pytest.mark.parametrize("change", ["version", "source"])
def test_a_worker_with_another_poetsim_is_refused_naming_both(cluster, client_dir, tmp_path, change):
    import poetsim

    other = tmp_path / "other"
    shutil.copytree(Path(poetsim.__file__).parent, other / "poetsim", ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "poetsim" / "__init__.py"
    if change == "version":
        init.write_text(init.read_text().replace(f'__version__ = "{poetsim.__version__}"', '__version__ = "0.0.1"'))
    else:
        grid = other / "poetsim" / "sweeps" / "grid.py"
        grid.write_text(grid.read_text() + "\n# an edit on that machine\n")
    cluster.start(workers=1)
    cluster.add_worker((sys.executable,), env={**os.environ, "PYTHONPATH": str(other)})
    cluster.wait_for_workers(2)
    code, err = finish(sweep(client_dir, MCU, "--scheduler", cluster.address))
    assert code == 69
    (line,) = err.strip().splitlines()
    if change == "version":
        assert f"has poetsim 0.0.1 where the client has poetsim {poetsim.__version__}" in line
    else:
        assert f"has poetsim {poetsim.__version__} from other source files (source " in line
    assert line.startswith("poetsim: error: the Dask worker tcp://127.0.0.1:")
    assert line.endswith("on every worker (docs/scale-out.md)")
    assert not (client_dir / "results").exists()


def test_an_environment_names_its_first_difference_poetsim_first_and_a_scheduler_needs_python_and_dask_alone():
    from poetsim.sweeps.environment import Environment, describe, here

    client = here()
    assert client == Environment.parse(describe()) and client.error == "" and len(client.source) == 64
    python = Environment.parse({**describe(), "python": "3.99", "highspy": "0.0.1"})
    assert python.difference(client) == f"has Python 3.99 where the client has Python {client.python}"
    highs = Environment.parse({**describe(), "highspy": "0.0.1", "distributed": "1.0"})
    assert highs.difference(client) == f"has highspy 0.0.1 where the client has highspy {client.highspy}"
    assert highs.difference(client, poetsim=False) == (
        f"has Dask distributed 1.0 where the client has Dask distributed {client.distributed}"
    )
    missing = Environment.parse({**describe(), "poetsim": "none", "error": "ModuleNotFoundError: No module named 'poetsim'"})
    why = missing.difference(client)
    assert why is not None and why.startswith("cannot import poetsim (ModuleNotFoundError")
    assert missing.difference(client, poetsim=False) is None  # a scheduler without poetsim serves
    assert client.difference(client) is None
