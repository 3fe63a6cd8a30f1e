"""xDiT's sequence-parallel Z-Image transformer over the resident weights (CUDA ranks; imports
xfuser only when called).

xfuser 0.7 splits Z-Image with its own transformer class, `xFuserZImageTransformer2DWrapper`: a
subclass of diffusers' `ZImageTransformer2DModel` whose forward shards the image, caption and
unified token streams over xDiT's sequence-parallel group (Ulysses and Ring, via its USP attention)
and gathers them back. It has no PipeFusion for Z-Image. We build it on the meta device and hand
it the resident transformer's own tensors, so no weights are copied or reloaded. Its submodules
are its own, though: the denoiser binds its LoRA rows and step cache to it as it takes the
resident one's place (`denoiser.py`), so they act on the module that runs.

xDiT's attention drops the padding mask; two kinds of padding would then leak into the picture:
- Padding between the sequences of one batch (guidance with a negative prompt of another length,
  or captions of other lengths). Such a batch runs one padded length per forward (rows of one
  length together), so no forward needs a mask: the exception to batching this engine forces.
  Each of those calls narrows the per-row state its denoiser handed it (`scope_rows`: each row's
  LoRA stack and step cache, `diffusion/row_scopes.py`) to its own rows.
- Padding of the sequence to a multiple of the ranks. Z-Image pads each stream to a multiple of 32
  tokens, and its split policy (`split.py`) only allows rank counts dividing 32, so this never
  happens.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import partial
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.row_scopes import RowScoped, narrowed

WRAPPER = "xfuser.model_executor.models.transformers.transformer_z_image"
DIFFUSERS_ZIMAGE = "diffusers.models.transformers.transformer_z_image"
XDIT_MODEL = "Z-Image"  # xFuserArgs' name for the family


def xdit_transformer(dit: nn.Module) -> nn.Module:
    """xDiT's Z-Image transformer holding `dit`'s own parameters and buffers."""
    wrapper_class = _one_length_per_forward(
        cast(Any, importlib.import_module(WRAPPER)).xFuserZImageTransformer2DWrapper
    )
    # The wrapper's __init__ takes **kwargs, which `from_config` cannot read: pass the config.
    config = {k: v for k, v in dict(cast(Any, dit).config).items() if not k.startswith("_")}
    with torch.device("meta"):
        wrapper = cast(nn.Module, wrapper_class(**config))
    wrapper.load_state_dict(dit.state_dict(), strict=True, assign=True)
    return wrapper.eval()


def xdit_pipeline(transformer: nn.Module, vae: nn.Module | None) -> Any:
    """The diffusers pipeline xDiT reads its runtime state (attention backend, head checks) from."""
    diffusers = cast(Any, importlib.import_module("diffusers"))
    return diffusers.ZImagePipeline(
        scheduler=None, vae=vae, text_encoder=None, tokenizer=None, transformer=transformer
    )


def _one_length_per_forward(base: Any) -> Any:
    """xDiT's class, running a batch of sequences of unequal padded lengths one length at a time,
    each call with its own rows' state (the scopes its denoiser hands it: LoRA rows, step cache)."""
    block = int(cast(Any, importlib.import_module(DIFFUSERS_ZIMAGE)).SEQ_MULTI_OF)

    class OneLengthPerForward(base):
        row_scopes: tuple[RowScoped, ...] = ()

        def scope_rows(self, scopes: Sequence[RowScoped], /) -> None:
            """`row_scopes.ScopesRows`: the per-row state a call over some rows narrows."""
            self.row_scopes = tuple(scopes)

        def forward(
            self,
            x: list[torch.Tensor],
            t: torch.Tensor,
            cap_feats: list[torch.Tensor],
            *args: Any,
            return_dict: bool = True,
            **kwargs: Any,
        ) -> Any:
            xdit_forward = partial(base.forward, self)
            groups = one_length_groups(x, cap_feats, block)
            if len(groups) <= 1:
                return xdit_forward(x, t, cap_feats, *args, return_dict=return_dict, **kwargs)
            outputs: list[torch.Tensor | None] = [None] * len(x)
            for rows in groups:
                with narrowed(self.row_scopes, rows):
                    alone = xdit_forward(
                        [x[i] for i in rows],
                        t[rows],
                        [cap_feats[i] for i in rows],
                        *args,
                        return_dict=False,
                        **kwargs,
                    )
                for i, out in zip(rows, cast(list[torch.Tensor], alone[0]), strict=True):
                    outputs[i] = out
            done = [cast(torch.Tensor, out) for out in outputs]
            if not return_dict:
                return (done,)
            output_types = cast(Any, importlib.import_module("diffusers.models.modeling_outputs"))
            return output_types.Transformer2DModelOutput(sample=done)

    return OneLengthPerForward


def one_length_groups(
    x: Sequence[torch.Tensor], cap_feats: Sequence[torch.Tensor], block: int
) -> list[list[int]]:
    """The rows whose sequences fill the same blocks (latent shape, caption blocks), in order of
    first appearance: each group needs no padding mask."""
    groups: dict[tuple[tuple[int, ...], int], list[int]] = {}
    for i, (item, caption) in enumerate(zip(x, cap_feats, strict=True)):
        groups.setdefault((tuple(item.shape), -(-len(caption) // block)), []).append(i)
    return list(groups.values())
