"""How LoRA adapters are applied on a device profile: a pure function of the placement.

Only one way is implemented, and the policy records why it is the one chosen: per-row deltas on
the shared base weights. Fusing an adapter into a private copy of the weights saves the delta
matmuls, but costs a second copy of every adapted layer per stack. On an offloaded (lowvram)
profile that copy is the memory the profile is short of, and on int8 weights it would mean
re-quantizing. Everywhere else requests with different stacks share forwards, which a fused copy
cannot do. Fusing stays a possible later choice where one stack serves every request.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdapterMode:
    mode: str  # "per-row"
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"mode": self.mode, "reason": self.reason}


def adapter_mode(offload: bool, quantize: str | None) -> AdapterMode:
    """The mode for a denoiser placed with `offload` and `quantize` (the placement's fields)."""
    if offload:
        why = "offloaded weights: a fused private copy would cost the memory this profile lacks"
    elif quantize is not None:
        why = f"{quantize} weights: fusing would mean re-quantizing each copy"
    else:
        why = "requests with different LoRA stacks share forwards; the base weights stay shared"
    return AdapterMode("per-row", why)
