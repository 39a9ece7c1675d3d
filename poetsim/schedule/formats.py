"""Schedule files: JSON for people and tools, a compact binary encoding for the device.

JSON (`save_json`, `load_json`) keeps everything a Schedule holds::

    {"format": "poetsim-schedule", "version": 1, "graph": "resnet18", "num_nodes": 133,
     "timing": "overlap", "stages": [[["compute", 0]], [["compute", 1], ["free", 0]], ...],
     "meta": {"solver": "highs"}, "nodes": ["input", "conv1", "bn1", ...]}

Instructions are `[kind, node]` with kind one of compute, page_out, page_in, free. `nodes`
(optional, added in a backward-compatible way: older files lack it and still load) names each
node id, so that a person can read the stages and the checker can refuse a schedule of another
graph (`checker.check_made_for`); `poetsim solve --out` writes it. A file that is not such a document raises
UserInputError naming the file and the field path, in one line. `load_schedule` reads either
format, telling them apart by the binary magic.

Binary (`encode_binary`, `decode_binary`) is what a microcontroller would receive, so it keeps
only what the device executes (no graph name, no meta). Integers are unsigned LEB128 varints
(7 bits a byte, low group first, high bit set on every byte but the last)::

    b"POET"                 magic
    1 byte                  format version (1)
    1 byte                  timing: 0 compute-only, 1 overlap
    varint                  num_nodes
    varint                  number of stages
    per stage t:
      varint                (n << 3) | after
      n varints             (node << 2) | opcode, opcode 0 compute, 1 page-out, 2 page-in, 3 free

Every stage t computes node t, so that instruction is usually not listed: `after` (0 to 6)
says how many of the n listed instructions follow it, and the decoder inserts Compute(t) at
position n - after. `after` = 7 means Compute(t) is listed like any other instruction (a stage
with more than 6 instructions after it, or a malformed stage without it). So every schedule
round-trips exactly, and a stage of up to 15 listed instructions spends one header byte. The
every-node-once schedule of a 133-node forward-loss-backward chain is 377 bytes.
"""

import json
from dataclasses import replace
from pathlib import Path

from poetsim.errors import ScheduleError, UserInputError
from poetsim.schedule.model import Compute, Free, Instruction, PageIn, PageOut, Schedule, Timing

FORMAT = "poetsim-schedule"
VERSION = 1

_KINDS: dict[str, type[Instruction]] = {"compute": Compute, "page_out": PageOut, "page_in": PageIn, "free": Free}
_KIND_NAMES = {cls: name for name, cls in _KINDS.items()}
_FIELDS = ("format", "version", "graph", "num_nodes", "timing", "stages", "meta", "nodes")

MAGIC = b"POET"
#: The files a saved schedule comes in, as messages name them.
SCHEDULE_FILES = "schedule.json or schedule.bin"
BINARY_VERSION = 1
_TIMING_CODES = {Timing.COMPUTE_ONLY: 0, Timing.OVERLAP: 1}
_OPCODES: dict[type[Instruction], int] = {Compute: 0, PageOut: 1, PageIn: 2, Free: 3}
_OPCODE_KINDS = {code: cls for cls, code in _OPCODES.items()}
_TIMINGS_BY_CODE = {code: timing for timing, code in _TIMING_CODES.items()}
# The header's `after` value meaning "Compute(t) is listed, not implicit".
_LISTED = 7


