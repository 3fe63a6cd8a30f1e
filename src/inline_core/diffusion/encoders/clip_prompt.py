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

Textual-inversion embeddings (`embedding:name`, ComfyUI's syntax) stand in the prompt for their
vectors: each vector one token, weighted as the words around it, its row of the token embedding
replaced by the tower's own vector of the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
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


@dataclass(frozen=True, eq=False)
class ClipEmbedding:
    """A textual-inversion embedding: its vectors `(n, width)` for each tower, in tower order."""

    identity: str
    vectors: tuple[torch.Tensor, ...]


EMBEDDING_WORD = re.compile(r"embedding:([^\s,()\[\]:]+)")


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

    def encode_at(
        self,
        prompt: str,
        clip_skip: int,
        loras: LoraStack = (),
        embeddings: Mapping[str, ClipEmbedding] | None = None,
    ) -> Conditioning:
        """`prompt` read at layer `clip_skip` (-1: the last, -2: the one before, ...), with the
        towers' layers of `loras` (at their `strength`) adapted and `embeddings` (by name) for
        the prompt's `embedding:name` words."""
        if clip_skip >= 0:
            raise ValueError(f"clip_skip {clip_skip} must be negative (-1: the last layer)")
        stack = self.adapting(loras)
        used = {n: e for n, e in (embeddings or {}).items() if f"embedding:{n}" in prompt}
        reading = (
            tuple((use.identity, use.strength) for use in stack),
            tuple(sorted((n, e.identity) for n, e in used.items())),
        )
        return self.memo.encode(
            f"{clip_skip}\0{prompt}",
            lambda _k: self._encode(prompt, clip_skip, stack, used),
            reading if any(reading) else None,
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

    def windows(
        self, prompt: str, tower: ClipTower, token_ids: Callable[[str], list[int]] | None = None
    ) -> list[list[Token]]:
        pad = self.end if tower.pad is None else tower.pad
        return tokenize(prompt, token_ids or self.token_ids, self.start, self.end, pad)

    def _with_embeddings(
        self, embeddings: Mapping[str, ClipEmbedding]
    ) -> tuple[Callable[[str], list[int]], list[tuple[ClipEmbedding, int]]]:
        """A piece's ids with each `embedding:name` word as one placeholder id per vector (past
        the vocabulary, `_placeholder_base`), and what each placeholder stands for."""
        slots: list[tuple[ClipEmbedding, int]] = []
        base = self._placeholder_base()

        def ids(piece: str) -> list[int]:
            out: list[int] = []
            at = 0
            for match in EMBEDDING_WORD.finditer(piece):
                embedding = embeddings.get(match[1])
                if embedding is None:
                    continue  # not an embedding this request resolved: read as text
                out += (
                    self.token_ids(piece[at : match.start()])
                    if piece[at : match.start()].strip()
                    else []
                )
                for row in range(int(embedding.vectors[0].shape[0])):
                    out.append(base + len(slots))
                    slots.append((embedding, row))
                at = match.end()
            rest = piece[at:]
            return out + (self.token_ids(rest) if rest.strip() or not out else [])

        return ids, slots

    def _placeholder_base(self) -> int:
        return max(int(cast(Any, t.model).config.vocab_size) for t in self.towers)

    def _encode(
        self,
        prompt: str,
        clip_skip: int,
        loras: LoraStack = (),
        embeddings: Mapping[str, ClipEmbedding] | None = None,
    ) -> Conditioning:
        states: list[torch.Tensor] = []
        pooled: torch.Tensor | None = None
        windows = 0
        token_ids, slots = self._with_embeddings(embeddings or {})
        with torch.inference_mode():
            for index, tower in enumerate(self.towers):
                slots.clear()
                chunks = self.windows(prompt, tower, token_ids)
                windows = len(chunks)
                vectors = [(e.vectors[index], row) for e, row in slots]
                hidden, tower_pooled = self._tower(tower, chunks, clip_skip, loras, vectors)
                states.append(hidden)
                if tower.pooled:
                    pooled = tower_pooled
        length = min(s.shape[1] for s in states)
        hidden = torch.cat([s[:, :length] for s in states], dim=-1)
        return Conditioning(ClipConditioning(hidden, pooled), tokens=windows * 77)

    def _tower(
        self,
        tower: ClipTower,
        chunks: list[list[Token]],
        clip_skip: int,
        loras: LoraStack,
        vectors: Sequence[tuple[torch.Tensor, int]] = (),
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        device = torch.device(self.placement.device)
        ids = [[t for t, _w in chunk] for chunk in chunks]
        weighted = any(w != 1.0 for chunk in chunks for _t, w in chunk)
        if weighted:
            pad = self.end if tower.pad is None else tower.pad
            ids.append(empty_window(self.start, self.end, pad))
        batch = torch.tensor(ids, dtype=torch.long, device=device)
        base = self._placeholder_base()
        slots = batch >= base
        if bool(slots.any()):
            batch = batch.masked_fill(slots, 0)  # each placeholder's row replaced below
        with (
            self.swap.use(tower.model, self.placement),
            _adapted(tower, loras, len(ids)),
            _embedded(tower, slots, torch.tensor(ids, device=device) - base, vectors),
        ):
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


@contextmanager
def _embedded(
    tower: ClipTower,
    slots: torch.Tensor,
    index: torch.Tensor,
    vectors: Sequence[tuple[torch.Tensor, int]],
) -> Generator[None]:
    """The tower's token embedding with each placeholder's row its embedding's vector."""
    if not vectors:
        yield
        return
    table = cast(Any, tower.model).get_input_embeddings()

    def replace(_module: nn.Module, _args: Any, output: torch.Tensor) -> torch.Tensor:
        rows = torch.stack([v[row] for v, row in vectors]).to(output)
        out = output.clone()
        out[slots] = rows[index[slots]]
        return out

    handle = table.register_forward_hook(replace)
    try:
        yield
    finally:
        handle.remove()
