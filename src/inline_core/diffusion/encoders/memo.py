"""The prompts a text encoder encoded last, kept so an unchanged prompt is not encoded again.

A high-level node (`alibaba/z-image-turbo`, `alibaba/wan`) encodes inside the node, so its node
cache key holds the seed too: a seed-only change re-runs the node and, without this, its prompt
encode (a full text-encoder forward, the largest part of a real-size seed change). An encoder's
weights never change while it is loaded, so a prompt's conditioning is a pure function of the
prompt; the memo lives and dies with the encoder object, bounded by the bytes it holds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch

from inline_core.components.interfaces import Conditioning

# Enough for dozens of real prompts (a 512-token Qwen3-4B prompt in float32 is 5 MB).
DEFAULT_MAX_BYTES = 64 << 20


def conditioning_bytes(conditioning: Conditioning) -> int:
    value = conditioning.value
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    return 0


class PromptMemo:
    """Least recently used prompts and their conditioning, at most `max_bytes` of tensors, keyed
    on the prompt and how it was read (an encoder's `Reading`: one model read two ways keeps
    the two apart)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[Hashable, Conditioning] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def encode(
        self, prompt: str, encode: Callable[[str], Conditioning], reading: Hashable = None
    ) -> Conditioning:
        key = (reading, prompt)
        with self._lock:
            known = self._kept.get(key)
            if known is not None:
                self._kept.move_to_end(key)
                self.hits += 1
                return known
            self.misses += 1
        # Encoded outside the lock: two renders may encode different prompts at once.
        made = encode(prompt)
        self._keep(key, made)
        return made

    def _keep(self, key: Hashable, conditioning: Conditioning) -> None:
        size = conditioning_bytes(conditioning)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._kept:
                return
            self._kept[key] = conditioning
            self._bytes += size
            while self._bytes > self.max_bytes:
                _old, dropped = self._kept.popitem(last=False)
                self._bytes -= conditioning_bytes(dropped)
