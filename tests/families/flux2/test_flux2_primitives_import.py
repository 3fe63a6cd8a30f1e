"""A FLUX.2 klein workflow that does not collapse onto `bfl/flux-2` as written imports onto the
primitives (through `POST /v1/import/comfy`): a KSampler img2img at denoise 0.6 (the node would
run the whole schedule), or the same through SamplerCustomAdvanced, maps onto `vae/encode ->
sample` with its denoise and nothing said as changing the picture, and renders the graph written
by hand; KSamplerAdvanced's windows (which the node has no chain for) map onto `sample`'s."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from flux2_graphs import Graph, edge

from tests.families.import_harness import finished
from tests.server.test_flux2_server import upload
from tests.server.test_qwen_image_import import rendered

Json = dict[str, Any]
MODELS = {
    "flux-2-klein-4b.safetensors": "flux2_klein_tiny.safetensors",
    "qwen_3_4b.safetensors": "flux2_tiny_qwen3",
    "flux2-vae.safetensors": "flux2_tiny_vae.safetensors",
}
PROMPT = "a red fox in the snow"


def loaders() -> Json:
    return {
        "1": {"class_type": "UNETLoader",
              "inputs": {"unet_name": "flux-2-klein-4b.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader",
              "inputs": {"clip_name": "qwen_3_4b.safetensors", "type": "flux2"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "flux2-vae.safetensors"}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": PROMPT, "clip": ["2", 0]}},
        "5": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["2", 0]}},
        "12": {"class_type": "VAEDecode", "inputs": {"samples": ["11", 0], "vae": ["3", 0]}},
        "13": {"class_type": "SaveImage", "inputs": {"images": ["12", 0], "filename_prefix": "f"}},
    }  # fmt: skip


def sampler(cls: str, latent: list[Any], **inputs: Any) -> Json:
    common = {"model": ["1", 0], "positive": ["4", 0], "negative": ["5", 0],
              "latent_image": latent, "cfg": 1.0, "sampler_name": "euler",
              "scheduler": "simple"}  # fmt: skip
    return {"class_type": cls, "inputs": {**common, **inputs}}


def imported(client: TestClient, workflow: Json, assets: Json | None = None) -> Json:
    body = {"workflow": workflow, "models": MODELS, "assets": assets or {}}
    response = client.post("/v1/import/comfy", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def of_type(body: Json, node_type: str) -> list[Json]:
    return [n for n in body["graph"]["nodes"] if n["type"] == node_type]


def custom(latent: list[Any]) -> Json:
    """The same img2img as SamplerCustomAdvanced, its denoise on BasicScheduler."""
    return {
        "7": {"class_type": "RandomNoise", "inputs": {"noise_seed": 7}},
        "8": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "9": {"class_type": "BasicScheduler",
              "inputs": {"model": ["1", 0], "scheduler": "simple", "steps": 3, "denoise": 0.6}},
        "6": {"class_type": "CFGGuider",
              "inputs": {"model": ["1", 0], "positive": ["4", 0], "negative": ["5", 0],
                         "cfg": 1.0}},
        "11": {"class_type": "SamplerCustomAdvanced",
               "inputs": {"noise": ["7", 0], "guider": ["6", 0], "sampler": ["8", 0],
                          "sigmas": ["9", 0], "latent_image": latent}},
    }  # fmt: skip


@pytest.mark.parametrize("kind", ["KSampler", "SamplerCustomAdvanced"])
def test_an_img2img_imports_onto_the_primitives_and_renders_as_written(
    client: TestClient, kind: str
) -> None:
    asset = upload(client, 64, 64)
    workflow = loaders() | {
        "20": {"class_type": "LoadImage", "inputs": {"image": "photo.png"}},
        "21": {"class_type": "VAEEncode", "inputs": {"pixels": ["20", 0], "vae": ["3", 0]}},
    }
    if kind == "KSampler":
        workflow["11"] = sampler("KSampler", ["21", 0], seed=7, steps=3, denoise=0.6)
    else:
        workflow |= custom(["21", 0])
    body = imported(client, workflow, {"photo.png": asset})
    assert body["family"]["name"] == "flux-2" and body["changesPicture"] == []
    [sample] = of_type(body, "sample")
    assert (sample["params"]["denoise"], sample["params"]["steps"]) == (0.6, 3)
    [encoder] = of_type(body, "load/text-encoder")
    assert encoder["params"]["file"] == "flux2_tiny_qwen3"

    by_hand = Graph()
    photo = by_hand.add("photo", "input/image", {"asset": {"ref": "asset", "id": asset}})
    encode = by_hand.add("encode", "vae/encode", vae=edge("vae", "vae"), image=edge(photo, "image"))
    by_hand.decode(by_hand.sample("sample", edge(encode, "latent"), PROMPT, steps=3, denoise=0.6))
    ours = rendered(client, body["graph"], body["target"])
    assert (ours == rendered(client, by_hand.json(), "decode")).all()


def test_ksampler_advanced_windows_import_onto_samples_windows(client: TestClient) -> None:
    workflow = loaders() | {
        "10": {"class_type": "EmptyLatentImage",
               "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "14": sampler("KSamplerAdvanced", ["10", 0], add_noise="enable", noise_seed=7, steps=4,
                      start_at_step=0, end_at_step=2, return_with_leftover_noise="enable"),
        "11": sampler("KSamplerAdvanced", ["14", 0], add_noise="disable", noise_seed=7, steps=4,
                      start_at_step=2, end_at_step=10000, return_with_leftover_noise="disable"),
    }  # fmt: skip
    body = imported(client, workflow)
    assert body["changesPicture"] == []
    windows = sorted(
        (s["params"]["start_step"], s["params"]["end_step"], s["params"]["add_noise"],
         s["params"]["leftover_noise"])
        for s in of_type(body, "sample")
    )  # fmt: skip
    assert windows == [(0, 2, True, True), (2, 10000, False, False)]
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # FLUX.2 runs windows: it validates
    run_id = str(submitted.json()["runId"])
    client.delete(f"/v1/runs/{run_id}")
    finished(client, run_id, seconds=300)
