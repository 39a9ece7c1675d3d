"""Reading the files users give: regular files only, under a size cap, every failure one line.

Scenario, platform, graph and results files come from users and often from downloads, so
reading one must never hang or exhaust memory and never end in a traceback:

- only a regular file is read: a device (`/dev/zero`), a pipe or a folder is refused before a
  byte is read (a pipe is opened without blocking, then refused);
- a file larger than its kind's cap is refused from its size, and reading stops at the cap
  should the file grow meanwhile;
- text must be UTF-8 (a leading byte-order mark is allowed);
- JSON and YAML are parsed with their nesting bounded (a document nested 100,000 deep is
  refused, not a RecursionError); JSON's NaN and Infinity are refused; YAML aliases are
  allowed, but a document whose aliases expand to more than `MAX_YAML_NODES` values is refused
  (the "billion laughs"), since validating it would never end.

Every error is a `UserInputError` whose message starts with the path.
"""

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poetsim.errors import UserInputError

if TYPE_CHECKING:
    import yaml

#: Size caps per kind of file, in bytes: far above any real file, far below harm.
MAX_SCENARIO_BYTES = 1 << 20
MAX_PLATFORM_BYTES = 1 << 20
MAX_GRAPH_BYTES = 64 << 20
MAX_RESULTS_BYTES = 1 << 30
#: A YAML document may hold at most this many values once its aliases are expanded.
MAX_YAML_NODES = 100_000


def read_bytes(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The content of a regular file of at most `max_bytes`; UserInputError otherwise.

    `what` names the kind of file in messages ("graph file").
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UserInputError(f"{path}: is a folder; give a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise UserInputError(f"{path}: not a regular file (a device, pipe or socket); give a {what}")
        if info.st_size > max_bytes:
            raise UserInputError(f"{path}: {info.st_size:,} bytes is more than a {what} may have ({max_bytes:,})")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise UserInputError(f"{path}: grew past the {max_bytes:,} bytes a {what} may have while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str, max_bytes: int) -> str:
    """A regular file's content as UTF-8 text (see `read_bytes`); UserInputError otherwise."""
    data = read_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save the {what} as UTF-8"
        ) from None


def parse_json(text: str, where: str | Path) -> Any:
    """A JSON document; UserInputError naming `where` for bad syntax, NaN, Infinity or deep nesting."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"{where}: not a JSON file ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise UserInputError(f"{where}: not a JSON file (nested too deeply)") from None
    except ValueError as exc:  # NaN or Infinity, or an integer of thousands of digits
        raise UserInputError(f"{where}: not a JSON file ({_one_line(exc)})") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_yaml(text: str, where: str | Path) -> Any:
    """A YAML document (safe types only); UserInputError for bad syntax, deep nesting or alias bombs."""
    import yaml  # on first use: the commands that read no YAML start without it

    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a control byte: a binary file)
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        character = f"0x{exc.character:02x}" if isinstance(exc.character, int) else repr(exc.character)
        raise UserInputError(
            f"{where}: not valid YAML (character {character}, which YAML does not allow, at line {line}, column {column})"
        ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node)
        if size > MAX_YAML_NODES:
            raise UserInputError(
                f"{where}: its aliases expand to more than {MAX_YAML_NODES:,} values; write the values out instead"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise UserInputError(f"{where}: not valid YAML ({_yaml_reason(exc)})") from None
    except RecursionError:
        raise UserInputError(f"{where}: not valid YAML (nested too deeply)") from None
    finally:
        loader.dispose()


def _expanded_size(root: "yaml.Node") -> int:
    """How many values the document holds once every alias is expanded, without expanding it.

    Aliases make the node graph a DAG, so sizes are memoised per node and computed in
    post-order without recursion. A node that contains itself (`&a [*a]`) expands without end
    and counts as too large.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # nodes whose children are being counted: the current path
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        children = _children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                return sizes[id(node)]
            continue
        if id(node) in sizes:
            continue
        if any(id(c) in open_nodes or c is node for c in children):
            return MAX_YAML_NODES + 1
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: "yaml.Node") -> list["yaml.Node"]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_json(path: str | Path, what: str, max_bytes: int) -> Any:
    """A JSON file (see `read_text` and `parse_json`)."""
    return parse_json(read_text(path, what, max_bytes), path)


def load_yaml(path: str | Path, what: str, max_bytes: int) -> Any:
    """A YAML file (see `read_text` and `parse_yaml`)."""
    return parse_yaml(read_text(path, what, max_bytes), path)


def _yaml_reason(exc: "yaml.YAMLError") -> str:
    """PyYAML's problem and where it is, without its multi-line excerpt."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else exc.problem
    return _one_line(exc)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


#: Characters refused in names: control characters (newlines, escapes that drive terminals)
#: and the bidirectional overrides that make text read differently from what it holds.
_HIDDEN = (
    {chr(c) for c in range(0x20)}
    | {chr(0x7F)}
    | {chr(c) for c in range(0x80, 0xA0)}
    | set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
)


def check_text(value: object, field: str, max_chars: int) -> str:
    """`value` if it is a string of at most `max_chars` without control characters; ValueError otherwise.

    `field` starts the message (leave it empty where pydantic names the field).

    Names reach terminals, CSV cells, file names and HTML: markup such as `<script>` or
    `[red]` is fine (every output escapes or prints it as plain text), but a newline could forge
    a line of output and an escape sequence could drive the terminal.
    """
    where = f"{field}: " if field else ""
    if not isinstance(value, str):
        raise ValueError(f"{where}expected text, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ValueError(f"{where}{len(value):,} characters is more than {max_chars}")
    hidden = next((c for c in value if c in _HIDDEN), None)
    if hidden is not None:
        raise ValueError(f"{where}contains the control character U+{ord(hidden):04X}; names are one line of plain text")
    return value


def check_input_file(path: Path, option: str, what: str) -> None:
    """UserInputError naming `option` unless `path` is a file: missing, or a folder (the one that holds `what`)."""
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"{option}: {path} is a folder; give the {what} in it")
    if not path.exists():
        raise UserInputError(f"{option}: no such file {path}")


def check_output_dir(directory: Path, option: str) -> None:
    """UserInputError unless `directory` is a writable folder or can be made as one."""
    probe = Path(directory)
    if probe.exists() and not probe.is_dir():
        raise UserInputError(f"{option}: {directory} is a file, not a folder")
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UserInputError(f"{option}: {probe} is a file, so {directory} cannot be made")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserInputError(f"{option}: {probe} is not writable, so nothing can be written to {directory}")


def check_output_file(path: Path, option: str) -> None:
    """UserInputError unless `path` can be written: it is not a folder, and its folder is one or can be made.

    The writer makes the folder when it writes (`Path.parent.mkdir`), as output folders are made.
    """
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"{option}: {path} is a folder; give a file name")
    check_output_dir(path.parent, option)
