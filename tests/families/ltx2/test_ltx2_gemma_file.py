"""ComfyUI's single-file Gemma 3 (`text_encoders/gemma_3_12B_it*.safetensors`): the language
model read from the file's header and mapped keys, the tokenizer from the SentencePiece model it
carries (or a Gemma tokenizer folder beside it). A tiny file renders exactly what the same
weights render as a diffusers folder; its fp8 scales are applied; its `_fp4_mixed` NVFP4
layers (ComfyUI's layout from its code) render as the numbers decoded by hand; a file missing
keys, or packed otherwise, is a 422 naming it, at submit."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import PROMPT, ltx2_rig, node_params, render, take_audio, take_frames

from inline_core.contract.files import StackResolver
from inline_core.diffusion.kit_nvfp4 import quantize_nvfp4
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import ModelMissing
from inline_core.families.ltx2.download import plan
from inline_core.families.ltx2.files import RULES
from inline_core.families.ltx2.gemma_tokenizer import file_tokenizer, piece_types
from inline_core.families.ltx2.kit_fp4 import fp4_mixed_state
from inline_core.families.ltx2.kit_gemma import GEMMA_FILE, GemmaKit, write_gemma_kit
from inline_core.families.ltx2.kit_single_file import FILE, FOLDER
from inline_core.families.ltx2.upscale import upsampler_path
from inline_core.families.ltx2.versions import LTX2
from inline_core.graph.runner import NodeResult
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.nvfp4_files import by_hand

PARAMS: dict[str, Any] = {"guidance": 3.0, "audio_guidance": 5.0, "negative_prompt": "dull"}
SCALED = ("self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj")  # fp8 layers of the test


@pytest.fixture(scope="module")
def gemma_kit(tmp_path_factory: pytest.TempPathFactory) -> GemmaKit:
    return write_gemma_kit(tmp_path_factory.mktemp("ltx2-gemma") / "models")


@pytest.fixture(scope="module")
def from_folder(
    gemma_kit: GemmaKit, ltx2_sampler: StepLoopSampler, tmp_path_factory: pytest.TempPathFactory
) -> NodeResult:
    rig = ltx2_rig(gemma_kit.root, ltx2_sampler)
    return render(rig, tmp_path_factory.mktemp("folder"), model=FOLDER, **PARAMS)


def with_gemma(tmp: Path, kit: GemmaKit, state: dict[str, torch.Tensor]) -> Path:
    """A models folder of the kit's all-in-one file and this Gemma file."""
    root = tmp / "models"
    (root / "checkpoints").mkdir(parents=True)
    shutil.copy(kit.checkpoint, root / "checkpoints" / FILE)
    path = root / "text_encoders" / GEMMA_FILE
    path.parent.mkdir()
    save_safetensors(state, path)
    return root


def assert_same_render(got: NodeResult, want: NodeResult) -> None:
    frames = take_frames(got)
    assert frames.shape == (5, 32, 32, 3) and frames.std() > 1.0
    assert np.array_equal(frames, take_frames(want))
    sound, want_sound = take_audio(got), take_audio(want)
    assert np.array_equal(sound.samples, want_sound.samples)
    assert float(np.abs(sound.samples).max()) > 0.003


def test_the_file_s_tokenizer_reads_text_as_sentencepiece_does(gemma_kit: GemmaKit) -> None:
    """ComfyUI tokenizes with SentencePiece itself; the tokenizer made from the file's model
    gives the same ids (a BOS first), user-defined pieces whole."""
    spm: Any = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_proto=gemma_kit.spiece)
    tokenizer = file_tokenizer(gemma_kit.gemma)
    assert piece_types(gemma_kit.spiece)[:7] == [3, 3, 3, 2, 3, 3, 4]
    for text in (PROMPT, "A cat,  1234 walks!\tü 日本  ", "x<unused0>y", " lead\n\nspace"):
        assert tokenizer(text).input_ids == sp.encode(text, add_bos=True), text
    assert tokenizer.padding_side == "left" and tokenizer.model_max_length == 1024


def test_a_render_with_the_gemma_file_equals_the_render_from_the_folder(
    gemma_kit: GemmaKit, ltx2_sampler: StepLoopSampler, from_folder: NodeResult, tmp_path: Path
) -> None:
    rig = ltx2_rig(gemma_kit.root, ltx2_sampler)
    sources = rig.check("l", node_params(model=FILE, **PARAMS))
    encoder, tokenizer = sources.get("text_encoder"), sources.get("tokenizer")
    assert encoder is not None and encoder.path == gemma_kit.gemma
    assert tokenizer is not None and tokenizer.path == gemma_kit.gemma  # the one inside it
    assert_same_render(render(rig, tmp_path / "file", model=FILE, **PARAMS), from_folder)


