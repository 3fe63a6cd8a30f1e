"""ComfyUI's all-in-one LTX-2 file with its transformer's layers quantized as ComfyUI writes
them: in int8, rotated in convrot groups where the group divides a layer's columns (its
`*_int8_convrot` files, `diffusion/files/int8.py`), or in NVFP4 where both sides are multiples of
16 and fp8 with a per-tensor scale elsewhere (its `*_fp4_mixed` ones). A render equals the render
of the same file with those layers dequantized by hand, frames and sound; a layer marked as a
format not read here fails the run naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from ltx2_harness import ltx2_rig, render, take_audio, take_frames

from inline_core.diffusion.files.header import read_metadata
from inline_core.diffusion.kit_int8 import int8_layers
from inline_core.diffusion.kit_nvfp4 import E4M3_MAX, marker, quantize_nvfp4
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import RunFailed
from inline_core.families.ltx2.kit_single_file import FILE, SingleFileKit, write_single_file_kit
from inline_core.graph.runner import NodeResult
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.int8_files import write_dequantized
from tests.diffusion.nvfp4_files import by_hand as nvfp4_by_hand

GROUP = 16
TRANSFORMER = "model.diffusion_model."


@pytest.fixture(scope="module")
def single_file_kit(tmp_path_factory: pytest.TempPathFactory) -> SingleFileKit:
    return write_single_file_kit(tmp_path_factory.mktemp("ltx2-int8") / "models")


def models_with(kit: SingleFileKit, root: Path, checkpoint: Path) -> Path:
    """The kit's Gemma beside `checkpoint` as its all-in-one file."""
    shutil.copytree(kit.encoder, root / "text_encoders" / kit.encoder.name)
    (root / "checkpoints").mkdir(parents=True)
    shutil.copy(checkpoint, root / "checkpoints" / FILE)
    return root


def write_int8(kit: SingleFileKit, tmp_path: Path) -> tuple[Path, Path]:
    """(the kit's file with its transformer's layers in int8 convrot, the same numbers
    dequantized by hand), both with the file's header config."""
    state = load_safetensors(kit.file)
    metadata = read_metadata(kit.file)
    transformer = {k: v for k, v in state.items() if k.startswith(TRANSFORMER)}
    rest = {k: v for k, v in state.items() if not k.startswith(TRANSFORMER)}
    int8, by_hand = tmp_path / "int8.safetensors", tmp_path / "by_hand.safetensors"
    save_safetensors({**int8_layers(transformer, group=GROUP), **rest}, int8, metadata)
    write_dequantized(int8, by_hand, torch.float32)
    save_safetensors(load_safetensors(by_hand), by_hand, metadata)
    return int8, by_hand


def write_mixed(kit: SingleFileKit, tmp_path: Path) -> tuple[Path, Path]:
    """(the kit's file with its transformer's layers in NVFP4 or scaled fp8, the same numbers
    decoded by hand), both with the file's header config."""
    state = load_safetensors(kit.file)
    metadata = read_metadata(kit.file)
    stored, upcast = dict(state), dict(state)
    for key, value in state.items():
        if not key.startswith(TRANSFORMER) or not key.endswith(".weight") or value.ndim != 2:
            continue
        layer = key.removesuffix(".weight")
        if value.shape[0] % 16 == 0 and value.shape[1] % 16 == 0:
            packed, blocks, second = quantize_nvfp4(value)
            stored.update({key: packed, f"{layer}.weight_scale": blocks})
            stored.update(
                {f"{layer}.weight_scale_2": second, f"{layer}.comfy_quant": marker("nvfp4")}
            )
            upcast[key] = nvfp4_by_hand(packed, blocks, second)
        else:
            scale = value.abs().amax().to(torch.float32) / E4M3_MAX
            low = (value / scale).to(torch.float8_e4m3fn)
            stored.update({key: low, f"{layer}.weight_scale": scale.reshape(())})
            stored[f"{layer}.comfy_quant"] = marker("float8_e4m3fn")
            upcast[key] = low.to(torch.float32) * scale
    mixed, by_hand = tmp_path / "mixed.safetensors", tmp_path / "by_hand.safetensors"
    save_safetensors(stored, mixed, metadata)
    save_safetensors(upcast, by_hand, metadata)
    return mixed, by_hand


@pytest.mark.parametrize("layout", ["int8_convrot", "fp4_mixed"])
def test_a_quantized_all_in_one_file_renders_like_its_weights_dequantized_by_hand(
    single_file_kit: SingleFileKit, ltx2_sampler: StepLoopSampler, tmp_path: Path, layout: str
) -> None:
    write = write_int8 if layout == "int8_convrot" else write_mixed
    quantized, by_hand = write(single_file_kit, tmp_path)
    markers = [
        json.loads(v.numpy().tobytes())
        for k, v in load_safetensors(quantized).items()
        if k.endswith(".comfy_quant")
    ]
    wanted = ("convrot",) if layout == "int8_convrot" else ("nvfp4", "float8_e4m3fn")
    for name in wanted:  # each kind of layer is there
        assert any(m.get(name) or m["format"] == name for m in markers), name
    takes: list[NodeResult] = []
    for name, checkpoint in (("quantized", quantized), ("by_hand", by_hand)):
        rig = ltx2_rig(models_with(single_file_kit, tmp_path / name, checkpoint), ltx2_sampler)
        takes.append(render(rig, tmp_path / f"takes-{name}", model=FILE, guidance=3.0))
    frames, want = take_frames(takes[0]), take_frames(takes[1])
    assert frames.std() > 1.0 and np.array_equal(frames, want)
    sound, want_sound = take_audio(takes[0]), take_audio(takes[1])
    assert np.array_equal(sound.samples, want_sound.samples)


def test_a_layer_of_a_format_not_read_here_fails_the_run_naming_it(
    single_file_kit: SingleFileKit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    int8, _ = write_int8(single_file_kit, tmp_path)
    state = load_safetensors(int8)
    marker = next(k for k in state if k.startswith(TRANSFORMER) and k.endswith(".comfy_quant"))
    state[marker] = torch.tensor(list(b'{"format": "convrot_w4a4"}'), dtype=torch.uint8)
    save_safetensors(state, int8, read_metadata(single_file_kit.file))
    rig = ltx2_rig(models_with(single_file_kit, tmp_path / "models", int8), ltx2_sampler)
    with pytest.raises(RunFailed) as caught:
        render(rig, tmp_path / "takes", model=FILE)
    layer = marker.removesuffix(".comfy_quant")
    assert f"{layer} is quantized as 'convrot_w4a4'" in caught.value.message
