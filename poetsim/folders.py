"""The files poetsim writes into a folder, each name spelled once: a run's folder and a study's.

Writers and readers alike name a file through these records (`RunFolder(path).schedule_json`),
so that a file keeps one name everywhere: in the pipeline that writes it, the sweep that reads
it back, the commands that print it and the reports that link it. They sit at the bottom of
the layers because every stage, down to the simulator, writes into these folders.
"""

from dataclasses import dataclass
from pathlib import Path

#: The folder under a study that holds one `RunFolder` per point.
POINTS_DIR = "points"
_RUNS_CSV = "runs.csv"


@dataclass(frozen=True)
class RunFolder:
    """One run's files: `poetsim solve --out`, `poetsim simulate`'s folder, and each point of a sweep."""

    path: Path

    @property
    def schedule_json(self) -> Path:
        """The schedule with node names (`poetsim.schedule.formats`): `simulate --schedule` and `--start` read it."""
        return self.path / "schedule.json"

    @property
    def schedule_bin(self) -> Path:
        """The schedule in the compact binary format a device reads."""
        return self.path / "schedule.bin"

    @property
    def result_json(self) -> Path:
        """The run's result row (`poetsim.runs.ResultRow`) as JSON."""
        return self.path / "result.json"

    @property
    def trace_csv(self) -> Path:
        """Every simulated event, waits with their causes (`poetsim.simulator.trace.TRACE_COLUMNS`)."""
        return self.path / "trace.csv"

    @property
    def summary_json(self) -> Path:
        """The simulator's own figures (`SimulationResult.summary`)."""
        return self.path / "summary.json"

    @property
    def comparison_json(self) -> Path:
        """The checked prediction beside the simulation, differences by cause (`poetsim simulate`)."""
        return self.path / "comparison.json"

    @property
    def run_html(self) -> Path:
        """The run's page: figures, the simulated timeline and the schedule grid."""
        return self.path / "run.html"

    @property
    def device_json(self) -> Path:
        """The step on the emulated device, measured beside predicted (`poetsim device sweep`)."""
        return self.path / "device.json"

    def chart(self, stem: str, suffix: str) -> Path:
        """A chart of the run page as a file of its own: `timeline` or `schedule`, `.png` or `.svg`."""
        return self.path / f"{stem}{suffix}"

    def made_from_a_run(self) -> tuple[Path, ...]:
        """Every file made from the run the folder holds: what a new run written into it replaces or removes."""
        charts = tuple(self.chart(stem, suffix) for stem in RUN_CHARTS for suffix in (".png", ".svg"))
        named = (self.result_json, self.schedule_json, self.schedule_bin, self.trace_csv, self.summary_json)
        return (*named, self.comparison_json, self.run_html, self.device_json, *charts)


#: The charts of a run page that are also files of their own (`poetsim.report.charts.save_run_charts`).
RUN_CHARTS = ("timeline", "schedule")


@dataclass(frozen=True)
class StudyFolder:
    """A study's files: what `poetsim sweep`, `compare` and `report` write into one results folder."""

    path: Path

    @classmethod
    def holding(cls, path: str | Path) -> "StudyFolder":
        """The study that `path` names: a results folder, or the runs.csv in one (as commands accept either)."""
        path = Path(path)
        return cls(path.parent) if path.name == _RUNS_CSV else cls(path)

    @property
    def runs_csv(self) -> Path:
        """One row per point (`poetsim.runs.RunsFile`)."""
        return self.path / _RUNS_CSV

    @property
    def scenario_yaml(self) -> Path:
        """The copy of the swept scenario, which `compare` and `--resume` read back."""
        return self.path / "scenario.yaml"

    @property
    def compare_csv(self) -> Path:
        """The strategies side by side, every number (`poetsim compare`)."""
        return self.path / "compare.csv"

    @property
    def compare_txt(self) -> Path:
        """The same table as text, as `poetsim compare` prints it."""
        return self.path / "compare.txt"

    @property
    def report_html(self) -> Path:
        """The study's report (`poetsim report`)."""
        return self.path / "report.html"

    def point(self, slug: str) -> RunFolder:
        """The folder of the point whose folder name is `slug` (`poetsim.sweeps.runner.point_slug`)."""
        return RunFolder(self.path / POINTS_DIR / slug)
