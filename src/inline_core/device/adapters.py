"""How LoRA adapters are applied: pure functions of the placement, the memory budget's room and
how long one stack has held the forwards (shown in health).

Two ways, both leaving the shared base weights as they are:

- per-row deltas (`diffusion/adapters/rows.py`): each adapted layer adds its rows' low-rank
  deltas, two small matmuls a layer and forward; requests with different stacks share forwards;
- a private fused copy (`diffusion/adapters/fused.py`): the adapted layers' weights with one
  stack's deltas added, used by forwards whose rows all hold that stack: no extra matmuls, but a
  second copy of every adapted layer, counted in the residency budget.

`adapter_mode` says whether a placement may fuse at all. Not int8 weights: a fused copy would be
re-quantized (lossy, and slow to make). Not offloaded ones (lowvram with CPU offload): the copy
is the memory that profile is short of, and it would travel to the device with every swap. On
the others, per-row deltas are the first choice, since they let every stack share forwards.

`fuse_decision` says when a copy pays: once one stack has held every row of
`FUSE_AFTER_FORWARDS` forwards in a row (a lone render past its first step, or a run of requests
with one stack; making the copy costs about one forward's matmuls, saved back within a few), and
only where the copy fits the budget's room (a copy never evicts anything: the residency puts it
only into room). A copy whose stack has been away from `DROP_AFTER_FORWARDS` forwards in a row is
dropped, and the residency drops it first when memory is needed: it is an entry like a model.
"""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.sizes import human_size

FUSE_AFTER_FORWARDS = 2
DROP_AFTER_FORWARDS = 4
PER_ROW = "per-row"
FUSE_HELD = "fuse-held"  # per-row, and a fused copy for one stack that holds every row


@dataclass(frozen=True)
class AdapterMode:
    mode: str  # PER_ROW or FUSE_HELD
    reason: str

    @property
    def may_fuse(self) -> bool:
        return self.mode == FUSE_HELD

    def to_json(self) -> dict[str, str]:
        return {"mode": self.mode, "reason": self.reason}


@dataclass(frozen=True)
class FuseDecision:
    fuse: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"fuse": self.fuse, "reason": self.reason}


def adapter_mode(offload: bool, quantize: str | None, fusing: bool = True) -> AdapterMode:
    """The mode for a denoiser placed with `offload`, `quantize` and `fusing` (the placement's
    fields; `fusing` False: the user turned fused copies off)."""
    if not fusing:
        why = "fused copies turned off (INLINE_NO_LORA_FUSING): per-row deltas on shared weights"
        return AdapterMode(PER_ROW, why)
    if offload:
        why = (
            "offloaded weights: a fused private copy would cost the memory this profile lacks "
            "and move to the device with every swap; per-row deltas on the shared weights"
        )
        return AdapterMode(PER_ROW, why)
    if quantize is not None:
        why = f"{quantize} weights: fusing would mean re-quantizing each copy; per-row deltas"
        return AdapterMode(PER_ROW, why)
    why = (
        "per-row deltas on the shared weights, so requests with different LoRA stacks share "
        f"forwards; a stack that holds every row of {FUSE_AFTER_FORWARDS} forwards in a row gets "
        "a private fused copy where the memory budget has room for it"
    )
    return AdapterMode(FUSE_HELD, why)


def fuse_decision(
    mode: AdapterMode, held_forwards: int, copy_bytes: int, room_bytes: int | None
) -> FuseDecision:
    """Whether to fuse the stack that has held every row of the last `held_forwards` forwards
    (this one included) into a copy of `copy_bytes`, with `room_bytes` left in the memory budget
    (None: no budget)."""
    if not mode.may_fuse:
        return FuseDecision(False, mode.reason)
    if held_forwards < FUSE_AFTER_FORWARDS:
        return FuseDecision(
            False,
            f"one stack has held every row of {held_forwards} forward(s) in a row; a fused copy "
            f"pays from {FUSE_AFTER_FORWARDS}",
        )
    if room_bytes is not None and copy_bytes > room_bytes:
        return FuseDecision(
            False,
            f"a fused copy needs {human_size(copy_bytes)}, the memory budget has "
            f"{human_size(room_bytes)} left: per-row deltas on the shared weights",
        )
    return FuseDecision(
        True,
        f"one stack has held every row of {held_forwards} forwards in a row and its fused copy "
        f"({human_size(copy_bytes)}) fits the memory budget",
    )
