"""What a loaded component costs in memory: bytes of its own, and pages mapped from its files.

safetensors maps a file and hands out CPU tensors that view its pages; a component computed in its
file's dtype on the CPU keeps them (no copy), so its weights live in the page cache, which the OS
can drop and read back. A tensor converted to another dtype or moved to a device is a copy of its
own. Telling the two apart takes the process's file mappings (/proc/self/maps, Linux); elsewhere
every byte counts as its own, which errs on the side of the budget.
"""

from __future__ import annotations

import bisect
from itertools import chain
from pathlib import Path

from torch import nn

from inline_core.diffusion.packed_linear import packed_bytes
from inline_core.diffusion.residency import Footprint

MAPS = Path("/proc/self/maps")


def footprint(value: object) -> Footprint:
    """The footprint of a loaded part (a module's parameters and buffers; anything else: none)."""
    if not isinstance(value, nn.Module):
        return Footprint(0)
    starts, ends = _file_mappings()
    own = mapped = 0
    seen: set[int] = set()
    for tensor in chain(value.parameters(), value.buffers()):
        if tensor.device.type == "meta":
            continue
        try:
            storage = tensor.untyped_storage()
            where, size = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError):  # a tensor subclass (quantized) has none
            own += tensor.numel() * tensor.element_size()
            continue
        if where in seen:  # views of one storage (tied weights, split qkv) count once
            continue
        seen.add(where)
        index = bisect.bisect_right(starts, where) - 1
        if tensor.device.type == "cpu" and index >= 0 and where < ends[index]:
            mapped += size
        else:
            own += size
    return Footprint(own + packed_bytes(value), mapped)  # packed weights: copies of their own


def _file_mappings() -> tuple[list[int], list[int]]:
    """(starts, ends) of the address ranges mapped from files, sorted by start."""
    try:
        text = MAPS.read_text()
    except OSError:
        return [], []
    ranges: list[tuple[int, int]] = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            start, _, end = fields[0].partition("-")
            ranges.append((int(start, 16), int(end, 16)))
    ranges.sort()
    return [s for s, _ in ranges], [e for _, e in ranges]
