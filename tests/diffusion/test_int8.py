"""int8 layers as ComfyUI writes them (`int8_tensorwise`, with and without its `convrot` Hadamard
rotation; the layout taken from ComfyUI's and comfy-kitchen's code, not from a real file): the
loader's dequantization equals the numbers decoded by hand, line by line, and gives back the
weight that was quantized; the header reads the weight's shape, and the memory policy counts its
numbers; markers listed in the file's header read as per-layer ones; a layer marked as another
format, unmarked, or with scales or groups of another layout is refused naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from inline_core.diffusion import int8
from inline_core.diffusion.comfy_layers import dequantize_comfy_layers
from inline_core.diffusion.comfy_quant import with_file_markers
from inline_core.diffusion.files.header import read_header
from inline_core.diffusion.files.shapes import weight_shapes
from inline_core.diffusion.files.weights import StoredWeights, stored_weights
from inline_core.diffusion.int8 import dequantize, hadamard
from inline_core.diffusion.kit_int8 import int8_layers, marker, quantize_int8
from inline_core.diffusion.libs import load_safetensors, load_safetensors_view, save_safetensors
from inline_core.errors import RunFailed
from inline_core.models.source import Source
from tests.diffusion.int8_files import dequantize_by_hand, regular_hadamard

ROWS, COLUMNS = 12, 64


def weight(seed: int, rows: int = ROWS, columns: int = COLUMNS) -> torch.Tensor:
    return torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("size", [4, 16, 64, 256])
def test_the_rotation_is_comfy_kitchen_s_regular_hadamard_matrix(size: int) -> None:
    h = hadamard(size)
    assert torch.equal(h, regular_hadamard(size))
    assert torch.equal(h, h.T)  # symmetric: its transpose undoes it
    assert torch.allclose(h @ h.T, torch.eye(size), atol=1e-6)


@pytest.mark.parametrize(
    ("group", "per_row"),
    [(None, False), (None, True), (4, True), (16, True), (64, True)],
    ids=["tensorwise", "rowwise", "convrot-4", "convrot-16", "convrot-64"],
)
def test_the_dequantized_weight_is_the_one_decoded_by_hand(
    group: int | None, per_row: bool
) -> None:
    original = weight(3)
    stored, scale = quantize_int8(original, group=group, per_row=per_row)
    got = dequantize(stored, scale, group, torch.float32)
    want = dequantize_by_hand(stored, scale, marker(group).numpy().tobytes())
    assert got.dtype == torch.float32 and got.shape == (ROWS, COLUMNS)
    assert torch.equal(got, want)
    # And it is the weight that was quantized, to int8's precision: the rotation is undone.
    assert (got - original).abs().max() < 0.02 * original.abs().max()
    if group is not None:
        unrotated = stored.to(torch.float32) * scale
        assert (unrotated - original).abs().max() > 0.5 * original.abs().max()


def test_a_layer_s_scale_and_marker_go_and_its_weight_reads_dequantized() -> None:
    raw = {
        **int8_layers({"l.weight": weight(4), "flat.weight": weight(5, 8, 20)}, group=16),
        "l.bias": torch.zeros(ROWS),
    }
    out = dequantize_comfy_layers(raw, torch.bfloat16)
    assert set(out) == {"l.weight", "flat.weight", "l.bias"}
    assert out["l.weight"].dtype == torch.bfloat16 and out["l.weight"].shape == (ROWS, COLUMNS)
    # 20 columns are no multiple of 16: that layer is written and read unrotated.
    assert json.loads(raw["flat.comfy_quant"].numpy().tobytes()) == {"format": "int8_tensorwise"}
    want = dequantize_by_hand(
        raw["flat.weight"], raw["flat.weight_scale"], raw["flat.comfy_quant"].numpy().tobytes()
    )
    assert torch.equal(out["flat.weight"], want.to(torch.bfloat16))


def test_per_row_scales_stored_flat_read_as_int8_linear_reads_them() -> None:
    stored, scale = quantize_int8(weight(6), group=16, per_row=True)
    flat = dequantize(stored, scale.reshape(-1), 16, torch.float32)
    assert torch.equal(flat, dequantize(stored, scale, 16, torch.float32))


def test_a_large_layer_dequantized_a_few_rows_at_a_time_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for group, per_row in ((16, True), (None, True), (None, False)):
        stored, scale = quantize_int8(weight(10), group=group, per_row=per_row)
        whole = dequantize(stored, scale, group, torch.float32)
        with monkeypatch.context() as patch:
            patch.setattr(int8, "ROWS_AT_ONCE", 5 * COLUMNS)  # 5, 5 and 2 rows
            assert torch.equal(dequantize(stored, scale, group, torch.float32), whole)


def test_the_header_reads_the_weight_s_shape_and_the_policy_counts_its_numbers(
    tmp_path: Path,
) -> None:
    """Dequantized at load, an int8 layer's numbers take the compute dtype's room: they count,
    beside the file's float dtype (bfloat16 here), which they do not change."""
    raw = {
        **int8_layers({"l.weight": weight(7)}, group=64),
        "n.weight": torch.ones(ROWS, dtype=torch.bfloat16),
    }
    path = tmp_path / "int8_convrot.safetensors"
    save_safetensors(raw, path)
    assert weight_shapes(read_header(path)) == {"l.weight": (ROWS, COLUMNS), "n.weight": (ROWS,)}
    assert stored_weights(Source(path)) == StoredWeights("bfloat16", ROWS * COLUMNS + ROWS)


