"""Schedule files: JSON and binary round trips, the documented byte layout, bad files refused."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poetsim.errors import ScheduleError, UserInputError
from poetsim.schedule.formats import (
    decode_binary,
    encode_binary,
    load_json,
    load_schedule,
    save_json,
    schedule_from_json,
    schedule_to_json,
)
from poetsim.schedule.model import Compute, Free, Instruction, PageIn, PageOut, Schedule, Timing

C, F, PO = Compute, Free, PageOut
KINDS = (Compute, PageOut, PageIn, Free)


def typed(schedule: Schedule):
    """A schedule with each instruction's kind spelled out: Compute(3) == Free(3) as tuples."""
    stages = tuple(tuple((type(ins), ins.node) for ins in stage) for stage in schedule.stages)
    return schedule.graph_name, schedule.num_nodes, Timing(schedule.timing), stages, schedule.meta


@st.composite
def schedules(draw):
    """Valid-shaped schedules: any kinds, any non-negative ids, Compute(t) often somewhere in t."""
    stages = []
    for t in range(draw(st.integers(0, 12))):
        stage = draw(
            st.lists(
                st.builds(
                    lambda kind, node: kind(node), st.sampled_from(KINDS), st.one_of(st.integers(0, 40), st.integers(0, 2**40))
                ),
                max_size=12,
            )
        )
        if draw(st.booleans()):
            stage.insert(draw(st.integers(0, len(stage))), Compute(t))
        stages.append(tuple(stage))
    return Schedule(
        graph_name=draw(st.text(max_size=10)),
        num_nodes=draw(st.one_of(st.integers(0, 400), st.integers(0, 2**40))),
        timing=draw(st.sampled_from(list(Timing))),
        stages=tuple(stages),
        meta=tuple(draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)).items()),
    )


@settings(max_examples=100, deadline=None)
@given(schedules())
def test_json_round_trip_is_exact(schedule):
    """Through a JSON string and back, every field and every instruction's kind survive."""
    text = json.dumps(schedule_to_json(schedule))
    assert typed(schedule_from_json(json.loads(text))) == typed(schedule)


@settings(max_examples=30, deadline=None)
@given(schedule=schedules())
def test_json_file_round_trip_is_exact(schedule, tmp_path_factory):
    path = tmp_path_factory.mktemp("json") / "schedule.json"
    save_json(schedule, path)
    assert typed(load_json(path)) == typed(schedule)


@settings(max_examples=150, deadline=None)
@given(schedules())
def test_binary_round_trip_is_exact(schedule):
    """The device encoding keeps timing, node count and every instruction in order."""
    decoded = decode_binary(encode_binary(schedule), graph_name=schedule.graph_name)
    assert typed(decoded) == typed(Schedule(schedule.graph_name, schedule.num_nodes, schedule.timing, schedule.stages))


def test_saved_json_has_one_stage_a_line(tmp_path):
    schedule = Schedule("g", 3, Timing.OVERLAP, ((C(0),), (C(1), F(0)), (C(2), F(1), F(2))), (("solver", "highs"),))
    path = tmp_path / "s.json"
    save_json(schedule, path)
    lines = path.read_text().splitlines()
    assert '    [["compute", 1], ["free", 0]],' in lines
    assert json.loads(path.read_text())["meta"] == {"solver": "highs"}


def test_binary_layout_is_the_documented_one():
    """Hand-encoded: Compute(t) is implicit with `after` counting what follows it."""
    schedule = Schedule("", 3, Timing.OVERLAP, ((C(0),), (C(1), F(0)), (PO(1), C(0), C(2), F(0), F(1), F(2))))
    assert encode_binary(schedule) == (
        b"POET\x01\x01\x03\x03"  # magic, version 1, overlap, 3 nodes, 3 stages
        + b"\x00"  # stage 0: nothing listed, Compute(0) with 0 after it
        + b"\x09\x03"  # stage 1: 1 listed, 1 after Compute(1); Free(0) = 0 << 2 | 3
        + b"\x2b\x05\x00\x03\x07\x0b"  # stage 2: 5 listed, 3 after; PO(1), C(0), F(0), F(1), F(2)
    )


