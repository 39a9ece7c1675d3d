"""The byte formats between poetsim and its device runtime, as `runtime/poet.h` defines them.

Three documents cross the boundary, all little-endian uint32 words:

- the **image** the emulator loads at the start of external memory: a header naming six regions
  (offset and size each) of which the host fills four (the program, the schedule exactly as
  `poetsim.schedule.formats.encode_binary` writes it, the weights, the batch) and the runtime
  writes two (the weight gradients, laid out as the weights, and the storage activations page
  to);
- the **program**: a header and one fixed 25-word record per node (kind, output bytes, operand
  ids, dimensions, where its weights start, flags);
- the **result** the runtime writes back (`result.bin`): status and error details, the arena's
  figures, traffic and compute counts, timer ticks in total and per node, and the loss values.

A test compiles `poet.h` on the host and holds these sizes to the C compiler's.
"""

import struct
from dataclasses import dataclass
from enum import IntEnum

from poetsim.errors import InternalError

MAX_NODES = 128
MAX_OPERANDS = 8
MAX_DIMS = 11
MAX_LOSS_ROWS = 64
NO_PARAMS = 0xFFFFFFFF
FLAG_BIAS = 1

IMAGE_MAGIC = 0x474D4950  # "PIMG"
PROGRAM_MAGIC = 0x47525050  # "PPRG"
RESULT_MAGIC = 0x53455250  # "PRES"
#: Each document's format version (poet.h: POET_IMAGE_VERSION, POET_PROGRAM_VERSION,
#: POET_RESULT_VERSION).
IMAGE_VERSION = 1
PROGRAM_VERSION = 2
RESULT_VERSION = 1

#: The regions of the image, in header order.
REGIONS = ("program", "schedule", "weights", "batch", "grads", "storage")
IMAGE_HEADER_BYTES = 4 * (3 + 2 * len(REGIONS))
NODE_WORDS = 4 + MAX_OPERANDS + MAX_DIMS + 2


class Kind(IntEnum):
    """The runtime's operations (`enum poet_kind`)."""

    INPUT = 1
    LINEAR = 2
    CONV = 3
    RELU = 4
    ADD = 5
    MAXPOOL = 6
    LOSS = 7
    LINEAR_GRAD = 8
    CONV_GRAD = 9
    RELU_GRAD = 10
    ADD_GRAD = 11
    MAXPOOL_GRAD = 12
    LOSS_GRAD = 13
    AVGPOOL = 14
    AVGPOOL_GRAD = 15
    BATCHNORM = 16
    BATCHNORM_GRAD = 17
    RELU6 = 18
    RELU6_GRAD = 19


#: Each status code of the runtime (`enum poet_status`) in words.
STATUS_TEXT = {
    0: "ok",
    1: "the image is malformed (a region outside external memory, overlapping another, or a bad header)",
    2: "the program is malformed",
    3: f"the graph has more nodes than the runtime's {MAX_NODES}",
    10: "the schedule does not start with b'POET'",
    11: "the schedule's format version is not 1",
    12: "the schedule's timing code is unknown",
    13: "the schedule is truncated",
    14: "a number in the schedule is longer than 10 bytes or above 64 bits",
    15: "the schedule is for a graph with another number of nodes",
    16: "the schedule does not have one stage per node",
    17: "an instruction names a node outside the graph",
    18: "a stage puts its implicit compute past its instructions",
    19: "bytes follow the schedule's last stage",
    30: "out of order: page-outs, page-ins, then computes and frees",
    31: "the node is not in RAM",
    32: "an input of the compute is not in RAM",
    33: "computed before its stage or not in ascending order",
    34: "the node is already in RAM",
    35: "paged in without an earlier page-out",
    36: "paged out or in twice in one stage",
    37: "the stage does not end with its own node's compute",
    40: "the arena is full: the allocation does not fit the RAM budget",
    41: "a class label lies outside the logits",
    42: "a pooling index lies outside its plane",
    50: "the core took a fault",
}

#: Which check a malformed node failed (`enum poet_program_check`).
PROGRAM_CHECK_TEXT = {
    1: "unknown operation",
    2: "wrong number of operands",
    3: "an operand that is not an earlier node",
    4: "output size does not match the shape",
    5: "an operand smaller than what is read",
    6: "weights outside the weights region",
    7: "dimensions that do not fit together",
    8: "a tensor too large",
    9: "the batch differs from the input node's output",
    10: "an operand of the wrong operation",
    11: "the program's header",
}