def test_a_file_without_a_tokenizer_reads_a_gemma_tokenizer_folder_beside_it(
    gemma_kit: GemmaKit, ltx2_sampler: StepLoopSampler, from_folder: NodeResult, tmp_path: Path
) -> None:
    state = {k: v for k, v in load_safetensors(gemma_kit.gemma).items() if k != "spiece_model"}
    root = with_gemma(tmp_path, gemma_kit, state)
    rig = ltx2_rig(root, ltx2_sampler)
    with pytest.raises(ModelMissing) as caught:  # 9 frames: the VAE unknown, LTX-2's counts
        rig.check("l", node_params(model=FILE, frames=9))
    assert "tokenizer" in caught.value.message and "gemma" in caught.value.message
    shutil.copytree(gemma_kit.folder / "tokenizer", root / "text_encoders" / "gemma-3-tokenizer")
    sources = rig.check("l", node_params(model=FILE, **PARAMS))
    tokenizer = sources.get("tokenizer")
    assert tokenizer is not None and tokenizer.path.name == "gemma-3-tokenizer"
    assert_same_render(render(rig, tmp_path / "file", model=FILE, **PARAMS), from_folder)


def test_an_fp8_scaled_file_renders_as_its_weights_times_their_scales(
    gemma_kit: GemmaKit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """ComfyUI's `_fp8_scaled` naming: fp8 weights, each with a per-tensor `weight_scale`; the
    render equals one from a plain file of the weights multiplied out."""
    state = load_safetensors(gemma_kit.gemma)
    scaled, plain = dict(state), dict(state)
    for key, value in state.items():
        if key.startswith("model.layers.") and key.endswith(tuple(f"{s}.weight" for s in SCALED)):
            scale = value.abs().amax() / 448.0
            stored = (value / scale).to(torch.float8_e4m3fn)
            scaled[key] = stored
            scaled[key.removesuffix("weight") + "weight_scale"] = scale.reshape(())
            plain[key] = stored.to(torch.float32) * scale
    assert any(v.dtype == torch.float8_e4m3fn for v in scaled.values())
    got = render(
        ltx2_rig(with_gemma(tmp_path / "a", gemma_kit, scaled), ltx2_sampler),
        tmp_path / "scaled",
        model=FILE,
        **PARAMS,
    )
    want = render(
        ltx2_rig(with_gemma(tmp_path / "b", gemma_kit, plain), ltx2_sampler),
        tmp_path / "plain",
        model=FILE,
        **PARAMS,
    )
    assert_same_render(got, want)


def test_the_kit_s_nvfp4_quantizer_lands_within_e2m1_s_rounding() -> None:
    """ComfyUI's formulas (comfy-kitchen's eager quantizer): decoded by hand, a weight is back
    within a quarter of its block's largest number (e2m1's widest step, 4 to 6, at the top of
    a block scaled to 6), a block of zeros zeros."""
    weight = torch.randn(32, 64, generator=torch.Generator().manual_seed(6))
    weight[3, 16:32] = 0.0
    packed, scales, second = quantize_nvfp4(weight)
    assert packed.shape == (32, 32) and scales.shape == (128, 4)
    back = by_hand(packed, scales, second)
    assert torch.equal(back[3, 16:32], torch.zeros(16))
    largest = weight.reshape(32, 4, 16).abs().amax(-1, keepdim=True)
    assert bool(((back - weight).reshape(32, 4, 16).abs() <= largest / 4).all())
    assert float((back - weight).abs().mean()) < 0.1 * float(weight.abs().mean())


def test_an_fp4_mixed_file_renders_what_its_numbers_dequantized_by_hand_render(
    gemma_kit: GemmaKit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """ComfyUI's `_fp4_mixed` layout (from its code; no real file here): NVFP4 projections, an
    fp8 one, the rest as written. The render equals one from a plain file of the same numbers
    decoded by hand."""
    mixed = fp4_mixed_state(load_safetensors(gemma_kit.gemma))
    plain: dict[str, torch.Tensor] = {}
    for key, value in mixed.items():
        stem = key.removesuffix(".weight")
        if key.endswith((".weight_scale", ".weight_scale_2", ".comfy_quant")):
            continue
        if value.dtype == torch.uint8 and f"{stem}.weight_scale_2" in mixed:
            value = by_hand(value, mixed[f"{stem}.weight_scale"], mixed[f"{stem}.weight_scale_2"])
        elif value.dtype == torch.float8_e4m3fn:
            value = value.to(torch.float32) * mixed[f"{stem}.weight_scale"]
        plain[key] = value
    assert sum(v.dtype == torch.uint8 for v in mixed.values()) > 8  # codes and markers
    root = with_gemma(tmp_path / "a", gemma_kit, mixed)
    rig = ltx2_rig(root, ltx2_sampler)
    encoder = rig.check("l", node_params(model=FILE, **PARAMS)).get("text_encoder")
    assert encoder is not None and encoder.path == root / "text_encoders" / GEMMA_FILE
    got = render(rig, tmp_path / "fp4", model=FILE, **PARAMS)
    want = render(
        ltx2_rig(with_gemma(tmp_path / "b", gemma_kit, plain), ltx2_sampler),
        tmp_path / "plain",
        model=FILE,
        **PARAMS,
    )
    assert_same_render(got, want)


def _without_down_proj(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in state.items() if k != "model.layers.1.mlp.down_proj.weight"}


def _packed(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A layer packed two numbers a byte, without NVFP4's per-tensor scale."""
    key = "model.layers.0.self_attn.q_proj.weight"
    rows, columns = state[key].shape
    packed = torch.zeros(rows, columns // 2, dtype=torch.uint8)  # two fp4 numbers a byte
    scale = torch.ones(rows, columns // 16).to(torch.float8_e4m3fn)
    return {**state, key: packed, key.removesuffix("weight") + "weight_scale": scale}


def _unblocked(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An NVFP4 layer whose block scales are not in cuBLAS's blocked layout."""
    stem = "model.layers.0.self_attn.q_proj"
    mixed = fp4_mixed_state(state)
    rows, columns = state[f"{stem}.weight"].shape
    unblocked = torch.ones(rows, columns // 16).to(torch.float8_e4m3fn)
    return {**mixed, f"{stem}.weight_scale": unblocked}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_without_down_proj, "lacks model.layers.1.mlp.down_proj.weight"),
        (_packed, "is packed uint8 without NVFP4's per-tensor scale"),
        (_unblocked, "its fp4 layer model.layers.0.self_attn.q_proj is not ComfyUI's NVFP4"),
    ],
    ids=["missing-key", "packed", "nvfp4-unblocked"],
)
def test_a_file_missing_keys_or_packed_otherwise_is_model_missing_at_submit_naming_it(
    gemma_kit: GemmaKit,
    ltx2_sampler: StepLoopSampler,
    tmp_path: Path,
    change: Any,
    said: str,
) -> None:
    root = with_gemma(tmp_path, gemma_kit, change(load_safetensors(gemma_kit.gemma)))
    with pytest.raises(ModelMissing) as caught:
        ltx2_rig(root, ltx2_sampler).check("l", node_params(model=FILE))
    assert str(root / "text_encoders" / GEMMA_FILE) in caught.value.message
    assert said in caught.value.message


def test_the_comfy_download_preset_lands_the_files_the_resolver_reads(
    gemma_kit: GemmaKit, tmp_path: Path
) -> None:
    """`inline-core download --family ltx2 comfy`: the all-in-one file, the Gemma file and the
    upsampler land where they are read from (the kit's files stand in for them: no network)."""
    targets = dict(plan(["comfy"], tmp_path))
    assert targets["text_encoder"].repo_id == "Comfy-Org/ltx-2"
    landing = {
        "checkpoint": gemma_kit.checkpoint,
        "text_encoder": gemma_kit.gemma,
        "upscaler": gemma_kit.upsampler,
    }
    for name, source in landing.items():
        landed = targets[name].destination(tmp_path)
        landed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, landed)
    catalog = Catalog(tmp_path)
    upsampler = upsampler_path({"upscale": True}, None, catalog, "l", LTX2)
    assert upsampler == targets["upscaler"].destination(tmp_path)
    found = StackResolver(RULES, catalog, {}).resolve()
    assert found.sources is not None, found.missing
    gemma = tmp_path / "text_encoders" / "gemma_3_12B_it.safetensors"
    for part in ("text_encoder", "tokenizer"):
        source = found.sources.get(part)
        assert source is not None and source.path == gemma