def test_binary_lists_compute_t_when_more_than_six_instructions_follow_it():
    stage: tuple[Instruction, ...] = (C(1), *(F(0) for _ in range(7)))
    blob = encode_binary(Schedule("", 2, Timing.COMPUTE_ONLY, ((C(0),), stage)))
    assert blob == b"POET\x01\x00\x02\x02\x00" + bytes([8 << 3 | 7, 1 << 2]) + b"\x03" * 7
    assert decode_binary(blob).stages[1] == stage


def test_binary_node_ids_use_multi_byte_varints():
    """Compute(200) as a recomputation is 800 = 0xA0 0x06 in LEB128."""
    blob = encode_binary(Schedule("", 202, Timing.OVERLAP, tuple(((C(200),) if t == 201 else ()) for t in range(202))))
    assert b"\xa0\x06" in blob


def test_keep_all_schedule_of_a_133_node_chain_fits_in_a_few_hundred_bytes():
    """Forward chain 0..65, loss 66, backward 67..132 reading the gradient and forward output.

    Every node once, outputs freed after their last reader: 266 instructions in 377 bytes.
    """
    forward = 66
    deps: list[list[int]] = [[], *([i - 1] for i in range(1, 67))]
    for j in range(forward - 1, -1, -1):
        deps.append([len(deps) - 1, j])
    last_use = [max([k for k, d in enumerate(deps) if i in d], default=i) for i in range(len(deps))]
    stages: tuple[tuple[Instruction, ...], ...] = tuple(
        (C(t), *(F(i) for i in sorted({*deps[t], t}) if last_use[i] == t)) for t in range(len(deps))
    )
    blob = encode_binary(Schedule("chain-133", 133, Timing.OVERLAP, stages))
    assert len(blob) == 377
    assert decode_binary(blob, "chain-133").stages == stages


def test_negative_node_cannot_be_encoded():
    with pytest.raises(ScheduleError, match="node id -1 cannot be encoded"):
        encode_binary(Schedule("", 1, Timing.OVERLAP, ((C(0), F(-1)),)))


VALID = encode_binary(Schedule("", 2, Timing.OVERLAP, ((C(0),), (C(1), F(0)))))


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"PEOT" + VALID[4:], "does not start with b'POET'"),
        (VALID[:4] + b"\x02" + VALID[5:], "version 2 is not supported"),
        (VALID[:5] + b"\x05" + VALID[6:], "unknown timing code 5"),
        (VALID[:-1], "truncated"),
        (VALID[:3], "truncated"),
        (VALID + b"\x00", "1 unexpected bytes after the last stage"),
        (b"POET\x01\x01\x01\x01" + bytes([0 << 3 | 2]), "stage 0 puts Compute\\(0\\) 2 places from the end of 0"),
        (b"POET\x01\x01" + b"\xff" * 11, "longer than 10 bytes"),
    ],
)
def test_malformed_binary_is_refused(blob, message):
    with pytest.raises(UserInputError, match=f"^binary schedule: .*{message}"):
        decode_binary(blob)


