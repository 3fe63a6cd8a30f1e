"""Prompts on the tiny kits, and a client of ComfyUI's API in the style of ComfyUI's own examples
(`websocket_api_example.py`): the socket first, then `POST /prompt`, messages until `executing`
with `node: null`, then `/history` and `/view`."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from starlette.testclient import WebSocketTestSession

Json = dict[str, Any]
MODEL = "zimage_tiny.safetensors"
ENCODER = "zimage_tiny_qwen3"
VAE = "zimage_tiny_vae.safetensors"


def zimage_prompt(
    text: str = "a red fox in snow", *, seed: int = 7, steps: int = 2, size: int = 64
) -> Json:
    """ComfyUI's Z-Image default graph (API format) on the kit's files, CPU-sized."""
    return {
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "seed": seed, "steps": steps, "cfg": 1.0, "sampler_name": "euler",
                "scheduler": "simple", "denoise": 1.0, "model": ["11", 0],
                "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["13", 0],
            },
        },
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": text, "clip": ["18", 0]}},
        "7": {"class_type": "ConditioningZeroOut", "inputs": {"conditioning": ["6", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["17", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "z", "images": ["8", 0]}},
        "11": {"class_type": "ModelSamplingAuraFlow", "inputs": {"shift": 3, "model": ["16", 0]}},
        "13": {
            "class_type": "EmptySD3LatentImage",
            "inputs": {"width": size, "height": size, "batch_size": 1},
        },
        "16": {"class_type": "UNETLoader",
               "inputs": {"unet_name": MODEL, "weight_dtype": "default"}},
        "17": {"class_type": "VAELoader", "inputs": {"vae_name": VAE}},
        "18": {"class_type": "CLIPLoader", "inputs": {"clip_name": ENCODER, "type": "lumina2"}},
    }  # fmt: skip


@dataclass
class Received:
    messages: list[Json] = field(default_factory=list[Json])
    frames: list[bytes] = field(default_factory=list[bytes])

    def types(self) -> list[str]:
        return [str(m["type"]) for m in self.messages]

    def of(self, kind: str) -> list[Json]:
        return [cast(Json, m["data"]) for m in self.messages if m["type"] == kind]


def http_json(base: str, path: str, body: Json | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def queue_prompt(base: str, prompt: Json, client_id: str) -> str:
    answer = http_json(base, "/prompt", {"prompt": prompt, "client_id": client_id})
    assert isinstance(answer["number"], int) and answer["node_errors"] == {}
    return str(answer["prompt_id"])


def view(base: str, item: Json) -> tuple[bytes, str]:
    query = urllib.parse.urlencode(
        {"filename": item["filename"], "subfolder": item["subfolder"], "type": item["type"]}
    )
    with urllib.request.urlopen(f"{base}/view?{query}", timeout=60) as response:
        return response.read(), str(response.headers["Content-Type"])


def until_done(ws: WebSocketTestSession, prompt_id: str) -> Received:
    """Every message of the socket until the prompt's `executing` with `node: null`."""
    got = Received()
    while True:
        raw = ws.receive()
        if raw.get("bytes") is not None:
            got.frames.append(cast(bytes, raw["bytes"]))
            continue
        msg = cast(Json, json.loads(cast(str, raw["text"])))
        got.messages.append(msg)
        data = cast(Json, msg["data"])
        if msg["type"] == "executing" and data["node"] is None and data["prompt_id"] == prompt_id:
            return got
