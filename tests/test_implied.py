"""Carried across a sweep's grid: schedules that fit other points, a relaxation's infeasibility and lower bound."""

from dataclasses import replace
from typing import Any

import pytest
from test_sweep import small_scenario

from poetsim.inputs.scenario import load_scenario
from poetsim.pipeline import problem_for_point
from poetsim.runs import ResultRow, RunsFile
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.formats import load_json
from poetsim.status import Status
from poetsim.sweeps.implied import apply_implied, relaxes, schedule_donor
from poetsim.sweeps.runner import POINTS_DIR, carry_across_grid, point_slug, run_sweep


def row(strategy="hybrid", ram=1000, deadline=2.0, status=Status.FEASIBLE, bound=None, total=None, **changes):
    """A row of one solved point of a made-up graph whose keep-all costs 10 J."""
    fields = dict(
        scenario="s",
        point_key=f"g|p|{ram}B|{deadline}x|{strategy}",
        model="g",
        platform="p",
        ram=f"{ram}B",
        runtime_x=deadline,
        strategy=strategy,
        status=status,
        timing="overlap",
        ram_budget_bytes=ram,
        deadline_s=deadline,
        reserved_bytes=0,
        keep_all_peak_bytes=2000,
        keep_all_energy_j=10.0,
        bound_j=bound,
        predicted_total_j=total,
    )
    fields.update(changes)
    return ResultRow(**fields)


def test_a_relaxation_has_budgets_and_moves_at_least_as_large():
    tight = row("recompute-only", ram=800, deadline=1.5)
    assert relaxes(row("hybrid", ram=800, deadline=1.5), tight)
    assert relaxes(row("recompute-only", ram=1000, deadline=2.0), tight)
    assert not relaxes(row("paging-only", ram=1000, deadline=2.0), tight)  # cannot recompute
    assert not relaxes(row("hybrid", ram=700, deadline=2.0), tight)  # less RAM
    assert not relaxes(row("hybrid", ram=1000, deadline=1.4), tight)  # shorter deadline
    assert not relaxes(row("hybrid", ram=1000, platform="other"), tight)  # another machine
    assert not relaxes(row("hybrid", ram=1000, keep_all_energy_j=11.0), tight)  # other costs
    assert not relaxes(row("keep-all", ram=1000), tight)  # a rule proves nothing
    assert not relaxes(tight, tight)


def test_a_relaxation_proven_infeasible_proves_the_tighter_point_infeasible():
    loose = row("hybrid", ram=1000, status=Status.INFEASIBLE)
    tight = row("paging-only", ram=900, status=Status.NO_SOLUTION, bound=10.5)
    carried = apply_implied([loose, tight])
    assert carried[0] is loose
    assert carried[1].status is Status.INFEASIBLE and carried[1].bound_j is None
    assert "hybrid at 1000B RAM, 2x is proven infeasible" in carried[1].message


def test_a_relaxations_bound_proves_a_schedule_that_meets_it_optimal():
    loose = row("hybrid", ram=1000, status=Status.OPTIMAL, bound=12.0, total=12.0)
    meets = row("recompute-only", ram=1000, bound=11.0, total=12.0, gap_overhead=0.5)
    above = row("recompute-only", ram=900, bound=11.0, total=14.0, gap_overhead=0.75, message="stopped with a gap")
    carried = apply_implied([loose, meets, above])
    assert carried[1].status is Status.OPTIMAL and carried[1].bound_j == 12.0 and carried[1].gap_overhead == 0.0
    assert carried[2].status is Status.FEASIBLE and carried[2].bound_j == 12.0
    assert carried[2].gap_overhead == pytest.approx(0.5)  # (14 - 12) / (14 - 10)
    assert carried[2].message.startswith("stopped with a gap; the lower bound of hybrid")


def test_a_lower_bound_is_never_lowered_and_proven_rows_are_left_alone():
    loose = row("hybrid", ram=1000, bound=11.0, total=13.0)
    better = row("recompute-only", ram=900, bound=11.5, total=13.0)
    optimal = row("recompute-only", ram=800, status=Status.OPTIMAL, bound=12.0, total=12.0)
    assert apply_implied([loose, better, optimal])[1:] == [better, optimal]


