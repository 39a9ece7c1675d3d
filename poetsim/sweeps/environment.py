"""What a machine runs a sweep's points with: poetsim's version and source, and what decides a result.

A cluster's workers must compute exactly what the client would: the same poetsim (its version
and a fingerprint of its source files, so that two checkouts of one version with different
edits are told apart), the same HiGHS, Python and Dask. `describe` says what a process has; it
needs only the standard library, so that a Dask client can send it by value to a worker that
cannot import poetsim at all and still hear why (`poetsim.sweeps.dask_pool`).
"""

import functools
from dataclasses import dataclass

#: The files of poetsim's package that decide what it computes (not caches or build products).
SOURCE_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".c", ".h")
#: Hex digits of the source fingerprint shown in messages.
SHOWN_DIGITS = 12


def describe() -> dict[str, str]:
    """This process's poetsim (version, source fingerprint) and the versions that decide a result.

    Plain strings, with "none" where something is missing and `error` set when poetsim cannot
    be imported. Self-contained (its imports are inside), so it runs where poetsim is absent.
    """
    import hashlib
    import importlib
    import importlib.metadata
    import platform
    from pathlib import Path

    def version_of(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "none"

    found = {
        "python": ".".join(platform.python_version_tuple()[:2]),
        "highspy": version_of("highspy"),
        "distributed": version_of("distributed"),
        "poetsim": "none",
        "source": "none",
        "error": "",
    }
    try:
        package = importlib.import_module("poetsim")
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the answer
        found["error"] = f"{type(exc).__name__}: {exc}"
        return found
    found["poetsim"] = str(getattr(package, "__version__", "none"))
    root = Path(package.__file__ or ".").parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    found["source"] = digest.hexdigest()
    return found


@functools.lru_cache(maxsize=1)
def here() -> "Environment":
    """This process's environment (computed once: hashing the source takes a few milliseconds)."""
    return Environment.parse(describe())


@dataclass(frozen=True)
class Environment:
    """What `describe` found, with the first difference from another environment in words."""

    python: str
    highspy: str
    distributed: str
    poetsim: str
    source: str
    error: str = ""

    @classmethod
    def parse(cls, found: dict[str, str]) -> "Environment":
        """From `describe`'s answer (missing fields, from a foreign probe, are "none")."""
        fields = {name: str(found.get(name, "none")) for name in cls.__dataclass_fields__ if name != "error"}
        return cls(**fields, error=str(found.get("error", "")))

    def difference(self, wanted: "Environment", poetsim: bool = True) -> str | None:
        """How this (a worker's) differs from `wanted` (the client's), in words; None if it does not.

        poetsim first: its version, then its source; then Python, HiGHS and Dask. Without
        `poetsim` (a scheduler, which only passes points on), Python and Dask alone.
        """
        if poetsim:
            if self.error:
                return f"cannot import poetsim ({self.error}); the client has poetsim {wanted.poetsim}"
            if self.poetsim != wanted.poetsim:
                return f"has poetsim {self.poetsim} where the client has poetsim {wanted.poetsim}"
            if self.source != wanted.source:
                return (
                    f"has poetsim {self.poetsim} from other source files (source {self.source[:SHOWN_DIGITS]}, "
                    f"the client's {wanted.source[:SHOWN_DIGITS]})"
                )
        labels = {"python": "Python", "highspy": "highspy", "distributed": "Dask distributed"}
        if not poetsim:
            del labels["highspy"]
        for name, label in labels.items():
            if getattr(self, name) != getattr(wanted, name):
                return f"has {label} {getattr(self, name)} where the client has {label} {getattr(wanted, name)}"
        return None