def _marked(**conf: object) -> torch.Tensor:
    return torch.tensor(list(json.dumps(conf).encode()), dtype=torch.uint8)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"l.comfy_quant": None}, "l.weight is int8 without its l.comfy_quant"),
        (
            {"l.comfy_quant": _marked(format="convrot_w4a4", convrot_groupsize=16)},
            "l is quantized as 'convrot_w4a4' (its comfy_quant): a format this server does not",
        ),
        (
            {"l.comfy_quant": _marked(format="nvfp4")},
            "l is stored as int8 but its comfy_quant names format 'nvfp4'",
        ),
        (
            {"l.comfy_quant": _marked(format="int8_tensorwise", convrot=True, convrot_groupsize=8)},
            "l is rotated in groups of 8, not a power of 4",
        ),
        (
            {
                "l.comfy_quant": _marked(
                    format="int8_tensorwise", params={"convrot": True, "convrot_groupsize": 256}
                )
            },
            "l is rotated in groups of 256, which do not divide its 64 columns",
        ),
        (
            {"l.weight_scale": torch.ones(1, COLUMNS)},
            "l.weight_scale is F32 (1, 64), where an int8 layer of 12 rows keeps one float",
        ),
        ({"l.weight_scale": None}, "l.weight_scale is missing"),
    ],
    ids=[
        "unmarked",
        "unread-format",
        "another-format",
        "group-not-power-of-4",
        "group-not-dividing",
        "scale-shape",
        "no-scale",
    ],
)
def test_a_layer_not_in_comfyui_s_int8_layout_is_refused_naming_it(
    change: dict[str, torch.Tensor | None], said: str
) -> None:
    raw: dict[str, torch.Tensor] = int8_layers({"l.weight": weight(8)}, group=16)
    for key, value in change.items():
        if value is None:
            del raw[key]
        else:
            raw[key] = value
    with pytest.raises(RunFailed) as caught:
        dequantize_comfy_layers(raw, torch.float32)
    assert said in caught.value.message


def test_an_fp8_layer_marked_as_a_format_not_read_here_is_refused_naming_it() -> None:
    """ComfyUI's mxfp8 stores fp8 numbers with block scales: named, not taken for per-tensor."""
    raw = {
        "l.weight": weight(9).to(torch.float8_e4m3fn),
        "l.weight_scale": torch.ones(ROWS, COLUMNS // 32, dtype=torch.uint8),
        "l.comfy_quant": _marked(format="mxfp8"),
    }
    with pytest.raises(RunFailed) as caught:
        dequantize_comfy_layers(raw, torch.float32)
    assert "l is quantized as 'mxfp8'" in caught.value.message


def _listed_in_metadata(raw: dict[str, torch.Tensor], prefix: str = "") -> dict[str, str]:
    """The file-level form of `raw`'s markers: `_quantization_metadata`, as ComfyUI reads it."""
    layers = {
        prefix + k.removesuffix(".comfy_quant"): json.loads(v.numpy().tobytes())
        for k, v in raw.items()
        if k.endswith(".comfy_quant")
    }
    return {"_quantization_metadata": json.dumps({"layers": layers})}


def test_markers_listed_in_the_file_s_metadata_read_as_per_layer_ones(tmp_path: Path) -> None:
    """ComfyUI's `_quantization_metadata` header entry (its `convert_old_quants` turns it into
    the per-layer markers), for a whole file and for a checkpoint's view of one part."""
    marked = int8_layers({"l.weight": weight(11), "m.weight": weight(12, 8, 20)}, group=16)
    bare = {k: v for k, v in marked.items() if not k.endswith(".comfy_quant")}
    want = dequantize_comfy_layers(marked, torch.float32)
    path = tmp_path / "listed.safetensors"
    save_safetensors(bare, path, metadata=_listed_in_metadata(marked))
    got = dequantize_comfy_layers(with_file_markers(load_safetensors(path), path), torch.float32)
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    whole = tmp_path / "checkpoint.safetensors"
    other = {"vae.w": torch.ones(2)}
    save_safetensors(
        {**{f"model.{k}": v for k, v in bare.items()}, **other},
        whole,
        metadata=_listed_in_metadata(marked, "model."),
    )
    view = with_file_markers(load_safetensors_view(whole, "model."), whole, "model.")
    got = dequantize_comfy_layers(view, torch.float32)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_a_malformed_metadata_list_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    save_safetensors(
        int8_layers({"l.weight": weight(13)}, group=16),
        path,
        metadata={"_quantization_metadata": json.dumps({"layers": ["l"]})},
    )
    with pytest.raises(RunFailed) as caught:
        with_file_markers(load_safetensors(path), path)
    assert f"{path}: its header's _quantization_metadata has no" in caught.value.message
