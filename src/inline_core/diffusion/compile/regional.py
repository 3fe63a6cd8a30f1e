"""Each repeated block of a transformer compiled with `torch.compile`, dynamic shapes, a bounded
number of graphs.

One compiled function per block class, shared by every block of it (dynamo traces a block's
module as an input, so 30 blocks of one class are one graph, not 30), through a backend that
counts and times the compiles (`progress.BOARD`). Only the block's `forward` is compiled: its
own hooks (the cancel check between blocks) still run eager around it. A block with a hook inside
it (a LoRA's per-row hooks on its layers) runs eager, the same numbers; health counts such calls.
New sizes, prompt lengths and batch sizes reuse the dynamic graph; past `recompile_limit` graphs
dynamo runs the block eager for new shape classes instead of compiling without end. A VAE's
decoder blocks compile the same way (`blocks.decoder_blocks`).

A compile that fails (no C++ compiler, an op inductor cannot lower) where the eager forward runs
falls back loudly: a warning in the log, the block class "failed" in health with the error, every
block of it eager from then on, and each take rendered through it says so (`progress.BOARD.notes`
of `compiled_classes`). An error eager raises too is the forward's own, raised as eager raises it.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, cast

import torch
from torch import nn
from torch._dynamo.exc import TorchDynamoException

from inline_core.device.compile import CompileChoice
from inline_core.diffusion.compile.blocks import decoder_blocks, repeated_blocks
from inline_core.diffusion.compile.progress import BOARD, BlockCompiles

log = logging.getLogger(__name__)

_MARK = "_inline_core_compiled_blocks"
_CLASSES = "_inline_core_compiled_classes"
_compiled: dict[type[nn.Module], Callable[..., Any]] = {}
_lock = threading.Lock()


def _has_inner_hooks(block: nn.Module) -> bool:
    for module in block.modules():
        hooks = cast(Any, module)
        if module is not block and (hooks._forward_hooks or hooks._forward_pre_hooks):
            return True
    return False


def _counting_backend(entry: BlockCompiles) -> Callable[..., Any]:
    def backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        from torch._inductor.compile_fx import compile_fx

        entry.compiling += 1
        began = time.perf_counter()
        log.info(
            "compiling %s: graph %d (bound %d)",
            entry.block,
            entry.graphs + 1,
            entry.recompile_limit,
        )
        try:
            return compile_fx(graph, example_inputs)
        finally:
            entry.compiling -= 1
            entry.graphs += 1
            log.info(
                "compiled %s graph %d in %.1f s",
                entry.block,
                entry.graphs,
                time.perf_counter() - began,
            )

    return backend


def _compiled_forward(cls: type[nn.Module], choice: CompileChoice) -> Callable[..., Any]:
    with _lock:
        fn = _compiled.get(cls)
        if fn is None:
            entry = BOARD.block(cls.__name__, choice.recompile_limit)
            forward: Callable[..., Any] = cls.forward
            fn = _compiled[cls] = cast(Any, torch).compile(
                forward, dynamic=choice.dynamic, backend=_counting_backend(entry)
            )
        return fn


class CompiledForward:
    """A block's `forward`: its class's compiled function, or eager with a hook inside."""

    def __init__(
        self, block: nn.Module, compiled: Callable[..., Any], entry: BlockCompiles
    ) -> None:
        self._block = weakref.ref(block)  # no cycle: the block owns this
        self._eager: Callable[..., Any] = type(block).forward
        self._compiled = compiled
        self._entry = entry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        block = self._block()
        assert block is not None, "a freed block was called"
        entry = self._entry
        if entry.failure is not None or _has_inner_hooks(block):
            entry.eager_calls += 1
            return self._eager(block, *args, **kwargs)
        graphs, began = entry.graphs, time.perf_counter()
        try:
            out = self._compiled(block, *args, **kwargs)
        except TorchDynamoException as exc:  # inductor's errors are dynamo's (`InductorError`)
            return self._fall_back(block, exc, args, kwargs)
        if entry.graphs != graphs:  # this call compiled: its time (tracing included) counts
            entry.compile_seconds += time.perf_counter() - began
        entry.compiled_calls += 1
        return out

    def _fall_back(
        self, block: nn.Module, exc: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run the block eager after its compile failed; if eager runs, the class is marked
        failed (loudly) and stays eager; if eager fails too, that error is the forward's own."""
        out = self._eager(block, *args, **kwargs)
        entry = self._entry
        first_line = (str(exc).strip().splitlines() or [""])[0]
        entry.failure = f"{type(exc).__name__}: {first_line}"[:500]
        entry.eager_calls += 1
        log.warning(
            "compiling %s failed, its blocks run eager from now on: %s",
            entry.block,
            entry.failure,
        )
        return out


def compile_blocks(
    model: object,
    name: str,
    choice: CompileChoice,
    find: Callable[[nn.Module], list[nn.Module]] = repeated_blocks,
) -> int:
    """Compile the blocks `find` gives of `model` (its repeated blocks) once, as `choice` says;
    how many blocks run compiled (0: off, not a module, or no blocks)."""
    if not choice.enabled or not isinstance(model, nn.Module):
        return 0
    known = getattr(model, _MARK, None)
    if isinstance(known, int):
        return known
    blocks = find(model)
    torch._dynamo.config.recompile_limit = choice.recompile_limit  # pyright: ignore[reportPrivateUsage]
    for block in blocks:
        cls = type(block)
        entry = BOARD.block(cls.__name__, choice.recompile_limit)
        block.forward = CompiledForward(block, _compiled_forward(cls, choice), entry)
    setattr(model, _MARK, len(blocks))
    setattr(model, _CLASSES, tuple(sorted({type(block).__name__ for block in blocks})))
    if blocks:
        key = id(model)
        BOARD.add_model(key, name, len(blocks))
        weakref.finalize(model, BOARD.remove_model, key)
        log.info(
            "%s: %d blocks run compiled (the first forward of each shape class compiles)",
            name,
            len(blocks),
        )
    return len(blocks)


def compiled_classes(model: object) -> tuple[str, ...]:
    """The names of the block classes of `model` that run compiled (none if it was not)."""
    names = getattr(model, _CLASSES, ())
    return tuple(str(name) for name in cast(tuple[object, ...], names))


def compile_denoisers(
    models: Mapping[str, object], choice: CompileChoice, name: str
) -> tuple[str, ...]:
    """Compile the blocks of every denoiser, by part name (the engine names them: a two-expert
    model's pair too); the block classes that run compiled."""
    for part, model in models.items():
        compile_blocks(model, f"{name} {part}", choice)
    return tuple(sorted({c for model in models.values() for c in compiled_classes(model)}))


def compile_decoders(
    models: Mapping[str, object], choice: CompileChoice, name: str
) -> tuple[str, ...]:
    """Compile the decoder blocks of every VAE, by part name (the engine names them); a VAE
    whose decoder is not compiled (a video one, `blocks.decoder_blocks`) stays eager. The block
    classes that run compiled."""
    for part, model in models.items():
        compile_blocks(model, f"{name} {part} decoder", choice, decoder_blocks)
    return tuple(sorted({c for model in models.values() for c in compiled_classes(model)}))
