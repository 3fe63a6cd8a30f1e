"""A prompt encoder over one or more CLIP text encoders, as ComfyUI's `CLIPTextEncode` encodes:
weights, 77-token windows (`weighted_prompt.py`) and `CLIPSetLastLayer`'s layer choice.

Each encoder ("tower") encodes the prompt's windows in one batch; where any token is weighted,
the empty prompt is encoded beside them and each token's states are moved away from (or toward)
the empty prompt's at the same position: `(z - empty) * weight + empty`. The windows' states are
joined along the sequence; several towers' states side by side (SDXL: CLIP-L's then CLIP-G's),
cut to the shorter. The pooled embedding is the projecting tower's, of the first window.

A tower may carry an adapter bank: a prompt encoded with a LoRA stack gets each LoRA's layers of
that tower (at the strengths the stack holds) in its forward, and is remembered under the LoRAs
that adapt some tower, so another stack never reads a prompt encoded without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.adapters.bank import AdapterBank
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.encoders.weighted_prompt import Token, empty_window, tokenize
from inline_core.diffusion.placement import OffloadSwap, PlacementLike


@dataclass(frozen=True)
class ClipTower:
    """One CLIP text encoder as a family reads it."""

    model: nn.Module
    pad: int | None  # the padding token (None: its end token, as CLIP-L pads)
    final_norm: bool  # a chosen layer's states pass the final layer norm (SD 1.x), or not (SDXL)
    pooled: bool = False  # its projected pooled output is the prompt's pooled embedding
    adapters: AdapterBank | None = None  # LoRAs on this encoder (None: it takes none)


@dataclass(frozen=True)
class ClipConditioning:
    """A prompt's states `(1, 77 * windows, width)` and pooled embedding `(1, P)` (or None)."""

    hidden: torch.Tensor
    pooled: torch.Tensor | None


def _layers(model: nn.Module) -> int:
    return int(cast(Any, model).config.num_hidden_layers)


def _text_model(model: nn.Module) -> Any:
    return getattr(model, "text_model", model)


class ClipPromptEncoder:
    def __init__(
        self,
        tokenizer: Any,
        towers: Sequence[ClipTower],
        placement: PlacementLike,
        swap: OffloadSwap,
        *,
        clip_skip: int = -1,
    ) -> None:
        self.tokenizer = tokenizer
        self.towers = tuple(towers)
        self.placement = placement
        self.swap = swap
        self.clip_skip = clip_skip  # the layer `encode` reads (CLIPSetLastLayer's count)
        self.start = int(tokenizer.bos_token_id)
        self.end = int(tokenizer.eos_token_id)
        self.memo = PromptMemo()  # (layer, prompt) -> conditioning

    def encode(self, prompt: str, /) -> Conditioning:
        return self.encode_at(prompt, self.clip_skip)

    def encode_at(self, prompt: str, clip_skip: int, loras: LoraStack = ()) -> Conditioning:
        """`prompt` read at layer `clip_skip` (-1: the last, -2: the one before, ...), with the
        towers' layers of `loras` (at their `strength`) adapted."""
        if clip_skip >= 0:
            raise ValueError(f"clip_skip {clip_skip} must be negative (-1: the last layer)")
        stack = self.adapting(loras)
        reading = tuple((use.identity, use.strength) for use in stack)
        return self.memo.encode(
            f"{clip_skip}\0{prompt}",
            lambda _k: self._encode(prompt, clip_skip, stack),
            reading or None,
        )

    def adapting(self, loras: LoraStack) -> LoraStack:
        """The LoRAs of a stack that change some tower (loading each once per file)."""
        return tuple(
            use
            for use in loras
            if use.strength != 0.0
            and any(t.adapters is not None and t.adapters.weights(use).layers for t in self.towers)
        )

    def token_ids(self, piece: str) -> list[int]:
        return list(self.tokenizer(piece)["input_ids"][1:-1])

    def windows(self, prompt: str, tower: ClipTower) -> list[list[Token]]:
        pad = self.end if tower.pad is None else tower.pad
        return tokenize(prompt, self.token_ids, self.start, self.end, pad)

    def _encode(self, prompt: str, clip_skip: int, loras: LoraStack = ()) -> Conditioning:
        states: list[torch.Tensor] = []
        pooled: torch.Tensor | None = None
        windows = 0
        with torch.inference_mode():
            for tower in self.towers:
                chunks = self.windows(prompt, tower)
                windows = len(chunks)
                hidden, tower_pooled = self._tower(tower, chunks, clip_skip, loras)
                states.append(hidden)
                if tower.pooled:
                    pooled = tower_pooled
        length = min(s.shape[1] for s in states)
        hidden = torch.cat([s[:, :length] for s in states], dim=-1)
        return Conditioning(ClipConditioning(hidden, pooled), tokens=windows * 77)

    def _tower(
        self, tower: ClipTower, chunks: list[list[Token]], clip_skip: int, loras: LoraStack
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        device = torch.device(self.placement.device)
        ids = [[t for t, _w in chunk] for chunk in chunks]
        weighted = any(w != 1.0 for chunk in chunks for _t, w in chunk)
        if weighted:
            pad = self.end if tower.pad is None else tower.pad
            ids.append(empty_window(self.start, self.end, pad))
        batch = torch.tensor(ids, dtype=torch.long, device=device)
        with self.swap.use(tower.model, self.placement), _adapted(tower, loras, len(ids)):
            out = cast(Any, tower.model)(batch, output_hidden_states=True)
            if -clip_skip > _layers(tower.model):  # past the first layer: the last (ComfyUI's)
                hidden = cast(torch.Tensor, out.last_hidden_state)
            else:
                hidden = cast(torch.Tensor, out.hidden_states[clip_skip])
                if tower.final_norm:
                    hidden = _text_model(tower.model).final_layer_norm(hidden)
        pooled = cast(torch.Tensor, out.text_embeds)[0:1] if tower.pooled else None
        if weighted:
            empty = hidden[-1]
            weights = torch.tensor(
                [[w for _t, w in chunk] for chunk in chunks], dtype=hidden.dtype, device=device
            ).unsqueeze(-1)
            hidden = (hidden[: len(chunks)] - empty) * weights + empty
        return hidden.reshape(1, -1, hidden.shape[-1]).clone(), pooled


def _adapted(tower: ClipTower, loras: LoraStack, rows: int) -> AbstractContextManager[None]:
    """Every row of the tower's forward (a prompt's windows) with the stack's layers."""
    if tower.adapters is None or not loras:
        return nullcontext()
    return tower.adapters.applied([loras] * rows)