def test_a_point_takes_the_cheapest_schedule_that_fits_its_budgets_and_moves():
    own = row("recompute-only", ram=900, deadline=2.0, total=13.0, bound=11.0)
    with_schedule = dict(
        status=Status.OPTIMAL,
        predicted_peak_ram_bytes=850,
        predicted_runtime_s=1.9,
        predicted_recomputations=2,
        predicted_page_ins=0,
        predicted_page_outs=0,
    )
    looser = row("recompute-only", ram=1000, deadline=3.0, total=12.0, **with_schedule)  # fits: 850 B, 1.9 s
    cheaper_hybrid = row("hybrid", ram=900, total=11.5, **with_schedule)  # never pages
    pages = row("hybrid", ram=950, total=11.0, **{**with_schedule, "predicted_page_ins": 1})
    too_big = row("hybrid", ram=2000, total=10.5, **{**with_schedule, "predicted_peak_ram_bytes": 1500})
    too_slow = row("hybrid", ram=980, total=10.5, **{**with_schedule, "predicted_runtime_s": 2.5})
    others = [looser, pages, too_big, too_slow]
    assert schedule_donor(own, [own, *others]) is looser
    assert schedule_donor(own, [own, *others, cheaper_hybrid]) is cheaper_hybrid
    assert schedule_donor(replace(own, predicted_total_j=11.0), [own, *others]) is None  # none cheaper
    assert schedule_donor(replace(own, status=Status.OPTIMAL), [own, *others]) is None


def test_a_point_left_without_a_schedule_takes_a_neighbours_checked_schedule(tmp_path):
    """A point left without a schedule takes a neighbour's, checked again, saved, and proven.

    Recompute-only at 70 % and 1.5x, cut short with no schedule, takes hybrid's at the same
    point (it recomputes and never pages), checked again, saved in its folder, and proven
    optimal by its own lower bound.
    """
    scenario = small_scenario(tmp_path)
    directory = tmp_path / "out"
    runs = RunsFile(run_sweep(scenario, directory, jobs=2))
    records = runs.records()
    keys = [(r["platform"], r["ram"], r["runtime_x"], r["strategy"]) for r in records]
    position = keys.index(("nrf52840", "70%", "1.5", "recompute-only"))
    solved = ResultRow.from_dict(records[position])
    points = {point.key: point for point in scenario.points()}
    folder = directory / POINTS_DIR / point_slug(points[solved.point_key])
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    runs.rewrite(
        {
            position: ResultRow(
                **{
                    **{
                        f: getattr(solved, f)
                        for f in (
                            "scenario",
                            "point_key",
                            "model",
                            "platform",
                            "ram",
                            "runtime_x",
                            "strategy",
                            "model_name",
                            "timing",
                            "ram_budget_bytes",
                            "deadline_s",
                            "reserved_bytes",
                            "keep_all_peak_bytes",
                            "keep_all_energy_j",
                            "bound_j",
                        )
                    },
                    "status": Status.NO_SOLUTION,
                    "message": "timed out",
                }
            )
        }
    )

    assert carry_across_grid(scenario, directory) == 1
    taken = ResultRow.from_dict(runs.records()[position])
    assert taken.status is Status.OPTIMAL and "hybrid at 70% RAM, 1.5x" in taken.message
    assert taken.predicted_total_j == pytest.approx(solved.predicted_total_j)
    problem = problem_for_point(scenario, points[solved.point_key])
    checked = check_schedule(load_json(folder / "schedule.json"), problem.graph, problem.costs, problem.timing, problem.budgets)
    assert checked.total_j == pytest.approx(taken.predicted_total_j)
    assert (folder / "result.json").exists() and taken.simulated_total_j is not None


