"""NVFP4 layers as ComfyUI writes them (the layout taken from ComfyUI's and comfy-kitchen's code,
not from a real file): the shared loader's dequantization equals the numbers decoded by hand,
element by element, for sides that pad the blocked scales; the header reads the dequantized
shape, and the memory policy counts its numbers; a layer marked as another format, or with
scales of another layout, is refused naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from inline_core.diffusion.files.header import TensorInfo
from inline_core.diffusion.files.shapes import weight_shapes
from inline_core.diffusion.files.weights import StoredWeights, stored_weights
from inline_core.diffusion.libs import save_safetensors
from inline_core.diffusion.nvfp4 import dequantize, dequantize_layers
from inline_core.errors import RunFailed
from inline_core.models.source import Source
from tests.diffusion.nvfp4_files import blocked, by_hand

ROWS, COLUMNS = 144, 96  # two tiles of rows, 6 blocks a row: both sides of the scales padded


def marker(name: str) -> torch.Tensor:
    """ComfyUI's `comfy_quant`: JSON bytes naming the layer's format."""
    return torch.tensor(list(json.dumps({"format": name}).encode()), dtype=torch.uint8)


def random_layer(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    packed = torch.randint(0, 256, (ROWS, COLUMNS // 2), generator=g, dtype=torch.uint8)
    scales = (torch.rand(ROWS, COLUMNS // 16, generator=g) * 4 + 0.01).to(torch.float8_e4m3fn)
    return packed, blocked(scales), torch.tensor(0.0173, dtype=torch.float32)


def test_the_dequantized_weight_is_the_one_decoded_by_hand() -> None:
    packed, scales, second = random_layer(3)
    got = dequantize(packed, scales, second, torch.float32)
    want = by_hand(packed, scales, second)
    assert got.shape == (ROWS, COLUMNS) and got.dtype == torch.float32
    assert torch.equal(got, want)
    assert got.abs().max() > 0 and (got < 0).any()


def test_a_layer_s_scales_and_marker_go_and_its_weight_reads_dequantized() -> None:
    packed, scales, second = random_layer(4)
    raw = {
        "l.weight": packed,
        "l.weight_scale": scales,
        "l.weight_scale_2": second,
        "l.comfy_quant": marker("nvfp4"),
        "l.input_scale": torch.tensor(1.0),
        "l.bias": torch.zeros(ROWS),
    }
    out = dequantize_layers(raw, torch.bfloat16)
    assert set(out) == {"l.weight", "l.bias"}
    assert out["l.weight"].dtype == torch.bfloat16 and out["l.weight"].shape == (ROWS, COLUMNS)
    header = {k: TensorInfo(_name(v), tuple(v.shape)) for k, v in raw.items()}
    assert weight_shapes(header) == {"l.weight": (ROWS, COLUMNS), "l.bias": (ROWS,)}


def test_the_memory_policy_counts_an_nvfp4_layer_s_numbers(tmp_path: Path) -> None:
    """Dequantized at load, its numbers take the compute dtype's room: they count, beside the
    file's float dtype (bfloat16 here), which they do not change."""
    packed, scales, second = random_layer(7)
    raw = {
        "l.weight": packed,
        "l.weight_scale": scales,
        "l.weight_scale_2": second,
        "n.weight": torch.ones(ROWS, dtype=torch.bfloat16),
    }
    path = tmp_path / "mixed.safetensors"
    save_safetensors(raw, path)
    assert stored_weights(Source(path)) == StoredWeights("bfloat16", ROWS * COLUMNS + ROWS)


def _name(tensor: torch.Tensor) -> str:
    names = {torch.uint8: "U8", torch.float8_e4m3fn: "F8_E4M3", torch.float32: "F32"}
    return names[tensor.dtype]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"l.comfy_quant": marker("mxfp8")}, "names format 'mxfp8'"),
        (
            {"l.weight_scale": torch.ones(ROWS, COLUMNS // 16).to(torch.float8_e4m3fn)},
            "l.weight_scale is F8_E4M3 (144, 6), where NVFP4 keeps F8_E4M3 (256, 8)",
        ),
        (
            {"l.weight": torch.zeros(ROWS, COLUMNS, dtype=torch.bfloat16)},
            "l.weight_scale_2 is an NVFP4 scale, but its layer's weight is not packed fp4",
        ),
    ],
    ids=["another-format", "unblocked-scales", "unpacked-weight"],
)
def test_a_layer_not_in_comfyui_s_nvfp4_layout_is_refused_naming_it(
    change: dict[str, torch.Tensor], said: str
) -> None:
    packed, scales, second = random_layer(5)
    raw = {"l.weight": packed, "l.weight_scale": scales, "l.weight_scale_2": second, **change}
    with pytest.raises(RunFailed) as caught:
        dequantize_layers(raw, torch.float32)
    assert said in caught.value.message
