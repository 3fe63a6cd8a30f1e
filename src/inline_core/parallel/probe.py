"""A debug counter: how many tokens each attention layer of the DiT saw in a forward.

Under a sequence-parallel split every rank's attention layers see only its shard of the sequence,
so these counts, reported by each rank with its result, show that the work was really divided
(one process sees the whole sequence). The hooks only read a shape; they cost nothing measurable.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle


class AttentionProbe:
    """The counts of one DiT, or of each of a pair of experts (one runs each forward)."""

    def __init__(self, *dits: nn.Module) -> None:
        self.forwards = 0
        self.first_forward: list[int] = []  # tokens per attention layer, first forward of a job
        self.last_forward: list[int] = []  # tokens per attention layer, the latest forward
        self._current: list[int] = []
        self._handles: list[RemovableHandle] = []
        # diffusers names its attention modules `Attention`, `FluxAttention`, `WanAttention`...
        for dit in dits:
            attentions = [m for m in dit.modules() if type(m).__name__.endswith("Attention")]
            for module in attentions:
                hook = module.register_forward_pre_hook(self._seen, with_kwargs=True)
                self._handles.append(hook)
            self._handles.append(dit.register_forward_pre_hook(self._forward_begins))
            self._handles.append(dit.register_forward_hook(self._forward_ends))

    def reset(self) -> None:
        self.forwards = 0
        self.first_forward = []
        self._current = []

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _forward_begins(self, _module: nn.Module, _args: Any) -> None:
        self._current = []

    def _forward_ends(self, _module: nn.Module, _args: Any, _output: Any) -> None:
        self.last_forward = list(self._current)
        if self.forwards == 0:
            self.first_forward = self.last_forward
        self.forwards += 1

    def _seen(self, _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        hidden = args[0] if args else kwargs.get("hidden_states")
        shape = getattr(hidden, "shape", None)
        if shape is not None and len(shape) >= 2:
            self._current.append(int(shape[-2]))  # (batch, sequence, features)
