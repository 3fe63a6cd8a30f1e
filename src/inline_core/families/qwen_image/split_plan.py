"""Qwen-Image's own context-parallel plan for cache-dit's Ulysses, and for Ring (imports torch).

cache-dit's QwenImage plan shards the image's and the prompt's tokens evenly at the first block:
a stream the ranks do not divide (a prompt of 7 tokens; the native 1328x1328, 83x83 patches)
fails an assertion mid-denoise, and the prompt's padding mask stays one rank's length while the
attention sees every rank's keys. This plan:

- pads each stream to a multiple of the ranks before the transformer runs: the prompt after its
  last token, the image with its pads put right before the last rank's shard (that shard then
  holds only real tokens, see the mask below); a pad is masked out of every attention and cut
  from the output, so the real tokens see what one process sees;
- lets cache-dit shard both streams at the first block and gather the image at `proj_out`;
- pads and shards each block's rotary table and Edit 2511's modulation index the same way;
- hands each attention the mask of the whole joint sequence in the order Ulysses' all-to-all
  lays the keys out: every rank's [prompt shard, image shard], in rank order. diffusers' processor
  masks with `cat([encoder_hidden_states_mask, ones for its own image shard])`, so it gets that
  mask less its end, the last rank's image shard (all real tokens).

Ring shards and pads alike, and hands each attention the same mask: there each rank's queries
meet every rank's keys one ring step at a time, the keys of rank j masked by rank j's slice of
it (`families/masked_ring.py`; cache-dit's own ring attention takes no mask). Ulysses with Ring
(USP) pads and masks the same way over all the ranks and runs that ring over Ulysses groups
(`families/ulysses_ring.py`): a group's gathered keys are a contiguous run of the same mask.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from inline_core.families.qwen_image.ring_attention import route
from inline_core.families.qwen_image.step_cache import LAYOUT
from inline_core.families.ulysses_ring import masked_ring_for


def context_plan() -> dict[str, Any]:
    """What cache-dit shards and gathers: both streams at the first block (already padded to a
    multiple of the ranks), the image's tokens back at the last projection."""
    core = cast(Any, importlib.import_module("cache_dit.distributed.core"))  # its plan's types
    split, gather = core._ContextParallelInput, core._ContextParallelOutput
    return {
        "transformer_blocks.0": {
            "hidden_states": split(split_dim=1, expected_dims=3),
            "encoder_hidden_states": split(split_dim=1, expected_dims=3),
        },
        "proj_out": gather(gather_dim=1, expected_dims=3),
    }


