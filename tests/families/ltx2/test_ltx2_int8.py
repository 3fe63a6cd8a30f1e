"""ComfyUI's all-in-one LTX-2 file with its transformer's layers in int8, rotated in convrot
groups where the group divides a layer's columns (the layout of ComfyUI's `*_int8_convrot` files,
`diffusion/files/int8.py`): a render equals the render of the same file with those layers
dequantized and rotated back by hand, frames and sound; a layer marked as a format not read here
fails the run naming it."""

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
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import RunFailed
from inline_core.families.ltx2.kit_single_file import FILE, SingleFileKit, write_single_file_kit
from inline_core.graph.runner import NodeResult
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.int8_files import write_dequantized

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


def test_an_int8_convrot_all_in_one_file_renders_like_its_weights_dequantized_by_hand(
    single_file_kit: SingleFileKit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    int8, by_hand = write_int8(single_file_kit, tmp_path)
    stored = load_safetensors(int8)
    rotated = [
        k
        for k, v in stored.items()
        if k.endswith(".comfy_quant") and json.loads(v.numpy().tobytes()).get("convrot")
    ]
    assert len(rotated) > 10
    takes: list[NodeResult] = []
    for name, checkpoint in (("int8", int8), ("by_hand", by_hand)):
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
