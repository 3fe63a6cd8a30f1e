"""ComfyUI's LTX-2.5 layout (its templates load Gemma 4 with a CLIPLoader of type `ltxv`):
not read here; the import is a 422 naming the loader and saying what LTX-2.5 renders from."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_ltx2_import import api_prompt

# The Gemma 4 file ComfyUI's LTX-2.5 templates load (Comfy-Org/workflow_templates
# templates/video_ltx2_5_t2v.json).
GEMMA_4 = "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors"


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
    ("clip_name", "said", "also"),
    [
        (
            GEMMA_4,
            f"{GEMMA_4!r} is Gemma 4, LTX-2.5's text encoder",
            "`inline-core download --family ltx2 ltx-2.5` fetches it",
        ),
        ("text_encoder_ltx.safetensors", "a CLIPLoader of type 'ltxv'", "diffusers folder"),
    ],
)
def test_ltx25_s_comfy_layout_is_refused_saying_what_it_needs(
    client: TestClient, clip_name: str, said: str, also: str
) -> None:
    body = {"workflow": with_clip_loader(clip_name)}
    response = client.post("/v1/import/comfy", json=body)
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "CLIPLoader" in message and said in message, message
    assert "diffusers folder" in message and also in message, message