def schedule_to_json(schedule: Schedule) -> dict:
    """The JSON document of a schedule, as plain dicts and lists."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "graph": schedule.graph_name,
        "num_nodes": schedule.num_nodes,
        "timing": Timing(schedule.timing).value,
        "stages": [[[_KIND_NAMES[type(ins)], ins.node] for ins in stage] for stage in schedule.stages],
        "meta": dict(schedule.meta),
        **({"nodes": list(schedule.node_names)} if schedule.node_names else {}),
    }


def schedule_from_json(data, source: str = "schedule") -> Schedule:
    """Build a Schedule from a parsed JSON document; UserInputError names `source` and the field.

    Only the shape is checked here (kinds, integer node ids, known timing); whether the
    instructions make sense for a graph is the checker's question.
    """
    if not isinstance(data, dict):
        raise UserInputError(f'{source}: expected a JSON object with "format": "{FORMAT}"')
    if data.get("format") != FORMAT:
        raise UserInputError(f"{source}: format: expected '{FORMAT}', found {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise UserInputError(
            f"{source}: version: {data.get('version')!r} is not supported (this poetsim reads version {VERSION})"
        )
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise UserInputError(f"{source}: unknown field '{unknown[0]}' (fields are {', '.join(_FIELDS)})")
    for name in ("graph", "num_nodes", "timing", "stages"):
        if name not in data:
            raise UserInputError(f"{source}: {name}: missing")
    if not isinstance(data["graph"], str):
        raise UserInputError(f"{source}: graph: expected the graph's name as a string")
    if not _is_count(data["num_nodes"]):
        raise UserInputError(f"{source}: num_nodes: expected a non-negative integer, found {data['num_nodes']!r}")
    try:
        timing = Timing(data["timing"])
    except ValueError:
        choices = ", ".join(t.value for t in Timing)
        raise UserInputError(f"{source}: timing: {data['timing']!r} is not one of {choices}") from None
    return Schedule(
        graph_name=data["graph"],
        num_nodes=data["num_nodes"],
        timing=timing,
        stages=_stages_from_json(data["stages"], source),
        meta=_meta_from_json(data.get("meta", {}), source),
        node_names=_names_from_json(data.get("nodes", []), data["num_nodes"], source),
    )


def with_node_names(schedule: Schedule, graph) -> Schedule:
    """The schedule with the names of `graph`'s nodes, for its JSON file (see the module doc)."""
    return replace(schedule, node_names=tuple(node.name for node in graph.nodes))


def load_schedule(path: str | Path) -> Schedule:
    """A schedule file in either format: binary if it starts with b'POET', JSON otherwise (a .bin must be binary)."""
    try:
        head = Path(path).read_bytes()[: len(MAGIC)]
    except OSError as error:
        raise UserInputError(f"{path}: cannot read: {error.strerror or error}") from None
    if head == MAGIC:
        try:
            return decode_binary(Path(path).read_bytes(), graph_name=Path(path).stem)
        except UserInputError as error:
            raise UserInputError(f"{path}: {error}") from None
    if Path(path).suffix == ".bin":
        found = f"starts with {head!r}" if head else "is empty"
        raise UserInputError(f"{path}: not a binary schedule: it {found}, not {MAGIC!r}")
    return load_json(path)


def save_json(schedule: Schedule, path: str | Path) -> None:
    """Write a schedule as JSON, one stage a line so that diffs and reviews stay readable."""
    data = schedule_to_json(schedule)
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in data.items() if key != "stages"]
    stages = ",\n".join(f"    {json.dumps(stage)}" for stage in data["stages"])
    lines.append(f'  "stages": [\n{stages}\n  ]' if stages else '  "stages": []')
    try:
        Path(path).write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    except OSError as error:
        raise UserInputError(f"{path}: cannot write: {error.strerror or error}") from None


