"""The independent checker: hand-computed figures under both timing models, every rejection."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poetsim.errors import InternalError, PoetsimError, ScheduleError
from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Compute, Figures, Free, Instruction, PageIn, PageOut, Schedule, Timing

C, F, PI, PO = Compute, Free, PageIn, PageOut
BOTH = (Timing.COMPUTE_ONLY, Timing.OVERLAP)


def make_graph(deps, output_bytes, name="g") -> TrainingGraph:
    """A graph from per-node dependency tuples and output sizes."""
    return TrainingGraph.create(
        name, [Node(i, f"n{i}", "op", False, tuple(d), b) for i, (d, b) in enumerate(zip(deps, output_bytes))]
    )


def make_costs(graph, compute_s=None, paging=None, static_power_w=0.0, dma_channels=1) -> CostTable:
    """Costs with compute energy = 1 J per second of compute, and per-node paging overrides.

    `paging` maps node -> (page_out_s, page_out_j, page_in_s, page_in_j); others cost 1 s, 1 J.
    """
    n = len(graph)
    compute_s = tuple(float(x) for x in (compute_s or [1.0] * n))
    page = [(1.0, 1.0, 1.0, 1.0)] * n
    for node, figures in (paging or {}).items():
        page[node] = figures
    return CostTable(
        output_bytes=graph.output_bytes,
        compute_s=compute_s,
        compute_j=compute_s,
        page_out_s=tuple(p[0] for p in page),
        page_out_j=tuple(p[1] for p in page),
        page_in_s=tuple(p[2] for p in page),
        page_in_j=tuple(p[3] for p in page),
        static_power_w=static_power_w,
        dma_channels=dma_channels,
    )


def schedule_of(graph, stages, timing=Timing.OVERLAP) -> Schedule:
    return Schedule(graph.name, len(graph), timing, tuple(tuple(s) for s in stages))


def keep_all_stages(graph):
    """Every node once; an output is freed right after its last reader (or its own step)."""
    return [[C(t)] + [F(i) for i in sorted({*graph.nodes[t].deps, t}) if graph.last_use[i] == t] for t in range(len(graph))]


# Six nodes shaped like training: 0-2 forward, 3 the loss, 4-5 backward; 4 reads 0 again,
# so 0 can be kept, recomputed or paged between stage 1 and stage 4.
DEPS = [(), (0,), (1,), (2,), (3, 0), (4,)]
SIZES = [100, 200, 40, 10, 50, 20]
COMPUTE_S = [1, 2, 1, 1, 3, 1]  # 9 s, 9 J in all


@pytest.fixture
def six():
    return make_graph(DEPS, SIZES, "six")


@pytest.fixture
def six_costs(six):
    """Node 0 pages out in 1.5 s for 0.3 J and back in in 2.5 s for 0.5 J; static 0.5 W."""
    return make_costs(six, COMPUTE_S, paging={0: (1.5, 0.3, 2.5, 0.5)}, static_power_w=0.5)


RECOMPUTE = [[C(0)], [C(1), F(0)], [C(2), F(1)], [C(3), F(2)], [C(0), C(4), F(0), F(3)], [C(5), F(4), F(5)]]
PAGING = [[C(0)], [C(1)], [PO(0), F(0), C(2), F(1)], [PI(0), C(3), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]]


def test_keep_all_schedule_of_a_chain_peaks_at_keep_all_peak():
    """Every node once, freed after its last reader: the checker's peak is keep_all_peak_bytes."""
    graph = make_graph([()] + [(i,) for i in range(19)], [(7 * i) % 23 + 1 for i in range(20)], "chain")
    for timing in BOTH:
        figures = check_schedule(schedule_of(graph, keep_all_stages(graph)), graph, make_costs(graph), timing)
        assert figures.peak_ram_bytes == graph.keep_all_peak_bytes
        assert (figures.recomputations, figures.page_ins, figures.page_outs) == (0, 0, 0)
        assert figures.compute_j == 20.0 and figures.recompute_j == 0.0


def test_keep_all_schedule_of_the_six_node_graph(six, six_costs):
    """Hand-computed: the peak is after computing 2 with 0, 1 and 2 resident: 340 bytes."""
    figures = check_schedule(schedule_of(six, keep_all_stages(six)), six, six_costs, Timing.OVERLAP)
    assert figures.peak_ram_bytes == six.keep_all_peak_bytes == 340
    assert figures.runtime_s == 9.0
    assert figures.static_j == 4.5


