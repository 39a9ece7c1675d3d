"""Every schedule of a sweep run on the emulated device, its figures written into runs.csv.

`device_sweep(folder)` reads a sweep's results folder (its scenario.yaml copy, runs.csv and the
point folders' schedule.json), runs each schedule that a row reports on the device of its
platform (`run_on_device`, keep-all steps shared per model and platform), and rewrites those rows
with the `device_*` columns of `poetsim.runs.ResultRow`; each point folder gains device.json,
the run's whole summary. The sweep itself is the sweeps package's: this module only reads its
files and holds the folder's lock while it rewrites runs.csv.
"""

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from poetsim.analysis.results import in_study_order
from poetsim.device.qemu import DEFAULT_TIMEOUT_S
from poetsim.device.run import DeviceRun, Session, check_runnable, require_tools, run_on_device
from poetsim.errors import PoetsimError, UserInputError
from poetsim.folders import RunFolder, StudyFolder
from poetsim.inputs.scenario import Scenario, load_scenario
from poetsim.pipeline import problem_for_point
from poetsim.runs import FolderLock, ResultRow, RunsFile
from poetsim.schedule.formats import load_json
from poetsim.schedule.problem import Problem
from poetsim.status import Status
from poetsim.sweeps.runner import point_slug


def device_columns(run: DeviceRun) -> dict:
    """The `device_*` fields of a row from a device run."""
    f = run.step.raw.fields
    failed = run.failed
    return {
        "device_ok": run.ok,
        "device_message": "; ".join(f"{c.name}: {c.detail}" for c in failed) if failed else "",
        "device_target": run.target,
        "device_peak_ram_bytes": f["peak_bytes"],
        "device_page_outs": f["page_outs"],
        "device_page_out_bytes": f["page_out_bytes"],
        "device_page_ins": f["page_ins"],
        "device_page_in_bytes": f["page_in_bytes"],
        "device_recomputations": f["recomputations"],
        "device_gradients_equal": run.step.same_bits(run.keep_all),
        "device_reference_error": run.reference_error,
        "device_compute_s": run.compute_s,
        "device_predicted_compute_s": run.predicted_compute_s,
        "device_step_s": run.step_s,
    }


def _with_all_strategies(scenario: Scenario, records: list[dict[str, str]]) -> Scenario:
    """The scenario with every strategy its rows name (compare adds baselines the file does not list)."""
    named = tuple(dict.fromkeys(scenario.strategies + tuple(r["strategy"] for r in records if r.get("strategy"))))
    return scenario.model_copy(update={"strategies": named})


#: How a row that the device cannot run says so in `device_message` (its `device_ok` stays empty).
NOT_RUN = "not run: "


def device_sweep(
    directory: Path,
    seed: int = 0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
) -> list[ResultRow]:
    """Run every reported schedule of the results folder on the device; the rows, rewritten (module doc)."""
    require_tools()
    directory = Path(directory)
    scenario = load_scenario(directory / "scenario.yaml")
    session = Session(seed=seed, timeout_s=timeout_s)
    with FolderLock(directory):
        runs = RunsFile(directory / "runs.csv")
        runs.tidy()
        records = runs.records()
        points = {p.key: p for p in _with_all_strategies(scenario, records).points()}
        done: dict[int, ResultRow] = {}
        wanted = [(i, r) for i, r in enumerate(records) if Status.parse(r["status"]).has_schedule and r["point_key"] in points]
        for count, (position, record) in enumerate(wanted, start=1):
            row = ResultRow.from_dict(record, where=f"{runs.path}, line {position + 2}")
            point = points[row.point_key]
            folder = StudyFolder(directory).point(point_slug(point))
            row = _run_row(row, problem_for_point(scenario, point), folder, session)
            done[position] = row
            if on_row is not None:
                on_row(row, count, len(wanted))
        runs.rewrite(done)
    return list(done.values())


def _run_row(row: ResultRow, problem: Problem, folder: RunFolder, session: Session) -> ResultRow:
    """`row` with the device's columns for its schedule in `folder`; a point the device cannot run is left unrun, saying why."""
    try:
        check_runnable(problem)
    except UserInputError as exc:  # not a device's point (a Pi), or a model it has no kernels for
        return replace(row, device_ok=None, device_message=f"{NOT_RUN}{' '.join(str(exc).split())}")
    try:
        run = run_on_device(problem, load_json(folder.schedule_json), session=session)
    except PoetsimError as exc:
        return replace(row, device_ok=False, device_message=" ".join(str(exc).split()))
    folder.device_json.write_text(json.dumps(run.summary(), indent=1) + "\n", encoding="utf-8")
    return replace(row, **device_columns(run))


def device_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured beside predicted for every row run on the device: what compare and the report show.

    In compare's order (`in_study_order`), whatever the order the rows were run in.
    """
    if "device_ok" not in frame or frame["device_ok"].isna().all():
        return pd.DataFrame()
    ran = in_study_order(frame[frame["device_ok"].notna()]).copy()
    ran["device_ok"] = ran["device_ok"].map(lambda v: str(v).lower() == "true")
    ratio = pd.to_numeric(ran["device_compute_s"], errors="coerce") / pd.to_numeric(
        ran["device_predicted_compute_s"], errors="coerce"
    )
    return pd.DataFrame(
        {
            "model": ran["model"],
            "platform": ran["platform"],
            "ram": ran["ram"],
            "runtime": ran["runtime_x"],
            "strategy": ran["strategy"],
            "device": ran["device_ok"].map({True: "ok", False: "FAILED"}),
            "peak bytes (predicted)": ran["predicted_peak_ram_bytes"],
            "peak bytes (device)": ran["device_peak_ram_bytes"],
            "recomputations": ran["device_recomputations"],
            "page-outs": ran["device_page_outs"],
            "compute s (predicted)": ran["device_predicted_compute_s"],
            "compute s (device)": ran["device_compute_s"],
            "device / predicted": ratio.round(3),
        }
    ).reset_index(drop=True)
