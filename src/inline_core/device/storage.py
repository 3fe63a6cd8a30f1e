"""Which dtype a part's weights are kept in, when it is not the dtype they compute in (torch-free).

On a CPU without fast bfloat16 the policy computes in float32. A part stored in bfloat16 or
float16 then gets a float32 copy on the heap, twice its file. When that copy would take more than
half the memory budget, it is not made: the weights stay in their file's dtype, mapped from the
file (page cache, no budget), and each layer casts its weights to float32 as it computes. A render
needs its text encoder and its diffusion model at once, so a part over half the budget would leave
the other no room: without this, the two stay resident over the budget (a small machine is killed
for memory) or evict each other on every render. The numbers are the same: a float32 copy of a
bfloat16 weight holds the very values the layer casts to (only a model that casts its inputs to
its weights' dtype rounds them there). The cost is the cast, layer by layer.

A part stored in an fp8 dtype (ComfyUI's `*_fp8_e4m3fn` and `*_fp8_scaled` files) is always
kept so, wherever it runs: no layer computes in fp8 here, and a copy in the compute dtype would
take two to four times the file for the same numbers.
"""

from __future__ import annotations

from inline_core.device.policy import Placement
from inline_core.sizes import human_size

# Dtypes kept as stored and cast as they compute: the lower floats a float32 copy doubles.
CASTABLE = frozenset({"bfloat16", "float16"})
# Dtypes only stored, never computed in: a part stored so is always kept, its layers casting.
STORAGE_ONLY = frozenset({"float8_e4m3fn", "float8_e5m2"})
# Bytes per number of the compute dtypes this rule applies to.
COMPUTE_BYTES = {"float32": 4}


def kept_dtype(
    placement: Placement, stored_dtype: str | None, numbers: int, budget_bytes: int | None
) -> str | None:
    """The dtype to keep the part's weights in (its file's), or None to convert them to the
    placement's dtype as usual. An fp8 part is always kept; otherwise only a CPU part (not
    offloaded, not quantized) stored in a lower float than it computes in, whose copy would take
    more than half the budget, is kept."""
    if stored_dtype in STORAGE_ONLY:
        return stored_dtype
    compute_bytes = COMPUTE_BYTES.get(placement.dtype)
    if (
        budget_bytes is None
        or compute_bytes is None
        or stored_dtype not in CASTABLE
        or placement.device != "cpu"
        or placement.offload
        or placement.quantize is not None
    ):
        return None
    return stored_dtype if numbers * compute_bytes * 2 > budget_bytes else None


def kept_reason(name: str, placement: Placement, kept: str, numbers: int, budget: int) -> str:
    """The warning a load gives when it keeps a part's weights in their file's dtype."""
    copy = numbers * COMPUTE_BYTES[placement.dtype]
    return (
        f"the {name} would take {human_size(copy)} as a {placement.dtype} copy, more than half "
        f"the {human_size(budget)} memory budget: its weights stay in the file's {kept}, mapped "
        f"from the file, and each layer casts them to {placement.dtype} as it computes (a {kept} "
        f"weight casts to the very number its copy holds; each layer is slower than with the copy)"
    )


def stored_reason(name: str, placement: Placement, kept: str) -> str:
    """What a load says when a part's file stores its weights in a dtype only kept (fp8)."""
    return (
        f"the {name}'s weights are stored in {kept}: they stay so (on a CPU, mapped from the "
        f"file), and each layer casts them to {placement.dtype} as it computes"
    )