@st.composite
def random_graphs(draw):
    n = draw(st.integers(1, 25))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    sizes = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
    return make_graph(deps, sizes, "random")


@settings(max_examples=60, deadline=None)
@given(random_graphs(), st.sampled_from(BOTH))
def test_keep_all_schedule_of_any_graph_checks_at_keep_all_peak(graph, timing):
    """Invariant: the keep-all schedule of any DAG is valid and peaks at keep_all_peak_bytes."""
    figures = check_schedule(schedule_of(graph, keep_all_stages(graph)), graph, make_costs(graph), timing)
    assert figures.peak_ram_bytes == graph.keep_all_peak_bytes


@pytest.mark.parametrize("timing", BOTH)
def test_recomputation_figures_by_hand(six, six_costs, timing):
    """Dropping 0 after stage 1 and recomputing it in stage 4 lowers the peak from 340 to 300.

    RAM by stage: s1 0+1 = 300, s2 1+2 = 240, s3 2+3 = 50, s4 3+0+4 = 160. With no paging both
    timing models agree on RAM and time (10 s: 9 s once plus 1 s recomputing 0); only overlap
    adds static energy (0.5 W x 10 s).
    """
    figures = check_schedule(schedule_of(six, RECOMPUTE), six, six_costs, timing)
    assert figures == Figures(
        peak_ram_bytes=300,
        runtime_s=10.0,
        compute_j=9.0,
        recompute_j=1.0,
        page_in_j=0.0,
        page_out_j=0.0,
        static_j=5.0 if timing is Timing.OVERLAP else 0.0,
        recomputations=1,
        page_ins=0,
        page_outs=0,
    )


def test_paging_figures_by_hand_compute_only(six, six_costs):
    """Paper timing: Free(0) releases 0 at once although its page-out was issued this stage.

    s2: start 0+1 = 300, Free(0) -> 200, Compute(2) -> 240. s3: page-in adds nothing yet.
    s4: start 0+3 = 110, Compute(4) -> 160. Peak 300 (s1). Time counts compute only: 9 s.
    """
    figures = check_schedule(schedule_of(six, PAGING), six, six_costs, Timing.COMPUTE_ONLY)
    assert figures == Figures(300, 9.0, 9.0, 0.0, 0.5, 0.3, 0.0, 0, 1, 1)


def test_paging_figures_by_hand_overlap(six, six_costs):
    """Overlap: 0's buffer is held until the end of stage 2 (its page-out may run until then).

    s2: start 300, Free(0) deferred -> 300, Compute(2) -> 340: 40 bytes above compute-only.
    Stage times: s2 max(1 s compute, 1.5 s page-out) = 1.5 s, s3 max(1 s, 2.5 s page-in) = 2.5 s,
    so 1 + 2 + 1.5 + 2.5 + 3 + 1 = 11 s, and static energy 0.5 W x 11 s = 5.5 J.
    """
    figures = check_schedule(schedule_of(six, PAGING), six, six_costs, Timing.OVERLAP)
    assert figures == Figures(340, 11.0, 9.0, 0.0, 0.5, 0.3, 5.5, 0, 1, 1)
    assert figures.total_j == pytest.approx(15.3)


def test_page_in_bytes_count_one_stage_earlier_under_overlap(six_costs):
    """With a big loss node, the page-in's stage is the peak under overlap only.

    Sizes 0:100, 1:200, 2:40, 3:300, 4:10. Overlap s3: 2 (40) + 0 being paged in (100) + 3 (300)
    = 440. Compute-only s3 peaks at 2 + 3 = 340, and 0 appears at s4: 0 + 3 + 4 = 410.
    """
    graph = make_graph(DEPS, [100, 200, 40, 300, 10, 20], "big-loss")
    costs = replace(six_costs, output_bytes=graph.output_bytes)
    schedule = schedule_of(graph, PAGING)
    assert check_schedule(schedule, graph, costs, Timing.COMPUTE_ONLY).peak_ram_bytes == 410
    assert check_schedule(schedule, graph, costs, Timing.OVERLAP).peak_ram_bytes == 440


