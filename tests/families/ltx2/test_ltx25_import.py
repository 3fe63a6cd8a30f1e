"""ComfyUI's LTX-2.5 layout (its templates load Gemma 4 with a CLIPLoader of type `ltxv`):
not read here; the import is a 422 naming the loader and saying what LTX-2.5 renders from."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_ltx2_import import api_prompt

GEMMA_4 = "gemma_4_12B_it_fp8_scaled.safetensors"


def with_clip_loader(clip_name: str) -> dict[str, Any]:
    """The t2v template, its LTXAVTextEncoderLoader swapped for a CLIPLoader of type ltxv."""
    prompt = api_prompt("video_ltx2_t2v.json")
    loader = next(i for i, n in prompt.items() if n["class_type"] == "LTXAVTextEncoderLoader")
    prompt[loader] = {
        "class_type": "CLIPLoader",
        "inputs": {"clip_name": clip_name, "type": "ltxv", "device": "default"},
    }
    return prompt


@pytest.mark.parametrize(
    ("clip_name", "said"),
    [
        (GEMMA_4, f"{GEMMA_4!r} is Gemma 4, LTX-2.5's text encoder"),
        ("text_encoder_ltx.safetensors", "a CLIPLoader of type 'ltxv'"),
    ],
)
def test_ltx25_s_comfy_layout_is_refused_saying_what_it_needs(
    client: TestClient, clip_name: str, said: str
) -> None:
    body = {"workflow": with_clip_loader(clip_name)}
    response = client.post("/v1/import/comfy", json=body)
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "CLIPLoader" in message and said in message, message
    assert "diffusers folder" in message, message
