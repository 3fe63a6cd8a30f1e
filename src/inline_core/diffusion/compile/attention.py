"""The device policy's SDPA order (`device/attention.py`) made torch's, for the whole process:
every later `scaled_dot_product_attention` tries those backends first to last. Only the order
moves; every backend stays enabled, so inputs one cannot run fall through to the next."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.nn.attention import SDPBackend

from inline_core.device.attention import AttentionChoice

_TORCH: Any = torch


def _value(backend: SDPBackend) -> int:
    return int(cast(Any, backend))


_VALUES: dict[str, int] = {
    "cudnn": _value(SDPBackend.CUDNN_ATTENTION),
    "flash": _value(SDPBackend.FLASH_ATTENTION),
    "mem_efficient": _value(SDPBackend.EFFICIENT_ATTENTION),
    "math": _value(SDPBackend.MATH),
}
_NAMES = {value: name for name, value in _VALUES.items()}


def sdpa_order() -> list[str]:
    """Torch's SDPA backends in the order it tries them now (by the policy's names)."""
    order = cast(list[int], _TORCH._C._get_sdp_priority_order())
    return [_NAMES[value] for value in order if value in _NAMES]


def use_attention(choice: AttentionChoice) -> list[str]:
    """Put `choice`'s backends first in torch's SDPA order (the others, such as a custom
    backend, keep their place after them); the order now."""
    chosen = [_VALUES[name] for name in choice.order]
    now = cast(list[int], _TORCH._C._get_sdp_priority_order())
    _TORCH._C._set_sdp_priority_order(chosen + [value for value in now if value not in chosen])
    return sdpa_order()