def load_json(path: str | Path) -> Schedule:
    """Read a schedule written by `save_json`; UserInputError names the file and the problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UserInputError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise UserInputError(f"{path}: not JSON: the file is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserInputError(f"{path}: not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    return schedule_from_json(data, source=str(path))


def encode_binary(schedule: Schedule) -> bytes:
    """The compact device encoding of a schedule (see the module docstring)."""
    out = bytearray(MAGIC)
    out.append(BINARY_VERSION)
    out.append(_TIMING_CODES[Timing(schedule.timing)])
    _put_varint(out, schedule.num_nodes)
    _put_varint(out, len(schedule.stages))
    for t, stage in enumerate(schedule.stages):
        listed, after = _drop_implicit_compute(t, stage)
        _put_varint(out, len(listed) << 3 | after)
        for ins in listed:
            if ins.node < 0:
                raise ScheduleError(f"stage {t}: node id {ins.node} cannot be encoded (ids are non-negative)")
            _put_varint(out, ins.node << 2 | _OPCODES[type(ins)])
    return bytes(out)


def decode_binary(blob: bytes, graph_name: str = "") -> Schedule:
    """The Schedule a binary encoding holds, named `graph_name`; UserInputError if malformed."""
    reader = _Reader(blob)
    if reader.take(len(MAGIC)) != MAGIC:
        raise UserInputError("binary schedule: does not start with b'POET'")
    version = reader.byte()
    if version != BINARY_VERSION:
        raise UserInputError(f"binary schedule: version {version} is not supported (this poetsim reads version {BINARY_VERSION})")
    timing_code = reader.byte()
    if timing_code not in _TIMINGS_BY_CODE:
        raise UserInputError(f"binary schedule: unknown timing code {timing_code}")
    num_nodes = reader.varint()
    stages = []
    for t in range(reader.varint()):
        header = reader.varint()
        listed = [_decode_instruction(reader.varint()) for _ in range(header >> 3)]
        after = header & _LISTED
        if after != _LISTED:
            if after > len(listed):
                raise UserInputError(
                    f"binary schedule: stage {t} puts Compute({t}) {after} places from the end of {len(listed)} instructions"
                )
            listed.insert(len(listed) - after, Compute(t))
        stages.append(tuple(listed))
    if not reader.at_end():
        raise UserInputError(f"binary schedule: {reader.remaining()} unexpected bytes after the last stage")
    return Schedule(graph_name=graph_name, num_nodes=num_nodes, timing=_TIMINGS_BY_CODE[timing_code], stages=tuple(stages))


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _stages_from_json(stages, source: str) -> tuple[tuple[Instruction, ...], ...]:
    if not isinstance(stages, list):
        raise UserInputError(f"{source}: stages: expected a list of stages")
    result = []
    for t, stage in enumerate(stages):
        if not isinstance(stage, list):
            raise UserInputError(f"{source}: stages[{t}]: expected a list of instructions")
        result.append(tuple(_instruction_from_json(item, f"{source}: stages[{t}][{n}]") for n, item in enumerate(stage)))
    return tuple(result)


def _instruction_from_json(item, where: str) -> Instruction:
    if not (isinstance(item, list) and len(item) == 2):
        raise UserInputError(f"{where}: expected [kind, node], found {item!r}")
    kind, node = item
    if not isinstance(kind, str) or kind not in _KINDS:
        raise UserInputError(f"{where}: unknown instruction {kind!r} (expected one of {', '.join(_KINDS)})")
    if not _is_count(node):
        raise UserInputError(f"{where}: node id must be a non-negative integer, found {node!r}")
    return _KINDS[kind](node)


def _names_from_json(names, num_nodes: int, source: str) -> tuple[str, ...]:
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise UserInputError(f"{source}: nodes: expected a list of node names (strings)")
    if names and len(names) != num_nodes:
        raise UserInputError(f"{source}: nodes: {len(names)} names for {num_nodes} nodes")
    return tuple(names)


def _meta_from_json(meta, source: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(meta, dict):
        raise UserInputError(f"{source}: meta: expected an object of strings")
    for key, value in meta.items():
        if not isinstance(value, str):
            raise UserInputError(f"{source}: meta.{key}: expected a string, found {value!r}")
    return tuple(meta.items())


def _drop_implicit_compute(t: int, stage) -> tuple[list[Instruction], int]:
    """The instructions to list for stage t and the header's `after` field (see module doc)."""
    stage = list(stage)
    for index, ins in enumerate(stage):
        # Compare kinds explicitly: NamedTuples with equal fields compare equal across kinds.
        if type(ins) is Compute and ins.node == t:
            after = len(stage) - index - 1
            if after < _LISTED:
                return stage[:index] + stage[index + 1 :], after
            break
    return stage, _LISTED


def _decode_instruction(code: int) -> Instruction:
    return _OPCODE_KINDS[code & 3](code >> 2)


def _put_varint(out: bytearray, value: int) -> None:
    """Append `value` as an unsigned LEB128 varint."""
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


class _Reader:
    """A cursor over a binary schedule that turns running out of bytes into UserInputError."""

    _MAX_VARINT_BYTES = 10  # 64 bits; anything longer is corrupt, not a real schedule

    def __init__(self, blob: bytes):
        self._blob = bytes(blob)
        self._at = 0

    def take(self, count: int) -> bytes:
        if self._at + count > len(self._blob):
            raise UserInputError(f"binary schedule: truncated at byte {len(self._blob)}")
        chunk = self._blob[self._at : self._at + count]
        self._at += count
        return chunk

    def byte(self) -> int:
        return self.take(1)[0]

    def varint(self) -> int:
        value = 0
        for shift in range(0, 7 * self._MAX_VARINT_BYTES, 7):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
        raise UserInputError(f"binary schedule: a number at byte {self._at} is longer than {self._MAX_VARINT_BYTES} bytes")

    def at_end(self) -> bool:
        return self._at == len(self._blob)

    def remaining(self) -> int:
        return len(self._blob) - self._at
