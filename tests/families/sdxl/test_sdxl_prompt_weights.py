"""Prompts as ComfyUI's CLIPTextEncode reads them: the weight syntax, the 77-token windows, and
the weighting formula on both of SDXL's encoders, checked against the encoders run directly."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inline_core.diffusion.encoders.clip_prompt import ClipConditioning, ClipPromptEncoder
from inline_core.diffusion.encoders.weighted_prompt import parse_weights, windows
from inline_core.families.sdxl.kit import SDXLKit


def test_weights_parse_as_comfyui_reads_them() -> None:
    assert parse_weights("a (cat:1.3) on a mat") == [("a ", 1.0), ("cat", 1.3), (" on a mat", 1.0)]
    assert parse_weights("(red) ((blue)) (green:0.5)") == [
        ("red", 1.1),
        (" ", 1.0),
        ("blue", pytest.approx(1.21)),
        (" ", 1.0),
        ("green", 0.5),
    ]
    # Nested: the inner weight is set, then multiplied by nothing else; escapes are literal.
    assert parse_weights("((dog:1.5) x)") == [("dog", 1.5), (" x", 1.1)]
    assert parse_weights(r"a \(b\) c") == [("a (b) c", 1.0)]
    # Square brackets are plain text in ComfyUI (A1111's de-emphasis is not its syntax).
    assert parse_weights("[word]") == [("[word]", 1.0)]
    # A colon that is not followed by a number is text, the group's weight 1.1.
    assert parse_weights("(a:b)") == [("a:b", 1.1)]


def _ids(window: list[tuple[int, float]]) -> list[int]:
    return [t for t, _w in window]


def test_pieces_fill_77_token_windows_as_comfyui_lays_them() -> None:
    start, end, pad = 1000, 1001, 0
    # A long piece (8 tokens or more) is cut at the window's end.
    long = [[(i, 1.0) for i in range(2, 102)]]
    first, second = windows(long, start, end, pad)
    assert len(first) == len(second) == 77
    assert _ids(first) == [start, *range(2, 77), end]
    assert _ids(second)[:27] == [start, *range(77, 102), end] and set(_ids(second)[27:]) == {pad}
    # A short piece that does not fit moves whole to the next window.
    pieces = [[(5, 1.0)] * 70, [(6, 2.0)] * 7]
    first, second = windows(pieces, start, end, pad)
    assert _ids(first)[71:] == [end] + [pad] * 5
    assert second[1:8] == [(6, 2.0)] * 7 and second[8] == (end, 1.0)
    # Nothing: one window, start and end.
    (only,) = windows([], start, end, pad)
    assert _ids(only)[:2] == [start, end]


@pytest.fixture(scope="module")
def encoder(sdxl_kit: SDXLKit) -> ClipPromptEncoder:
    from inline_core.contract.builder import Parts
    from inline_core.device.policy import Placement
    from inline_core.diffusion.placement import OffloadSwap
    from inline_core.families.sdxl.build import BUILDER
    from inline_core.models.source import Source

    assert sdxl_kit.checkpoint is not None and sdxl_kit.tokenizer_dir is not None
    place = Placement("cpu", "float32")
    values: dict[str, Any] = {
        "text_encoder": BUILDER.load(
            "text_encoder", Source(sdxl_kit.checkpoint, view="conditioner.embedders.0."), place
        ),
        "text_encoder_2": BUILDER.load(
            "text_encoder_2", Source(sdxl_kit.checkpoint, view="conditioner.embedders.1."), place
        ),
        "tokenizer": BUILDER.load("tokenizer", Source(sdxl_kit.tokenizer_dir), None),
    }
    parts = Parts(values, {"text_encoder": place}, OffloadSwap())
    return BUILDER.text_encoder(parts)


def _direct(model: Any, ids: list[list[int]], layer: int) -> torch.Tensor:
    with torch.inference_mode():
        out = model(torch.tensor(ids), output_hidden_states=True)
    return out.hidden_states[layer]


def test_a_weight_moves_the_tokens_from_the_empty_prompt_by_comfyuis_formula(
    encoder: ClipPromptEncoder,
) -> None:
    prompt = "a (cat:1.3) and a (dog:0.6)"
    value = encoder.encode_at(prompt, -2).value
    assert isinstance(value, ClipConditioning)
    widths: list[torch.Tensor] = []
    for tower in encoder.towers:
        (window,) = encoder.windows(prompt, tower)
        ids = [t for t, _w in window]
        pad = encoder.end if tower.pad is None else tower.pad
        empty_ids = [encoder.start, encoder.end] + [pad] * 75
        states = _direct(tower.model, [ids, empty_ids], -2)
        z, empty = states[0], states[1]
        weights = torch.tensor([w for _t, w in window]).unsqueeze(-1)
        assert {w for _t, w in window} == {1.0, 1.3, 0.6}
        expected = torch.where(weights != 1.0, (z - empty) * weights + empty, z)
        widths.append(expected)
    torch.testing.assert_close(value.hidden[0], torch.cat(widths, dim=-1), rtol=1e-5, atol=1e-5)
    # Unweighted, nothing is moved: the states are the prompt's own.
    plain = encoder.encode_at("a cat and a dog", -2).value
    assert isinstance(plain, ClipConditioning)
    tower = encoder.towers[0]
    (window,) = encoder.windows("a cat and a dog", tower)
    direct = _direct(tower.model, [[t for t, _w in window]], -2)[0]
    width = direct.shape[-1]
    torch.testing.assert_close(plain.hidden[0, :, :width], direct, rtol=0, atol=0)


def test_a_long_prompt_is_encoded_window_by_window(encoder: ClipPromptEncoder) -> None:
    words = " ".join(["lighthouse"] * 12)  # 11 bytes a word: about 130 tokens
    value = encoder.encode_at(words, -2).value
    assert isinstance(value, ClipConditioning)
    windows_l = encoder.windows(words, encoder.towers[0])
    assert len(windows_l) == 2
    assert value.hidden.shape[:2] == (1, 154)
    assert value.pooled is not None and value.pooled.shape == (1, 64)
    # The second window is encoded on its own (start, its tokens, end): equal to encoding it alone.
    tower = encoder.towers[0]
    second = _direct(tower.model, [[t for t, _w in windows_l[1]]], -2)[0]
    torch.testing.assert_close(
        value.hidden[0, 77:, : second.shape[-1]], second, atol=1e-5, rtol=1e-5
    )


def test_clip_skip_picks_the_layer(encoder: ClipPromptEncoder) -> None:
    last = encoder.encode_at("a cat", -1).value
    third = encoder.encode_at("a cat", -3).value
    assert isinstance(last, ClipConditioning) and isinstance(third, ClipConditioning)
    tower = encoder.towers[1]
    (window,) = encoder.windows("a cat", tower)
    ids = [[t for t, _w in window]]
    width = _direct(encoder.towers[0].model, ids, -1).shape[-1]
    torch.testing.assert_close(last.hidden[0, :, width:], _direct(tower.model, ids, -1)[0])
    torch.testing.assert_close(third.hidden[0, :, width:], _direct(tower.model, ids, -3)[0])
    # Past the first layer: the last layer's states after the final norm, as ComfyUI reads it.
    with pytest.raises(ValueError, match="must be negative"):
        encoder.encode_at("a cat", 0)
