"""Where an imported model comes from: a factory, the batch's shapes and dtypes, and a seed.

A graph file made by `poetsim import-torch` records these in its meta (`torch.factory`,
`torch.inputs`, `torch.seed`, `torch.input_high`), so that `poetsim execute graph.json` can build
the same model with the same random weights and batch again, capture it, and check that the
capture still gives the graph in the file before running anything.
"""

import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from poetsim.errors import UserInputError, first_line
from poetsim.graphs.io import read_graph_file

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "bool")
#: The share of True in a random bool input: a padding mask that masks a quarter of the tokens.
BOOL_TRUE = 0.25


@dataclass(frozen=True)
class ModelSource:
    """A model factory (`package.module:function`, called without arguments) and its batch."""

    factory: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    seed: int = 0
    input_high: int = 2

    def build(self):
        """The module (random weights from `seed`) and the example inputs (random, from `seed`)."""
        import torch

        make = resolve_factory(self.factory)
        torch.manual_seed(self.seed)
        try:
            module = make()
        except Exception as error:  # noqa: BLE001 - the user's factory failed: say so in one line
            raise UserInputError(f"{self.factory}: the factory raised {type(error).__name__}: {error}") from None
        if not isinstance(module, torch.nn.Module):
            raise UserInputError(f"{self.factory}: the factory returned {type(module).__name__}, not a torch.nn.Module")
        return module, self.draw(torch.Generator().manual_seed(self.seed))

    def draw(self, generator) -> tuple:
        """One random batch of the inputs from `generator`: normal floats, integers below input_high, bools True for BOOL_TRUE."""
        import torch

        inputs = []
        for shape, dtype_name in zip(self.input_shapes, self.input_dtypes):
            dtype = getattr(torch, dtype_name)
            if dtype.is_floating_point:
                inputs.append(torch.randn(shape, generator=generator, dtype=dtype))
            elif dtype is torch.bool:
                inputs.append(torch.rand(shape, generator=generator) < BOOL_TRUE)
            else:
                inputs.append(torch.randint(0, self.input_high, shape, generator=generator, dtype=dtype))
        return tuple(inputs)

    def meta(self) -> dict[str, str]:
        """The graph-file meta that records this source."""
        return {
            "torch.factory": self.factory,
            "torch.inputs": json.dumps([[list(s), d] for s, d in zip(self.input_shapes, self.input_dtypes)]),
            "torch.seed": str(self.seed),
            "torch.input_high": str(self.input_high),
        }

    @classmethod
    def from_meta(cls, meta: dict[str, str], where: str) -> "ModelSource":
        """The source a graph file records; UserInputError if it was not made by import-torch."""
        if "torch.factory" not in meta:
            raise UserInputError(
                f"{where}: not a graph made by `poetsim import-torch` (its meta names no torch.factory), "
                "so there is no model to run"
            )
        try:
            inputs = json.loads(meta["torch.inputs"])
            return cls(
                meta["torch.factory"],
                tuple(tuple(int(d) for d in s) for s, _ in inputs),
                tuple(str(d) for _, d in inputs),
                int(meta.get("torch.seed", "0")),
                int(meta.get("torch.input_high", "2")),
            )
        except (KeyError, ValueError, TypeError) as error:
            raise UserInputError(f"{where}: meta.torch.inputs: cannot read the recorded inputs ({error})") from None


def parse_inputs(shapes: list[str], dtypes: list[str] | None) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
    """`--input-shape 8,3,32,32` (one per input) and `--input-dtype` (one, or one per input)."""
    if not shapes:
        raise UserInputError("--input-shape: give the batch's shape, for example --input-shape 8,3,32,32")
    parsed = []
    for text in shapes:
        try:
            shape = tuple(int(part) for part in text.replace("x", ",").split(","))
        except ValueError:
            raise UserInputError(f"--input-shape: '{text}' is not a shape such as 8,3,32,32") from None
        if not shape or any(d < 1 for d in shape):
            raise UserInputError(f"--input-shape: '{text}' must list positive sizes")
        parsed.append(shape)
    dtypes = list(dtypes or ["float32"])
    if len(dtypes) == 1:
        dtypes *= len(parsed)
    if len(dtypes) != len(parsed):
        raise UserInputError(f"--input-dtype: give one dtype, or one per --input-shape ({len(parsed)})")
    for dtype in dtypes:
        if dtype not in _DTYPES:
            raise UserInputError(f"--input-dtype: unknown dtype '{dtype}' (use {', '.join(_DTYPES)})")
    return tuple(parsed), tuple(dtypes)


def resolve_factory(spec: str):
    """The function named `package.module:function`; UserInputError naming what is missing.

    The module is looked for in the current folder first, then on the Python path, as `python -m`
    looks for it. An error while importing it (a syntax error, an exception its top level raised)
    is the user's code failing: one line naming the module and where.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UserInputError(f"'{spec}': name the model factory as PACKAGE.MODULE:FUNCTION")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UserInputError(
            f"{spec}: cannot import {module_name} ({error}); run from the folder that holds it, or add that folder to PYTHONPATH"
        ) from None
    except SyntaxError as error:
        raise UserInputError(f"{spec}: {error.filename}, line {error.lineno}: {error.msg}") from None
    except Exception as error:  # noqa: BLE001 - the user's module failed as it was imported: say so in one line
        raise UserInputError(f"{spec}: importing {module_name} raised {type(error).__name__}: {first_line(error)}") from None
    if not hasattr(module, attribute):
        raise UserInputError(f"{spec}: {module_name} has no function '{attribute}'")
    factory = getattr(module, attribute)
    if not callable(factory):
        raise UserInputError(
            f"{spec}: {module_name}.{attribute} is a {type(factory).__name__}, not a function that returns the model"
        )
    return factory


def capture_graph_file(path: Path, graph=None):
    """Build and capture the model a graph file records; check the capture gives that graph.

    Returns the Capture. UserInputError when the file was not made by import-torch, or when the
    model no longer captures to the same nodes (the factory's code changed since the import).
    """
    from poetsim.pytorch.capturing import capture

    graph = graph if graph is not None else read_graph_file(Path(path))
    meta = dict(graph.meta)
    source = ModelSource.from_meta(meta, str(path))
    module, inputs = source.build()
    captured = capture(module, inputs, name=graph.name, meta=source.meta())
    for mine, theirs in zip(captured.graph.nodes, graph.nodes):
        captured_now = (mine.name, mine.deps, mine.output_bytes, mine.backward)
        if captured_now != (theirs.name, theirs.deps, theirs.output_bytes, theirs.backward):
            raise UserInputError(
                f"{path}: node {theirs.id} '{theirs.name}' no longer matches what {source.factory} "
                f"captures ('{mine.name}', {mine.output_bytes} bytes): import the model again"
            )
    if len(captured.graph) != len(graph):
        raise UserInputError(
            f"{path}: {source.factory} now captures {len(captured.graph)} nodes, the file has "
            f"{len(graph)}: import the model again"
        )
    return captured