# The result's words before the loss values and the per-node figures (poet_result in poet.h).
_RESULT_FIELDS = (  # noqa: SIM905 - the field names as one run of words, in poet_result's order
    "magic version status err_stage err_index err_node err_a err_b arena_bytes peak_bytes high_water_bytes "
    "live_end_bytes compactions moved_bytes page_out_bytes page_outs page_in_bytes page_ins computes recomputations "
    "schedule_bytes num_nodes timing stack_bytes static_bytes step_ticks_lo step_ticks_hi compute_ticks_lo "
    "compute_ticks_hi transfer_ticks_lo transfer_ticks_hi compact_ticks_lo compact_ticks_hi loss_rows"
).split()
_NODE_STATS = ("first_ticks", "recompute_ticks", "recomputes", "page_out_ticks", "page_in_ticks")
RESULT_BYTES = 4 * (len(_RESULT_FIELDS) + MAX_LOSS_ROWS + MAX_NODES * len(_NODE_STATS))


@dataclass(frozen=True)
class NodeRecord:
    """One node of the program: what the runtime runs for it and on which operands."""

    kind: Kind
    output_bytes: int
    grads: tuple[int, ...]
    inputs: tuple[int, ...]
    dims: tuple[int, ...]
    param_offset: int = NO_PARAMS
    bias: bool = False

    def pack(self) -> bytes:
        """The node's NODE_WORDS-word record."""
        operands = self.grads + self.inputs
        if len(operands) > MAX_OPERANDS or len(self.dims) > MAX_DIMS:
            raise InternalError(f"a {self.kind.name} node has {len(operands)} operands and {len(self.dims)} dims")
        words = (
            [int(self.kind), self.output_bytes, len(self.grads), len(self.inputs)]
            + list(operands)
            + [0] * (MAX_OPERANDS - len(operands))
            + list(self.dims)
            + [0] * (MAX_DIMS - len(self.dims))
            + [self.param_offset, FLAG_BIAS if self.bias else 0]
        )
        return struct.pack(f"<{NODE_WORDS}I", *words)


def pack_program(records: tuple[NodeRecord, ...]) -> bytes:
    """The program: its header, then every node's record."""
    header = struct.pack("<4I", PROGRAM_MAGIC, PROGRAM_VERSION, len(records), NODE_WORDS)
    return header + b"".join(record.pack() for record in records)


def _align(value: int, to: int = 8) -> int:
    return (value + to - 1) // to * to


def pack_image(program: bytes, schedule: bytes, weights: bytes, batch: bytes, storage_bytes: int) -> bytes:
    """The image to load: its header and the four regions the host fills.

    The header places the gradients and the storage after them, where the runtime writes (they
    are not loaded).
    """
    regions: dict[str, tuple[int, int]] = {}
    at = _align(IMAGE_HEADER_BYTES)
    for name, data in (("program", program), ("schedule", schedule), ("weights", weights), ("batch", batch)):
        regions[name] = (at, len(data))
        at = _align(at + len(data))
    image_bytes = at
    regions["grads"] = (at, len(weights))
    at = _align(at + len(weights))
    regions["storage"] = (at, storage_bytes)
    words = [IMAGE_MAGIC, IMAGE_VERSION, image_bytes]
    for name in REGIONS:
        words += list(regions[name])
    image = bytearray(image_bytes)
    image[:IMAGE_HEADER_BYTES] = struct.pack(f"<{len(words)}I", *words)
    for name, data in (("program", program), ("schedule", schedule), ("weights", weights), ("batch", batch)):
        offset = regions[name][0]
        image[offset : offset + len(data)] = data
    return bytes(image)


@dataclass(frozen=True)
class NodeTicks:
    """Timer ticks the runtime measured for one node."""

    first: int
    recompute: int
    recomputes: int
    page_out: int
    page_in: int


@dataclass(frozen=True)
class RawResult:
    """result.bin as numbers: the fields of `poet_result`, loss values and per-node ticks."""

    fields: dict[str, int]
    losses: tuple[float, ...]
    nodes: tuple[NodeTicks, ...]

    def ticks(self, name: str) -> int:
        """A 64-bit tick total (step, compute, transfer, compact)."""
        return self.fields[f"{name}_ticks_lo"] | self.fields[f"{name}_ticks_hi"] << 32


def parse_result(data: bytes) -> RawResult:
    """Read result.bin; InternalError if its size or magic is not this poetsim's."""
    if len(data) != RESULT_BYTES:
        raise InternalError(f"result.bin has {len(data)} bytes, this poetsim expects {RESULT_BYTES} (runtime and host differ)")
    words = struct.unpack(f"<{RESULT_BYTES // 4}I", data)
    fields = dict(zip(_RESULT_FIELDS, words))
    if fields["magic"] != RESULT_MAGIC or fields["version"] != RESULT_VERSION:
        raise InternalError("result.bin does not start with the runtime's magic and version")
    at = len(_RESULT_FIELDS)
    rows = min(fields["loss_rows"], MAX_LOSS_ROWS)
    losses = struct.unpack(f"<{rows}f", struct.pack(f"<{rows}I", *words[at : at + rows]))
    at += MAX_LOSS_ROWS
    per = len(_NODE_STATS)
    nodes = tuple(NodeTicks(*words[at + per * i : at + per * (i + 1)]) for i in range(fields["num_nodes"]))
    return RawResult(fields, tuple(losses), nodes)