def test_carry_across_grid_restores_what_a_time_limit_left_unproven(tmp_path):
    """What a time limit left unproven is completed from the other points of the grid.

    The MCU sweep proves hybrid infeasible at 70 % and 1.0x and optimal at 70 % and 1.5x; a
    recompute-only solve cut short at those points (as a busy machine can) is completed from
    them.
    """
    scenario = small_scenario(tmp_path)
    runs = RunsFile(run_sweep(scenario, tmp_path / "out", jobs=2))
    records = runs.records()
    rows = {(r.platform, r.ram, r.runtime_x, r.strategy): r for r in map(ResultRow.from_dict, records)}
    assert rows["nrf52840", "70%", 1.0, "hybrid"].status is Status.INFEASIBLE
    hybrid = rows["nrf52840", "70%", 1.5, "hybrid"]
    recompute = rows["nrf52840", "70%", 1.5, "recompute-only"]
    assert hybrid.status is Status.OPTIMAL and recompute.predicted_total_j == pytest.approx(hybrid.bound_j)

    cut_short: dict[tuple[str, str, float, str], dict[str, Any]] = {
        ("nrf52840", "70%", 1.0, "recompute-only"): dict(status=Status.NO_SOLUTION, message="timed out"),
        ("nrf52840", "70%", 1.5, "recompute-only"): dict(status=Status.FEASIBLE, bound_j=recompute.keep_all_energy_j),
    }
    positions = {
        key: n for n, key in enumerate((r.platform, r.ram, r.runtime_x, r.strategy) for r in map(ResultRow.from_dict, records))
    }
    runs.rewrite({positions[key]: replace(rows[key], **change) for key, change in cut_short.items()})
    before = runs.path.read_text().splitlines()

    assert carry_across_grid(scenario, tmp_path / "out") == 2
    after = runs.path.read_text().splitlines()
    assert sum(a != b for a, b in zip(before, after)) == 2  # every other row byte for byte
    again = {(r.platform, r.ram, r.runtime_x, r.strategy): r for r in map(ResultRow.from_dict, runs.records())}
    assert again["nrf52840", "70%", 1.0, "recompute-only"].status is Status.INFEASIBLE
    assert again["nrf52840", "70%", 1.5, "recompute-only"].status is Status.OPTIMAL
    assert carry_across_grid(scenario, tmp_path / "out") == 0


def test_a_schedule_made_on_another_platform_is_checked_under_this_ones_costs(tmp_path):
    """A schedule made on another platform is checked and costed under this one's costs.

    Recompute-only on rpi4 and rpi4-nocache (which differ only in page-out costs): with
    rpi4-nocache's solve cut short, its point takes rpi4's schedule, checked and costed there.
    """
    path = tmp_path / "two.yaml"
    path.write_text(
        "name: two\nmodel: mlp\nbatch_size: 2\nplatform: [rpi4, rpi4-nocache]\n"
        "budgets:\n  ram: 70%\n  runtime: 1.5x\nstrategies: [recompute-only]\ntime_limit_s: 30\n"
    )
    scenario = load_scenario(path)
    directory = tmp_path / "out"
    runs = RunsFile(run_sweep(scenario, directory, jobs=1))
    records = runs.records()
    keys = [(r["platform"], r["strategy"]) for r in records]
    solved = ResultRow.from_dict(records[keys.index(("rpi4-nocache", "recompute-only"))])
    assert solved.status is Status.OPTIMAL
    points = {point.key: point for point in scenario.points()}
    folder = directory / POINTS_DIR / point_slug(points[solved.point_key])
    for file in folder.iterdir():
        file.unlink()
    no_figures: dict[str, Any] = {
        f"predicted_{name}": None
        for name in ("total_j", "peak_ram_bytes", "runtime_s", "recomputations", "page_ins", "page_outs")
    }
    runs.rewrite(
        {
            keys.index(("rpi4-nocache", "recompute-only")): replace(
                solved, status=Status.NO_SOLUTION, message="timed out", **no_figures
            )
        }
    )

    assert carry_across_grid(scenario, directory) == 1
    taken = ResultRow.from_dict(runs.records()[keys.index(("rpi4-nocache", "recompute-only"))])
    assert taken.status is Status.OPTIMAL and "on rpi4 fits here" in taken.message
    assert taken.predicted_total_j == pytest.approx(solved.predicted_total_j, rel=1e-9)
    problem = problem_for_point(scenario, points[solved.point_key])
    checked = check_schedule(load_json(folder / "schedule.json"), problem.graph, problem.costs, problem.timing, problem.budgets)
    assert checked.total_j == pytest.approx(solved.predicted_total_j, rel=1e-9)


def test_carry_across_grid_puts_the_rows_in_the_grids_order(tmp_path):
    """runs.csv ends in the grid's point order, whichever point finished first, each row's text kept."""
    scenario = small_scenario(tmp_path)
    runs = RunsFile(run_sweep(scenario, tmp_path / "out", jobs=2))
    order = [point.key for point in scenario.points()]
    assert [r["point_key"] for r in runs.records()] == order
    header, *lines = runs.path.read_text().splitlines()
    runs.path.write_text("\n".join([header, *reversed(lines)]) + "\n")  # as if the points had finished backwards

    assert carry_across_grid(scenario, tmp_path / "out") == 0
    assert [r["point_key"] for r in runs.records()] == order
    assert runs.path.read_text().splitlines() == [header, *lines]
    inode = runs.path.stat().st_ino  # a rewrite replaces the file with a new one
    assert carry_across_grid(scenario, tmp_path / "out") == 0 and runs.path.stat().st_ino == inode  # in order: not written