def test_stage_start_ram_counts_even_when_the_stage_frees_first():
    """Compute-only: a page-in lands at the end of its stage, so the next stage starts with it.

    Nodes 0 (100 B) and 1-3 (10 B each, independent). s1 pages 0 out, s2 pages it back in
    (nothing counted yet: 10 + 10 = 20), s3 starts at 1 + 2 + 0 = 120 then frees 0 first:
    the peak is that stage-start RAM, reached after no compute at all.
    """
    graph = make_graph([(), (), (), ()], [100, 10, 10, 10], "lands")
    stages = [[C(0)], [PO(0), C(1), F(0)], [PI(0), C(2)], [F(0), C(3)]]
    figures = check_schedule(schedule_of(graph, stages), graph, make_costs(graph), Timing.COMPUTE_ONLY)
    assert figures.peak_ram_bytes == 120


def test_dma_time_is_shared_between_channels(six):
    """Two channels halve a stage's DMA time: s3 lasts max(1 s, 2.5 s / 2) = 1.25 s."""
    costs = make_costs(six, COMPUTE_S, paging={0: (1.5, 0.3, 2.5, 0.5)}, dma_channels=2)
    figures = check_schedule(schedule_of(six, PAGING), six, costs, Timing.OVERLAP)
    assert figures.runtime_s == pytest.approx(1 + 2 + 1 + 1.25 + 3 + 1)


def test_timing_given_as_its_string_value(six, six_costs):
    """The CLI may pass the timing's value; it means the same model."""
    figures = check_schedule(schedule_of(six, PAGING), six, six_costs, "overlap")
    assert figures.peak_ram_bytes == 340


def _with_stage(stages, t, stage):
    return [*stages[:t], stage, *stages[t + 1 :]]


REJECTIONS = {
    "missing input": (_with_stage(RECOMPUTE, 4, [C(4), F(3)]), r"^stage 4, Compute\(4\): input 0 is not in RAM$"),
    "input still being paged in": (
        _with_stage(_with_stage(PAGING, 3, [C(3), F(2)]), 4, [PI(0), C(4), F(3)]),
        r"^stage 4, Compute\(4\): input 0 is not in RAM \(it is being paged in",
    ),
    "compute of a resident node": (
        _with_stage(RECOMPUTE, 1, [C(0), C(1), F(0)]),
        r"^stage 1, Compute\(0\): node 0's output is already in RAM$",
    ),
    "compute of a node being paged in": (
        _with_stage(PAGING, 3, [PI(0), C(0), C(3), F(2)]),
        r"^stage 3, Compute\(0\): node 0 is being paged in",
    ),
    "computes not ascending": (
        _with_stage(RECOMPUTE, 4, [C(0), C(4), F(0), C(0), F(0), F(3)]),
        r"^stage 4, Compute\(0\): computes must be in ascending node order, but Compute\(4\) came earlier$",
    ),
    "compute ahead of its stage": (
        _with_stage(RECOMPUTE, 3, [C(3), C(4), F(2)]),
        r"^stage 3, Compute\(4\): node 4 is first computed in stage 4",
    ),
    "last compute not node t": (
        _with_stage(RECOMPUTE, 3, [F(2)]),
        r"^stage 3: the last compute must be Compute\(3\), found no compute$",
    ),
    "page-out of a non-resident node": (
        _with_stage(RECOMPUTE, 3, [PO(1), C(3), F(2)]),
        r"^stage 3, PageOut\(1\): node 1 is not in RAM at the start of the stage$",
    ),
    "page-out twice in a stage": (
        _with_stage(PAGING, 2, [PO(0), PO(0), F(0), C(2), F(1)]),
        r"^stage 2, PageOut\(0\): node 0 is already being paged out",
    ),
    "page-in of a node never paged out": (
        _with_stage(RECOMPUTE, 3, [PI(0), C(3), F(2)]),
        r"^stage 3, PageIn\(0\): node 0 is not on storage",
    ),
    "page-in in the stage of the page-out": (  # a page-out copies: the node is still resident
        _with_stage(PAGING, 2, [PO(0), PI(0), C(2), F(1)]),
        r"^stage 2, PageIn\(0\): node 0 is already in RAM$",
    ),
    "page-in of a resident node": (
        _with_stage(PAGING, 2, [PO(0), C(2), F(1)]),
        r"^stage 3, PageIn\(0\): node 0 is already in RAM$",
    ),
    "page-in twice in a stage": (
        _with_stage(PAGING, 3, [PI(0), PI(0), C(3), F(2)]),
        r"^stage 3, PageIn\(0\): node 0 is already being paged in",
    ),
    "free of a non-resident node": (_with_stage(RECOMPUTE, 2, [C(2), F(1), F(1)]), r"^stage 2, Free\(1\): node 1 is not in RAM$"),
    "page-in after a compute": (
        _with_stage(PAGING, 3, [C(3), PI(0), F(2)]),
        r"^stage 3, PageIn\(0\): out of order: page-ins must come before computes and frees",
    ),
    "page-out after a page-in": (
        _with_stage(PAGING, 3, [PI(0), PO(2), C(3), F(2)]),
        r"^stage 3, PageOut\(2\): out of order: page-outs must come before page-ins",
    ),
    "page-out after a free": (
        _with_stage(PAGING, 2, [F(0), PO(0), C(2), F(1)]),
        r"^stage 2, PageOut\(0\): out of order: page-outs must come before computes and frees",
    ),
    "node id too large": (_with_stage(RECOMPUTE, 5, [C(5), F(4), F(6)]), r"^stage 5, Free\(6\): node id 6 is out of range 0..5$"),
    "negative node id": (
        _with_stage(RECOMPUTE, 5, [C(5), F(4), F(-1)]),
        r"^stage 5, Free\(-1\): node id -1 is out of range 0..5$",
    ),
    "unknown instruction": (_with_stage(RECOMPUTE, 5, [C(5), ("free", 4)]), r"^stage 5: unknown instruction \('free', 4\)$"),
}


