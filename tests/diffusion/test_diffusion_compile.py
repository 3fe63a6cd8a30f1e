"""Compiled blocks on the CPU (inductor's C++ backend) on the tiny Z-Image transformer: the same
numbers as eager within float rounding, one set of graphs for 20 sizes and prompt lengths (under
the bound, as health says), hooked blocks run eager, every family's blocks found generically, and
a compile that fails falls back to eager loudly.

One compile for the module (a minute or more on a loaded CPU when inductor's cache is cold)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from torch import nn

from inline_core.device.compile import CompileChoice
from inline_core.diffusion.compile.blocks import listed_blocks, repeated_blocks
from inline_core.diffusion.compile.progress import BOARD
from inline_core.diffusion.compile.regional import compile_blocks, compiled_classes
from inline_core.families.zimage.kit import build_transformer
from tests.worker_groups import XDIST_INDUCTOR

# On the xdist worker of the other module that compiles the same blocks: one cold compile.
pytestmark = pytest.mark.xdist_group(XDIST_INDUCTOR)

CHOICE = CompileChoice(True, "test", recompile_limit=8)
BLOCK = "ZImageTransformerBlock"


def _inputs(
    height: int, width: int, tokens: int
) -> tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(height * 1000 + width * 10 + tokens)
    latents = [torch.randn(16, 1, height, width, generator=generator)]
    prompt = [torch.randn(tokens, 32, generator=generator)]
    return latents, torch.full((1,), 0.4), prompt


def _forward(model: Any, height: int, width: int, tokens: int) -> torch.Tensor:
    with torch.inference_mode():
        return torch.stack(model(*_inputs(height, width, tokens), return_dict=False)[0])


@pytest.fixture(scope="module")
def models() -> Iterator[tuple[Any, Any]]:
    """The tiny transformer eager, and the same weights with compiled blocks."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.fail("inductor's CPU backend needs a C++ compiler (g++ or c++) on PATH")
    eager = build_transformer("tiny")
    compiled = build_transformer("tiny")
    compiled.load_state_dict(eager.state_dict())
    assert compile_blocks(compiled, "tiny Z-Image", CHOICE) == 6  # 2 + 2 refiners, 2 layers
    yield eager, compiled


def test_compiled_equals_eager(models: tuple[Any, Any]) -> None:
    eager, compiled = models
    expected = _forward(eager, 16, 16, 7)
    got = _forward(compiled, 16, 16, 7)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    entries = cast(list[dict[str, Any]], BOARD.to_json()["blocks"])
    blocks = {entry["block"]: entry for entry in entries}
    assert blocks[BLOCK]["state"] == "warm" and blocks[BLOCK]["compiledCalls"] > 0


def test_twenty_sizes_stay_under_the_bound(models: tuple[Any, Any]) -> None:
    eager, compiled = models
    _forward(compiled, 16, 16, 7)  # the graphs exist
    before = BOARD.block(BLOCK, CHOICE.recompile_limit).graphs
    sizes = [(8 + 2 * (i % 7), 8 + 4 * (i % 5), 3 + i) for i in range(20)]
    for height, width, tokens in sizes:
        got = _forward(compiled, height, width, tokens)
        torch.testing.assert_close(
            got, _forward(eager, height, width, tokens), rtol=1e-4, atol=1e-5
        )
    after = BOARD.block(BLOCK, CHOICE.recompile_limit).graphs
    assert after <= CHOICE.recompile_limit
    assert after - before <= 2  # dynamic shapes: new sizes reuse the graphs


def test_a_hook_inside_a_block_runs_it_eager(models: tuple[Any, Any]) -> None:
    eager, compiled = models
    layer = compiled.layers[0].feed_forward
    seen: list[int] = []

    def hook(_module: nn.Module, _args: Any, _out: Any) -> None:
        seen.append(1)

    handle = layer.register_forward_hook(hook)
    try:
        entry = BOARD.block(BLOCK, CHOICE.recompile_limit)
        eager_calls = entry.eager_calls
        got = _forward(compiled, 16, 16, 7)
    finally:
        handle.remove()
    assert seen and entry.eager_calls == eager_calls + 1
    torch.testing.assert_close(got, _forward(eager, 16, 16, 7), rtol=1e-4, atol=1e-5)


class _Plain(nn.Module):
    """A transformer that declares nothing: its blocks are its module lists' members."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.head = nn.Linear(4, 4)


def test_blocks_found_declared_or_listed() -> None:
    model = build_transformer("tiny")
    declared = repeated_blocks(model)
    assert [type(b).__name__ for b in declared] == [BLOCK] * 6
    assert set(map(id, listed_blocks(model))) >= set(map(id, declared))
    plain = _Plain()
    assert repeated_blocks(plain) == list(plain.blocks)


def test_off_compiles_nothing() -> None:
    model = build_transformer("tiny")
    assert compile_blocks(model, "off", CompileChoice(False, "off")) == 0
    assert all("forward" not in vars(block) for block in repeated_blocks(model))


class _GatedBlock(nn.Module):
    """A block of its own class, so its compile is its own (not the tiny transformer's graphs)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.sigmoid(self.linear(x)) * x


class _Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(_GatedBlock() for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def test_a_failed_compile_runs_eager_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A machine whose C++ compiler is missing: inductor's build of the kernels fails for real
    # (its caches off, so nothing compiled before stands in for the build).
    missing = str(tmp_path / "no-such-c++")
    model = _Gated()
    x = torch.randn(3, 8)
    with torch.inference_mode():
        expected = model(x)
    assert compile_blocks(model, "gated", CHOICE) == 2
    settings = {"fx_graph_cache": False, "cpp.cxx": (missing,)}
    with (
        cast(Any, torch)._inductor.config.patch(settings),
        cast(Any, torch)._functorch.config.patch(enable_autograd_cache=False),
        caplog.at_level(logging.WARNING, logger="inline_core.diffusion.compile.regional"),
        torch.inference_mode(),
    ):
        got = model(x)
        again = model(x)  # the class stays eager: no second try at the compile
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(again, expected)
    entry = BOARD.block("_GatedBlock", CHOICE.recompile_limit)
    assert entry.state == "failed" and entry.failure is not None
    assert "InvalidCxxCompiler" in entry.failure and missing in entry.failure, entry.failure
    assert entry.compiled_calls == 0 and entry.eager_calls == 4
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "compiling _GatedBlock failed, its blocks run eager" in warning.getMessage()
    health = {e["block"]: e for e in cast(list[dict[str, Any]], BOARD.to_json()["blocks"])}
    assert health["_GatedBlock"]["state"] == "failed"
    assert health["_GatedBlock"]["error"] == entry.failure
    # What a take rendered through it says (and through a class that compiled fine).
    notes = BOARD.notes(compiled_classes(model))
    assert notes == [{"block": "_GatedBlock", "ran": "eager", "error": entry.failure}]
