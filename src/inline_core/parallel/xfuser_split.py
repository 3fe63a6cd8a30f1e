"""xDiT (`xfuser`) sequence parallelism for a resident Z-Image transformer (CUDA ranks).

xfuser 0.7 splits Z-Image with its own transformer class, `xFuserZImageTransformer2DWrapper`: a
subclass of diffusers' `ZImageTransformer2DModel` whose forward shards the image, caption and
unified token streams over xDiT's sequence-parallel group (Ulysses and Ring, via its USP attention)
and gathers them back. It has no PipeFusion for Z-Image.

We build that class on the meta device and hand it the resident transformer's own tensors
(`load_state_dict(assign=True)`), so no weights are copied or reloaded. xDiT's process groups are
built on the process group the worker already made, with its backend. xfuser does not import on
a CPU-only torch, so it is imported only when this engine is chosen.

xDiT's attention drops the padding mask. Two kinds of padding would then leak into the picture:
- Padding between the sequences of one batch (guidance with a negative prompt of another length).
  We run such a batch one sequence per forward, so no forward needs a mask.
- Padding of the sequence to a multiple of the ranks. Z-Image pads each stream to a multiple of 32
  tokens, and its split policy (`models/zimage/split.py`) only allows rank counts dividing 32, so
  this never happens.
"""

from __future__ import annotations

import importlib
from functools import partial
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn

from inline_core.device.split import ParallelSpec

WRAPPER = "xfuser.model_executor.models.transformers.transformer_z_image"
DIFFUSERS_ZIMAGE = "diffusers.models.transformers.transformer_z_image"
DISTRIBUTED = "xfuser.core.distributed"
RUNTIME_STATE = "xfuser.core.distributed.runtime_state"


def require_xfuser() -> None:
    """Import xfuser, or say plainly why this rank cannot use it."""
    try:
        importlib.import_module("xfuser")
    except Exception as exc:  # on a CPU-only torch xfuser raises at import ("No Accelerators")
        raise ValueError(
            f"the xfuser engine cannot load here ({type(exc).__name__}: {exc}); it runs on CUDA "
            "ranks with `pip install xfuser`, and cache-dit splits on CPU"
        ) from exc


class XFuserZImage:
    """xDiT's sequence-parallel transformer (`.transformer`) over `dit`'s weights, with xDiT's
    process groups and runtime state set up; the caller puts it in the pipeline's place."""

    name = "xfuser"

    def __init__(self, dit: nn.Module, vae: nn.Module | None, split: ParallelSpec, local_rank: int):
        distributed = cast(Any, importlib.import_module(DISTRIBUTED))
        backend = str(cast(Any, dist).get_backend())
        ulysses, ring = split.degree("ulysses"), split.degree("ring")
        # Registers the existing default group as xDiT's world group (no new rendezvous).
        distributed.init_distributed_environment(local_rank=local_rank, backend=backend)
        distributed.initialize_model_parallel(
            sequence_parallel_degree=ulysses * ring,
            ulysses_degree=ulysses,
            ring_degree=ring,
            backend=backend,
        )
        self.transformer = _wrapped(dit)
        engine_config = _engine_config(ulysses, ring, _dtype(dit))
        # xDiT's runtime state (attention backend, head checks) is read from a diffusers pipeline.
        diffusers = cast(Any, importlib.import_module("diffusers"))
        shell = diffusers.ZImagePipeline(
            scheduler=None,
            vae=vae,
            text_encoder=None,
            tokenizer=None,
            transformer=self.transformer,
        )
        cast(Any, importlib.import_module(RUNTIME_STATE)).initialize_runtime_state(
            shell, engine_config
        )

    def before_job(self, state: Any) -> None:
        # The Z-Image wrapper reads only its process groups per forward: nothing per job.
        return None


def _wrapped(dit: nn.Module) -> nn.Module:
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


def _engine_config(ulysses: int, ring: int, dtype: torch.dtype) -> Any:
    args_class = cast(Any, importlib.import_module("xfuser")).xFuserArgs
    args = args_class(model="Z-Image", ulysses_degree=ulysses, ring_degree=ring)
    engine_config, _input_config = args.create_config()
    engine_config.runtime_config.dtype = dtype
    return engine_config


def _dtype(module: nn.Module) -> torch.dtype:
    return next(module.parameters()).dtype


def _one_length_per_forward(base: Any) -> Any:
    """xDiT's class, running a batch of sequences of unequal padded lengths one by one."""
    block = int(cast(Any, importlib.import_module(DIFFUSERS_ZIMAGE)).SEQ_MULTI_OF)

    class OneLengthPerForward(base):
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
            # Captions pad to whole blocks: sequences that fill the same blocks need no mask.
            shapes = {
                (tuple(i.shape), -(-len(c) // block)) for i, c in zip(x, cap_feats, strict=True)
            }
            if len(shapes) <= 1:
                return xdit_forward(x, t, cap_feats, *args, return_dict=return_dict, **kwargs)
            outputs: list[torch.Tensor] = []
            for n, (item, caption) in enumerate(zip(x, cap_feats, strict=True)):
                alone = xdit_forward(
                    [item], t[n : n + 1], [caption], *args, return_dict=False, **kwargs
                )
                outputs.extend(cast(list[torch.Tensor], alone[0]))
            if not return_dict:
                return (outputs,)
            output_types = cast(Any, importlib.import_module("diffusers.models.modeling_outputs"))
            return output_types.Transformer2DModelOutput(sample=outputs)

    return OneLengthPerForward