@pytest.mark.parametrize("timing", BOTH)
@pytest.mark.parametrize("case", sorted(REJECTIONS))
def test_rejection(six, six_costs, case, timing):
    """Each broken schedule is refused with the stage, the instruction and the node named."""
    stages, message = REJECTIONS[case]
    with pytest.raises(ScheduleError, match=message):
        check_schedule(schedule_of(six, stages), six, six_costs, timing)


def test_schedule_for_another_number_of_nodes_is_rejected(six, six_costs):
    schedule = replace(schedule_of(six, RECOMPUTE), num_nodes=7)
    with pytest.raises(ScheduleError, match=r"^the schedule is for 7 nodes but graph 'six' has 6$"):
        check_schedule(schedule, six, six_costs, Timing.OVERLAP)


def test_node_never_computed_is_rejected(six, six_costs):
    """Five stages for six nodes: node 5 never runs."""
    with pytest.raises(ScheduleError, match=r"^node 5 is never computed: the schedule has 5 stages for 6 nodes"):
        check_schedule(schedule_of(six, RECOMPUTE[:5]), six, six_costs, Timing.OVERLAP)


def test_extra_stage_is_rejected(six, six_costs):
    with pytest.raises(ScheduleError, match=r"^the schedule has 7 stages for 6 nodes"):
        check_schedule(schedule_of(six, [*RECOMPUTE, [C(5)]]), six, six_costs, Timing.OVERLAP)


def test_costs_of_another_graph_are_an_internal_error(six, six_costs):
    other = make_graph(DEPS, [1, 2, 3, 4, 5, 6], "other")
    with pytest.raises(InternalError, match="cost table"):
        check_schedule(schedule_of(other, RECOMPUTE), other, six_costs, Timing.OVERLAP)


def test_schedule_error_is_a_poetsim_error_with_its_own_exit_code():
    assert issubclass(ScheduleError, PoetsimError)
    assert ScheduleError.exit_code == 6


def test_budgets_met_exactly_pass(six, six_costs):
    """A peak equal to the RAM budget and a runtime equal to the deadline are within budget."""
    figures = check_schedule(schedule_of(six, PAGING), six, six_costs, Timing.OVERLAP, Budgets(340, 11.0))
    assert figures.peak_ram_bytes == 340


def test_ram_over_budget_says_by_how_much(six, six_costs):
    with pytest.raises(
        ScheduleError, match=r"^over budget: peak RAM 340 bytes is 10 bytes \(3.03%\) over the budget of 330 bytes$"
    ):
        check_schedule(schedule_of(six, PAGING), six, six_costs, Timing.OVERLAP, Budgets(330, 11.0))


