"""`compute_in`: a module whose linear and embedding weights stay bfloat16 computes in float32
exactly what its float32 copy computes, keeps those weights (no copy), and a deep copy of it (a
fused LoRA copy) computes with its own weights. Its layers cast into one buffer per thread,
reused layer after layer, in inference mode and out of it."""

from __future__ import annotations

import copy
import threading
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.layer_cast import CastEmbedding, CastLinear, cast_scratch, compute_in
from inline_core.diffusion.libs import manual_seed


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.norm = nn.LayerNorm(16)
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.gelu(self.up(self.norm(self.embed(ids)))))


def stored() -> Tiny:
    manual_seed(0)
    return Tiny().to(torch.bfloat16)


def ids(*shape: int) -> torch.Tensor:
    return torch.randint(0, 50, shape, generator=torch.Generator().manual_seed(1))


def test_kept_weights_compute_what_their_float32_copy_computes() -> None:
    kept = stored()
    copied = copy.deepcopy(kept).to(torch.float32)
    kept_weight = kept.up.weight
    compute_in(kept, torch.float32)
    assert isinstance(kept.embed, CastEmbedding) and isinstance(kept.up, CastLinear)
    assert kept.up.weight is kept_weight and kept_weight.dtype == torch.bfloat16
    assert kept.norm.weight.dtype == torch.float32  # a norm's few numbers are cast once
    tokens = ids(3, 7)
    with torch.inference_mode():
        want, got = copied(tokens), kept(tokens)
    assert got.dtype == torch.float32 and torch.equal(got, want)


def test_a_deep_copy_computes_with_its_own_weights() -> None:
    kept = stored()
    compute_in(kept, torch.float32)
    twin = copy.deepcopy(kept)
    with torch.no_grad():
        twin.down.weight.add_(1.0)
    tokens = ids(2, 5)
    with torch.inference_mode():
        assert not torch.equal(twin(tokens), kept(tokens))


def test_casts_on_a_thread_reuse_one_buffer_and_layers_in_a_row_stay_exact() -> None:
    kept = stored()
    copied = copy.deepcopy(kept).to(torch.float32)
    compute_in(kept, torch.float32)
    tokens = ids(2, 6)
    with torch.no_grad():
        up, down = (
            cast_scratch(kept.up.weight, torch.float32),
            cast_scratch(kept.down.weight, torch.float32),
        )
    assert up is not None and down is not None
    assert up.shape == kept.up.weight.shape and down.shape == kept.down.weight.shape
    assert up.data_ptr() == down.data_ptr()  # one buffer, not a new tensor per cast
    with torch.inference_mode():  # a buffer made in inference mode...
        first = kept(tokens)
    with torch.no_grad():  # ...serves out of it too
        again = kept(tokens)
    want = copied(tokens).detach()
    assert torch.equal(first, want) and torch.equal(again, want)


def test_each_thread_casts_into_its_own_buffer() -> None:
    weight = stored().up.weight
    pointers: list[int] = []

    def cast_here() -> None:
        with torch.no_grad():
            scratch = cast_scratch(weight, torch.float32)
        assert scratch is not None
        pointers.append(scratch.data_ptr())

    cast_here()
    other = threading.Thread(target=cast_here)
    other.start()
    other.join()
    assert len(pointers) == 2 and pointers[0] != pointers[1]


def test_a_cast_autograd_records_gets_a_tensor_of_its_own() -> None:
    kept = stored()
    copied = copy.deepcopy(kept).to(torch.float32)
    compute_in(kept, torch.float32)
    assert cast_scratch(kept.up.weight, torch.float32) is None  # gradients on: no sharing
    tokens = ids(2, 4)
    got = kept(tokens)
    assert got.grad_fn is not None and torch.equal(got.detach(), copied(tokens).detach())


def test_a_compiled_layer_leaves_the_thread_buffer_alone() -> None:
    """Dynamo traced the thread's buffer into the graph: guards on that thread's dict, so a render
    on another run-worker thread, or a text encoder growing the buffer between steps, recompiled
    every compiled block. Compiled, a cast gets its own tensor and inductor plans its memory."""
    from torch._dynamo.testing import CompileCounter

    kept = stored()
    copied = copy.deepcopy(kept).to(torch.float32)
    compute_in(kept, torch.float32)
    counter = CompileCounter()
    compile_: Any = cast(Any, torch).compile  # partly untyped in torch's stubs
    compiled = compile_(kept.forward, backend=counter, dynamic=True)
    tokens = ids(2, 6)
    results: list[torch.Tensor] = []

    def render() -> None:
        with torch.inference_mode():
            results.append(compiled(tokens))

    render()
    with torch.no_grad():  # a larger weight cast eager on this thread grows its buffer
        assert cast_scratch(torch.zeros(64, 64, dtype=torch.bfloat16), torch.float32) is not None
    render()
    other = threading.Thread(target=render)
    other.start()
    other.join()
    want = copied(tokens).detach()
    assert len(results) == 3 and all(torch.equal(got, want) for got in results)
    assert counter.frame_count == 1  # one graph, whatever thread or buffer


def test_a_layer_already_in_the_compute_dtype_computes_with_its_own_weight() -> None:
    """A layer computed at load (`ModelFormat.computes_at_load`) keeps its class: its weight is
    used as it is, not copied into the buffer each call."""
    kept = stored()
    compute_in(kept, torch.float32)
    kept.up.to(torch.float32)
    with torch.no_grad():
        assert cast_scratch(kept.up.weight, torch.float32) is None
        assert cast_scratch(kept.down.weight, torch.float32) is not None