GOOD = {
    "format": "poetsim-schedule",
    "version": 1,
    "graph": "g",
    "num_nodes": 2,
    "timing": "overlap",
    "stages": [[["compute", 0]], [["compute", 1], ["free", 0]]],
    "meta": {},
}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", r"not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ("[1, 2]", r'expected a JSON object with "format": "poetsim-schedule"'),
        (json.dumps({**GOOD, "format": "checkmate"}), r"format: expected 'poetsim-schedule', found 'checkmate'"),
        (json.dumps({**GOOD, "version": 2}), r"version: 2 is not supported"),
        (json.dumps({**GOOD, "extra": 1}), r"unknown field 'extra'"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "timing"}), r"timing: missing"),
        (json.dumps({**GOOD, "graph": 3}), r"graph: expected the graph's name as a string"),
        (json.dumps({**GOOD, "num_nodes": -1}), r"num_nodes: expected a non-negative integer, found -1"),
        (json.dumps({**GOOD, "num_nodes": True}), r"num_nodes: expected a non-negative integer, found True"),
        (json.dumps({**GOOD, "timing": "fast"}), r"timing: 'fast' is not one of compute-only, overlap"),
        (json.dumps({**GOOD, "stages": {}}), r"stages: expected a list of stages"),
        (json.dumps({**GOOD, "stages": [[["compute", 0]], "x"]}), r"stages\[1\]: expected a list of instructions"),
        (
            json.dumps({**GOOD, "stages": [[["compute", 0]], [["swap", 1]]]}),
            r"stages\[1\]\[0\]: unknown instruction 'swap' \(expected one of compute, page_out, page_in, free\)",
        ),
        (json.dumps({**GOOD, "stages": [[[["compute"], 0]]]}), r"stages\[0\]\[0\]: unknown instruction \['compute'\]"),
        (
            json.dumps({**GOOD, "stages": [[["compute", 0]], [["compute", 1], ["free"]]]}),
            r"stages\[1\]\[1\]: expected \[kind, node\], found \['free'\]",
        ),
        (
            json.dumps({**GOOD, "stages": [[["compute", 0.5]]]}),
            r"stages\[0\]\[0\]: node id must be a non-negative integer, found 0.5",
        ),
        (json.dumps({**GOOD, "meta": {"gap": 0.1}}), r"meta.gap: expected a string, found 0.1"),
        (json.dumps({**GOOD, "meta": []}), r"meta: expected an object of strings"),
    ],
)
def test_bad_json_file_is_refused_naming_the_file(tmp_path, text, problem):
    """Every problem is one line that starts with the file's path."""
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UserInputError) as caught:
        load_json(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert caught.match(problem)


def test_missing_or_non_utf8_file_is_refused_naming_the_file(tmp_path):
    with pytest.raises(UserInputError, match=r"missing.json: cannot read: No such file"):
        load_json(tmp_path / "missing.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserInputError, match=r"binary.json: not JSON: the file is not UTF-8 text"):
        load_json(binary)


def test_good_json_loads_with_kinds_and_meta(tmp_path):
    path = tmp_path / "good.json"
    path.write_text(json.dumps({**GOOD, "meta": {"solver": "highs"}}))
    schedule = load_json(path)
    assert typed(schedule) == ("g", 2, Timing.OVERLAP, (((Compute, 0),), ((Compute, 1), (Free, 0))), (("solver", "highs"),))


def test_node_names_round_trip_through_json_and_are_optional(tmp_path):
    """`nodes` names each id; a file without it (an older one) still loads, with no names."""
    named = Schedule("g", 2, Timing.OVERLAP, ((C(0),), (C(1), F(0))), node_names=("input", "fc"))
    save_json(named, tmp_path / "named.json")
    assert json.loads((tmp_path / "named.json").read_text())["nodes"] == ["input", "fc"]
    assert load_schedule(tmp_path / "named.json") == named
    plain = Schedule("g", 2, Timing.OVERLAP, ((C(0),), (C(1), F(0))))
    save_json(plain, tmp_path / "plain.json")
    assert "nodes" not in json.loads((tmp_path / "plain.json").read_text())
    assert load_json(tmp_path / "plain.json").node_names == ()


def test_node_names_must_name_every_node(tmp_path):
    data = schedule_to_json(Schedule("g", 2, Timing.OVERLAP, ((C(0),), (C(1),))))
    data["nodes"] = ["only one"]
    with pytest.raises(UserInputError, match="nodes: 1 names for 2 nodes"):
        schedule_from_json(data, "s.json")


def test_load_schedule_reads_the_binary_encoding(tmp_path):
    schedule = Schedule("g", 2, Timing.COMPUTE_ONLY, ((C(0),), (PO(0), C(1), F(0))))
    (tmp_path / "s.bin").write_bytes(encode_binary(schedule))
    assert typed(load_schedule(tmp_path / "s.bin"))[1:4] == typed(schedule)[1:4]


@pytest.mark.parametrize(
    "head, message", [(b"XOET\x01", "it starts with b'XOET', not b'POET'"), (b"", "it is empty, not b'POET'")]
)
def test_a_bin_file_without_the_magic_is_named_a_bad_binary_schedule(tmp_path, head, message):
    (tmp_path / "s.bin").write_bytes(head)
    with pytest.raises(UserInputError, match=f"s.bin: not a binary schedule: {message}"):
        load_schedule(tmp_path / "s.bin")