def test_runtime_over_deadline_says_by_how_much(six, six_costs):
    with pytest.raises(ScheduleError, match=r"^over budget: runtime 11 s is 1 s \(10%\) over the deadline of 10 s$"):
        check_schedule(schedule_of(six, PAGING), six, six_costs, Timing.OVERLAP, Budgets(340, 10.0))


def test_both_budgets_exceeded_are_both_named(six, six_costs):
    """Under compute-only the same schedule is 300 bytes and 9 s: tighter budgets catch both."""
    with pytest.raises(ScheduleError, match=r"peak RAM 300 bytes is 1 bytes .*; runtime 9 s is 1 s"):
        check_schedule(schedule_of(six, PAGING), six, six_costs, Timing.COMPUTE_ONLY, Budgets(299, 8.0))


def test_compare_figures_names_the_figures_that_differ():
    base = Figures(340, 11.0, 9.0, 0.0, 0.5, 0.3, 5.5, 0, 1, 1)
    assert compare_figures(base, base) == []
    assert compare_figures(base, replace(base, runtime_s=11.0 * (1 + 1e-9))) == []
    assert compare_figures(base, replace(base, recompute_j=1e-15)) == []  # zero vs rounding residue
    changed = replace(base, peak_ram_bytes=341, page_in_j=0.6, page_ins=2)
    assert compare_figures(base, changed) == ["peak_ram_bytes", "page_in_j", "page_ins"]
    assert compare_figures(base, replace(base, compute_j=9.0009), rtol=1e-3) == []
    assert compare_figures(base, replace(base, compute_j=9.1), rtol=1e-3) == ["compute_j"]


def training_chain(num_forward: int) -> TrainingGraph:
    """Forward chain 0..F-1, the loss F, then one backward node per layer, last layer first.

    The backward node of layer j reads the previous gradient and forward output j, as a ReLU
    network's would, so forward outputs live until the backward pass comes back to them.
    """
    deps = [[i - 1] if i else [] for i in range(num_forward)] + [[num_forward - 1]]
    for j in range(num_forward - 1, -1, -1):
        deps.append([len(deps) - 1, j])
    return make_graph(deps, [1000 + 10 * (i % 7) for i in range(len(deps))], f"chain-{len(deps)}")


def checkpoint_stages(num_forward: int, every: int) -> list[list[Instruction]]:
    """Keep every `every`-th forward output; each backward stage recomputes from its checkpoint."""
    stages: list[list[Instruction]] = [[C(0)]]
    for i in range(1, num_forward):
        stages.append([C(i), *([F(i - 1)] if (i - 1) % every else [])])
    stages.append([C(num_forward)])
    for j in range(num_forward - 1, -1, -1):
        node = len(stages)
        stage: list[Instruction] = []
        if j % every and j != num_forward - 1:
            checkpoint = j - j % every
            for k in range(checkpoint + 1, j + 1):
                stage.append(C(k))
                if k - 1 != checkpoint:
                    stage.append(F(k - 1))
        stage += [C(node), F(node - 1), F(j)]
        stages.append(stage)
    stages[-1].append(F(len(stages) - 1))
    return stages


def test_checkpointing_schedule_recomputes_and_checks():
    """A recompute-only schedule with many recomputations is valid and counts them."""
    graph = training_chain(20)
    stages = checkpoint_stages(20, 5)
    figures = check_schedule(schedule_of(graph, stages), graph, make_costs(graph), Timing.OVERLAP)
    recomputations = sum(isinstance(i, Compute) for s in stages for i in s) - len(graph)
    assert figures.recomputations == recomputations > 0
    assert figures.peak_ram_bytes < graph.keep_all_peak_bytes


def test_a_schedule_whose_node_names_are_another_graph_s_is_refused(six, six_costs):
    named = replace(schedule_of(six, RECOMPUTE), node_names=tuple(f"other{k}" for k in range(len(six))))
    with pytest.raises(ScheduleError, match=r"names node 0 'other0' but graph 'six' calls it 'n0'"):
        check_schedule(named, six, six_costs, Timing.OVERLAP)
    ours = replace(named, node_names=tuple(node.name for node in six.nodes))
    assert check_schedule(ours, six, six_costs, Timing.OVERLAP).recomputations > 0
