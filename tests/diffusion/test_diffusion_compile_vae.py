"""A VAE's decoder blocks compiled on the CPU (inductor's C++ backend) on the tiny FLUX
autoencoder Z-Image uses: the same pixels as eager within float rounding over several sizes and
a batch, a bounded number of graphs, health naming the blocks; the causal video decoders are not
compiled (their blocks carry a frame cache through their arguments).

One compile for the module (minutes on a loaded CPU when inductor's cache is cold)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any, cast

import pytest
import torch

from inline_core.device.compile import CompileChoice
from inline_core.diffusion.compile.blocks import decoder_blocks
from inline_core.diffusion.compile.progress import BOARD
from inline_core.diffusion.compile.regional import compile_blocks, compile_decoders
from inline_core.diffusion.libs import diffusers
from inline_core.families.wan.kit import VAE_CONFIG as WAN_VAE_CONFIG
from inline_core.families.zimage.kit import build_vae
from tests.worker_groups import XDIST_INDUCTOR

# On the xdist worker of the other modules that compile: no two cold compiles compete for the cores.
pytestmark = pytest.mark.xdist_group(XDIST_INDUCTOR)

CHOICE = CompileChoice(True, "test", recompile_limit=8)
BLOCKS = ("UNetMidBlock2D", "UpDecoderBlock2D")


def _decode(model: Any, batch: int, height: int, width: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(batch * 1000 + height * 10 + width)
    latents = torch.randn(batch, 16, height, width, generator=generator)
    with torch.inference_mode():
        return cast(torch.Tensor, model.decode(latents, return_dict=False)[0])


@pytest.fixture(scope="module")
def models() -> Iterator[tuple[Any, Any]]:
    """The tiny autoencoder eager, and the same weights with compiled decoder blocks."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.fail("inductor's CPU backend needs a C++ compiler (g++ or c++) on PATH")
    eager = build_vae()
    compiled = build_vae()
    compiled.load_state_dict(eager.state_dict())
    assert compile_blocks(compiled, "tiny FLUX VAE decoder", CHOICE, decoder_blocks) == 5
    yield eager, compiled


def _graphs() -> dict[str, int]:
    entries = cast(list[dict[str, Any]], BOARD.to_json()["blocks"])
    return {e["block"]: e["graphs"] for e in entries if e["block"] in BLOCKS}


def test_compiled_decode_equals_eager_across_sizes_under_the_bound(
    models: tuple[Any, Any],
) -> None:
    eager, compiled = models
    # A square and an oblong size first: dynamo gives equal sides one symbol until it sees
    # them differ, then one graph holds every size.
    for batch, height, width in ((1, 8, 8), (1, 8, 12)):
        got = _decode(compiled, batch, height, width)
        torch.testing.assert_close(got, _decode(eager, batch, height, width), rtol=1e-4, atol=1e-4)
    warm = _graphs()
    assert set(warm) == set(BLOCKS)
    for batch, height, width in ((1, 16, 8), (1, 10, 14), (1, 12, 12), (1, 6, 20)):
        got = _decode(compiled, batch, height, width)
        torch.testing.assert_close(got, _decode(eager, batch, height, width), rtol=1e-4, atol=1e-4)
    assert _graphs() == warm  # new sizes reuse the graphs
    got = _decode(compiled, 2, 8, 12)  # a batch: at most one more graph a block class
    torch.testing.assert_close(got, _decode(eager, 2, 8, 12), rtol=1e-4, atol=1e-4)
    after = _graphs()
    assert all(after[b] <= CHOICE.recompile_limit for b in BLOCKS)
    entries = cast(list[dict[str, Any]], BOARD.to_json()["blocks"])
    assert all(
        e["state"] == "warm" and e["compiledCalls"] > 0 for e in entries if e["block"] in BLOCKS
    )


def test_video_decoders_stay_eager() -> None:
    wan = diffusers().AutoencoderKLWan(**WAN_VAE_CONFIG).eval()
    assert decoder_blocks(wan) == []
    compile_decoders({"vae": wan}, CHOICE, "tiny Wan")
    assert all("forward" not in vars(module) for module in wan.modules())


def test_off_compiles_no_decoder() -> None:
    vae = build_vae()
    compile_decoders({"vae": vae}, CompileChoice(False, "off"), "off")
    assert all("forward" not in vars(block) for block in decoder_blocks(vae))
