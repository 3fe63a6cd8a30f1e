"""Which loaded part packs its linear weights for oneDNN at load (`diffusion/packed_linear.py`):
one rule for the server's stacks (`engine/stacks.py`) and a worker group's rank loading its own
(`engine/remote.py`). The denoiser, computing in its placement's dtype (a part keeping its file's
weights casts them layer by layer: nothing plain to pack), where the device policy packs
(`device/matmul.py`), its copy within the memory budget it is given (`pack_part`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inline_core.contract.builder import DENOISER
from inline_core.device.policy import Placement
from inline_core.diffusion.packed_linear import pack_part


def packing_load(
    load: Callable[[], Any],
    role: str | None,
    placement: Placement | None,
    *,
    packs: bool,
    budget_bytes: int | None,
    name: str,
) -> Callable[[], Any]:
    """`load` (the part `name` placed as `role` at `placement`), its result packed where the rule
    above holds; `packs`: the policy's choice for the part's family."""
    if not packs or role != DENOISER or placement is None or placement.storage is not None:
        return load
    dtype = placement.dtype
    return lambda: pack_part(load(), dtype, budget_bytes, name)
