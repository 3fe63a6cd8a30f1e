"""A flow model's sampling shift set per request, as ComfyUI's model sampling nodes set it
(torch-free: nodes, requests and the importer carry it).

- `shift` is `ModelSamplingSD3` / `ModelSamplingAuraFlow`'s: `sigma = shift * t / (1 + (shift -
  1) * t)` over the model's time `t`.
- `mu` is `ModelSamplingFlux`'s exponential shift: `sigma = e^mu / (e^mu + 1 / t - 1)`.

Either replaces the model's own shift (its config's `shift`, or its dynamic shift for the image's
token count), and with it anything else the config shifts by (a terminal stretch), as ComfyUI's
node replaces the model's whole sampling object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# ComfyUI's ModelSamplingFlux: its line runs from `base_shift` at 256 image tokens to
# `max_shift` at 4096, a token being 16x16 pixels.
FLUX_BASE_TOKENS = 256
FLUX_MAX_TOKENS = 4096
PIXELS_PER_TOKEN = 8 * 8 * 2 * 2


def flux_mu(max_shift: float, base_shift: float, width: int, height: int) -> float:
    """ComfyUI's `ModelSamplingFlux.patch`: the shift `mu` for an image of `width x height`
    pixels, on the line through `(256, base_shift)` and `(4096, max_shift)` tokens."""
    slope = (max_shift - base_shift) / (FLUX_MAX_TOKENS - FLUX_BASE_TOKENS)
    intercept = base_shift - slope * FLUX_BASE_TOKENS
    return (width * height / PIXELS_PER_TOKEN) * slope + intercept


@dataclass(frozen=True)
class ModelShift:
    shift: float | None = None  # ModelSamplingSD3 / ModelSamplingAuraFlow
    mu: float | None = None  # ModelSamplingFlux

    def __post_init__(self) -> None:
        if self.shift is not None and self.mu is not None:
            raise ValueError(
                f"shift {self.shift:g} and mu {self.mu:g} are two shifts of one schedule: "
                "set one (shift: ModelSamplingSD3/AuraFlow's; mu: ModelSamplingFlux's)"
            )
        if self.shift is not None and self.shift <= 0:
            raise ValueError(f"shift {self.shift:g} leaves no noise: it must be above 0")

    @classmethod
    def of(cls, shift: float | None, mu: float | None) -> ModelShift | None:
        """The shift a request sets, or None when it keeps the model's own."""
        if shift is None and mu is None:
            return None
        return cls(shift, mu)

    def flow_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A diffusers flow scheduler config that shifts as this does (and by nothing else)."""
        out = {k: v for k, v in config.items() if k not in _SHIFT_KEYS}
        if self.mu is not None:
            out.update(use_dynamic_shifting=True, time_shift_type="exponential", shift=1.0)
        else:
            out.update(use_dynamic_shifting=False, shift=self.shift)
        return out

    def describe(self) -> str:
        return f"shift {self.shift:g}" if self.mu is None else f"mu {self.mu:g}"


# The config keys that shift a flow schedule (a model's own shift, besides the shift itself).
_SHIFT_KEYS = frozenset(
    {
        "shift",
        "use_dynamic_shifting",
        "time_shift_type",
        "shift_terminal",
        "base_shift",
        "max_shift",
        "base_image_seq_len",
        "max_image_seq_len",
    }
)