@dataclass(frozen=True)
class ImagePads:
    """Where `tokens` image tokens take pads so `ranks` shards hold equally many, the last only
    real ones: the pads sit in one run just before the last shard."""

    tokens: int
    ranks: int

    @property
    def shard(self) -> int:
        return -(-self.tokens // self.ranks)

    @property
    def pads(self) -> int:
        return self.shard * self.ranks - self.tokens

    @property
    def at(self) -> int:
        return (self.ranks - 1) * self.shard - self.pads

    def insert(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        if not self.pads:
            return x
        shape = list(x.shape)
        shape[dim] = self.pads
        rest = x.shape[dim] - self.at
        return torch.cat(
            [x.narrow(dim, 0, self.at), x.new_zeros(shape), x.narrow(dim, self.at, rest)], dim
        )

    def remove(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        if not self.pads:
            return x
        end = self.at + self.pads
        return torch.cat([x.narrow(dim, 0, self.at), x.narrow(dim, end, x.shape[dim] - end)], dim)

    def real(self, rows: int, device: torch.device) -> torch.Tensor:
        """(rows, padded tokens): True on a real token."""
        keep = torch.ones(rows, self.shard * self.ranks, dtype=torch.bool, device=device)
        keep[:, self.at : self.at + self.pads] = False
        return keep


class PaddedSplit:
    """The hooks that pad, shard and mask around cache-dit's plan on one transformer."""

    def __init__(self, transformer: nn.Module, ranks: int, rank: int) -> None:
        self.ranks = ranks
        self.rank = rank
        self.image: ImagePads | None = None  # the forward in flight's
        self.handles = [
            transformer.register_forward_pre_hook(self._pad, with_kwargs=True),
            transformer.register_forward_hook(self._cut),
        ]
        blocks = getattr(transformer, LAYOUT.blocks)
        for block in blocks:
            self.handles.append(block.register_forward_pre_hook(self._shard, with_kwargs=True))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    def _pad(self, _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args:
            raise TypeError("the split Qwen-Image transformer is called by keyword")
        image: torch.Tensor = kwargs["hidden_states"]
        text: torch.Tensor = kwargs["encoder_hidden_states"]
        mask: torch.Tensor | None = kwargs.get("encoder_hidden_states_mask")
        self.image = pads = ImagePads(int(image.shape[1]), self.ranks)
        text_pads = -int(text.shape[1]) % self.ranks
        if text_pads or pads.pads:  # a pad anywhere: the attention needs a mask
            if mask is None:
                mask = torch.ones(text.shape[:2], dtype=torch.long, device=text.device)
            mask = torch.cat([mask, mask.new_zeros(mask.shape[0], text_pads)], 1)
            text = torch.cat([text, text.new_zeros(text.shape[0], text_pads, text.shape[2])], 1)
        padded = {"hidden_states": pads.insert(image, 1), "encoder_hidden_states": text}
        return args, {**kwargs, **padded, "encoder_hidden_states_mask": mask}

    def _cut(self, _module: nn.Module, _args: Any, output: Any) -> Any:
        pads = self.image
        if pads is None or not pads.pads:
            return output
        if isinstance(output, tuple):
            first, *rest = cast(tuple[torch.Tensor, ...], output)
            return (pads.remove(first, 1), *rest)
        output.sample = pads.remove(cast(torch.Tensor, output.sample), 1)
        return output

    def _shard(self, _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pads = self.image
        if pads is None:
            raise RuntimeError("a split Qwen-Image block ran outside its transformer's forward")
        # The step cache calls blocks by position, the transformer by keyword.
        kwargs = {**dict(zip(LAYOUT.names, args, strict=False)), **kwargs}
        image_rope, text_rope = kwargs["image_rotary_emb"]
        kwargs["image_rotary_emb"] = (
            self._mine(pads.insert(image_rope, 0), 0),
            self._mine(text_rope, 0),
        )
        index: torch.Tensor | None = kwargs.get("modulate_index")
        if index is not None:  # Edit 2511: which tokens are the references'
            kwargs["modulate_index"] = self._mine(pads.insert(index, 1), 1)
        mask: torch.Tensor | None = kwargs.get("encoder_hidden_states_mask")
        if mask is not None:
            kwargs["encoder_hidden_states_mask"] = self._joint_mask(mask.to(torch.bool), pads)
        return (), kwargs

    def _mine(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        return x.chunk(self.ranks, dim=dim)[self.rank]

    def _joint_mask(self, text: torch.Tensor, pads: ImagePads) -> torch.Tensor:
        """Every rank's [prompt shard, image shard] mask in rank order, less the last image
        shard (the processor appends it: all real)."""
        image = pads.real(int(text.shape[0]), text.device)
        parts: list[torch.Tensor] = []
        for text_part, image_part in zip(
            text.chunk(self.ranks, dim=1), image.chunk(self.ranks, dim=1), strict=True
        ):
            parts += [text_part, image_part]
        return torch.cat(parts[:-1], dim=1)


def pad_for_split(transformer: nn.Module, degrees: Mapping[str, int]) -> PaddedSplit:
    """Install the hooks on a transformer cache-dit splits with `context_plan()`; with Ring,
    route its attention through the masked ring."""
    import torch.distributed as dist

    ulysses, ring = int(degrees.get("ulysses", 1)), int(degrees.get("ring", 1))
    others = {name: d for name, d in degrees.items() if name not in ("ulysses", "ring") and d > 1}
    if others:
        raise ValueError(f"Qwen-Image splits with Ulysses and Ring only, got {dict(degrees)}")
    ranks = ulysses * ring
    if dist.get_world_size() != ranks:
        raise ValueError(f"{dict(degrees)} needs {ranks} ranks, got {dist.get_world_size()}")
    hooks = PaddedSplit(transformer, ranks, dist.get_rank())
    masked = masked_ring_for(ulysses, ring)
    if masked is not None:
        route(transformer, masked)
    return hooks
