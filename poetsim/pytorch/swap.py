"""Paging to real files: a node's tensors written to a file in the swap folder and read back.

A page-out writes the bytes of every storage the node holds, one after the other, into
`<swap dir>/node<id>.bin`; a page-in allocates buffers of the same sizes, reads the file into them and
rebuilds each tensor (shape, strides, offset, dtype, conjugate and negative bits) on them, so the
values are bitwise the ones written. With `durable=True` (the default) a write is followed by
`fsync` and by dropping the file's pages from the kernel's page cache (`posix_fadvise(DONTNEED)`),
so that the bytes really leave RAM, as on a device without a page cache, and a page-in reads them
back from the disk. With `durable=False` both go through the page cache, like the `rpi4` profile's
card. The host profile (`poetsim.pytorch.host`) measures storage the same way.
"""

import os
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class TensorLayout:
    """Where a tensor lives in a swapped node: which storage, and its view on it."""

    storage: int
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    #: The view's lazy conjugate and negative bits (`torch.conj` of a complex tensor, and what
    #: autograd makes of it): the stored bytes are the unconjugated values.
    conj: bool = False
    neg: bool = False


@dataclass(frozen=True)
class SwappedNode:
    """A node's tensors on storage: the file, the storages' sizes and each tensor's layout."""

    path: Path
    storage_bytes: tuple[int, ...]
    layouts: tuple[tuple[object, TensorLayout], ...]

    @property
    def nbytes(self) -> int:
        """Bytes of all the storages together."""
        return sum(self.storage_bytes)


def distinct_storages(values) -> list[torch.UntypedStorage]:
    """The storages behind `values` (tensors), each once, in first-seen order."""
    seen, storages = set(), []
    for tensor in values:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            storages.append(storage)
    return storages


def storage_bytes(values) -> int:
    """Bytes of the distinct storages behind `values`: what holding them costs."""
    return sum(s.nbytes() for s in distinct_storages(values))


def layout(values: dict) -> tuple[list[torch.UntypedStorage], tuple[tuple[object, TensorLayout], ...]]:
    """The distinct storages of a node's `values` (key -> tensor) and each tensor's layout."""
    storages = distinct_storages(values.values())
    index = {s.data_ptr(): i for i, s in enumerate(storages)}
    layouts = tuple(
        (
            key,
            TensorLayout(
                index[t.untyped_storage().data_ptr()],
                t.dtype,
                tuple(t.shape),
                tuple(t.stride()),
                t.storage_offset(),
                t.is_conj(),
                t.is_neg(),
            ),
        )
        for key, t in values.items()
    )
    return storages, layouts


def _bytes_view(storage: torch.UntypedStorage) -> memoryview:
    flat = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))
    return flat.numpy().data  # the array's bytes as a memoryview


def write_storages(path: Path, storages: list[torch.UntypedStorage], durable: bool) -> int:
    """Write the storages' bytes to `path`, one after the other; return the bytes written."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for storage in storages:
            view = _bytes_view(storage)
            while view:
                count = os.write(fd, view)
                written += count
                view = view[count:]
        if durable:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return written


def allocate(swapped: SwappedNode) -> list[torch.Tensor]:
    """Byte buffers to read a swapped node into (allocated when its page-in starts)."""
    return [torch.empty(size, dtype=torch.uint8) for size in swapped.storage_bytes]


def read_into(path: Path, buffers: list[torch.Tensor]) -> int:
    """Fill `buffers` from `path` in order; return the bytes read."""
    read = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for buffer in buffers:
            view = buffer.numpy().data
            while view:
                count = os.readv(fd, [view])
                if count == 0:
                    raise OSError(f"{path}: ends after {read} bytes")
                read += count
                view = view[count:]
    finally:
        os.close(fd)
    return read


def rebuild(swapped: SwappedNode, buffers: list[torch.Tensor]) -> dict:
    """The node's tensors, as views on the buffers a page-in filled (their conjugate and negative bits set again)."""
    values = {}
    for key, where in swapped.layouts:
        storage = buffers[where.storage].untyped_storage()
        tensor = torch.empty(0, dtype=where.dtype).set_(storage, where.offset, where.size, where.stride)
        if where.neg:
            tensor = torch._neg_view(tensor)
        values[key] = tensor.conj() if where.conj else tensor
    return values
