"""xDiT (`xfuser`) sequence parallelism for a resident transformer (CUDA ranks).

xDiT splits a model with a transformer class of its own for that model. The family's pipeline
names it (`components.step.SupportsXDiTSplit`): it builds xDiT's class over the resident
transformer's own tensors (no weights are copied or reloaded) and the diffusers pipeline xDiT reads
its runtime state from. Here the generic part: xDiT's process groups, built on the process group
the worker already made with its backend, and its runtime state. xfuser does not import on a
CPU-only torch, so it is imported only when this engine is chosen.
"""

from __future__ import annotations

import importlib
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn

from inline_core.components.step import SupportsXDiTSplit
from inline_core.device.split import ParallelSpec

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


class XFuserSplit:
    """xDiT's sequence-parallel transformer (`.transformer`) over `dit`'s weights, with xDiT's
    process groups and runtime state set up; the caller puts it in the pipeline's place."""

    name = "xfuser"

    def __init__(
        self,
        pipeline: SupportsXDiTSplit,
        dit: nn.Module,
        vae: nn.Module | None,
        split: ParallelSpec,
        local_rank: int,
    ) -> None:
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
        self.transformer = cast(nn.Module, pipeline.xdit_transformer(dit))
        engine_config = _engine_config(pipeline.xdit_model, ulysses, ring, _dtype(dit))
        shell = pipeline.xdit_pipeline(self.transformer, vae)
        cast(Any, importlib.import_module(RUNTIME_STATE)).initialize_runtime_state(
            shell, engine_config
        )

    def before_job(self, state: Any) -> None:
        return None


def _engine_config(model: str, ulysses: int, ring: int, dtype: torch.dtype) -> Any:
    args_class = cast(Any, importlib.import_module("xfuser")).xFuserArgs
    args = args_class(model=model, ulysses_degree=ulysses, ring_degree=ring)
    engine_config, _input_config = args.create_config()
    engine_config.runtime_config.dtype = dtype
    return engine_config


def _dtype(module: nn.Module) -> torch.dtype:
    return next(module.parameters()).dtype
