"""ComfyUI's `Flux2Scheduler` off the `bfl/flux-2` node's chain (through `POST /v1/import/comfy`):
a SamplerCustomAdvanced img2img whose sigmas are the low half of a split Flux2Scheduler schedule
imports onto `vae/encode -> sample` (the schedule's `mu` as ComfyUI computes it, the split as a
window of the schedule), nothing said as changing the picture, and renders the graph written by
hand; a Flux2Scheduler sized otherwise than the latent keeps its own size's shift."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from flux2_graphs import Graph, edge
from test_flux2_primitives_import import PROMPT, imported, loaders, of_type

from inline_core.families.flux2.shift import empirical_mu
from tests.server.test_flux2_server import upload
from tests.server.test_qwen_image_import import rendered

Json = dict[str, Any]
STEPS = 4


def img2img(sigmas: Json, split: Json, half: int) -> Json:
    """A 64x64 photo through VAEEncode into SamplerCustomAdvanced on `half` of a split of
    `sigmas` (node 9)."""
    return loaders() | {
        "20": {"class_type": "LoadImage", "inputs": {"image": "photo.png"}},
        "21": {"class_type": "VAEEncode", "inputs": {"pixels": ["20", 0], "vae": ["3", 0]}},
        "7": {"class_type": "RandomNoise", "inputs": {"noise_seed": 7}},
        "8": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "9": sigmas,
        "10": {"class_type": split["class_type"],
               "inputs": {**split["inputs"], "sigmas": ["9", 0]}},
        "6": {"class_type": "BasicGuider", "inputs": {"model": ["1", 0], "conditioning": ["4", 0]}},
        "11": {"class_type": "SamplerCustomAdvanced",
               "inputs": {"noise": ["7", 0], "guider": ["6", 0], "sampler": ["8", 0],
                          "sigmas": ["10", half], "latent_image": ["21", 0]}},
    }  # fmt: skip


def scheduler(side: int) -> Json:
    return {"class_type": "Flux2Scheduler",
            "inputs": {"steps": STEPS, "width": side, "height": side}}  # fmt: skip


def test_a_split_flux2_scheduler_img2img_imports_onto_sample_and_renders_as_written(
    client: TestClient,
) -> None:
    asset = upload(client, 64, 64)
    split = {"class_type": "SplitSigmasDenoise", "inputs": {"denoise": 0.5}}
    body = imported(client, img2img(scheduler(64), split, 1), {"photo.png": asset})
    assert body["family"]["name"] == "flux-2" and body["changesPicture"] == []
    [sample] = of_type(body, "sample")
    params = sample["params"]
    # 64x64 pixels are 16 tokens: ComfyUI's shift for them at 4 steps, the last 2 steps run.
    assert (params["steps"], params["start_step"], params["scheduler"]) == (STEPS, 2, "simple")
    assert params["mu"] == pytest.approx(empirical_mu(16, STEPS))

    # By hand: the same window at the model's own shift, which for this size is ComfyUI's.
    by_hand = Graph()
    photo = by_hand.add("photo", "input/image", {"asset": {"ref": "asset", "id": asset}})
    encode = by_hand.add("encode", "vae/encode", vae=edge("vae", "vae"), image=edge(photo, "image"))
    by_hand.decode(
        by_hand.sample("sample", edge(encode, "latent"), PROMPT, steps=STEPS, start_step=2)
    )
    ours = rendered(client, body["graph"], body["target"])
    assert (ours == rendered(client, by_hand.json(), "decode")).all()


def test_a_flux2_scheduler_sized_otherwise_keeps_its_own_shift(client: TestClient) -> None:
    asset = upload(client, 64, 64)
    split = {"class_type": "SplitSigmas", "inputs": {"step": 1}}
    body = imported(client, img2img(scheduler(128), split, 0), {"photo.png": asset})
    assert body["changesPicture"] == []
    [sample] = of_type(body, "sample")
    params = sample["params"]
    # The high half: the first step, its leftover noise kept; 128x128 pixels are 64 tokens.
    assert (params["end_step"], params["leftover_noise"]) == (1, True)
    assert "start_step" not in params or params["start_step"] == 0
    assert params["mu"] == pytest.approx(empirical_mu(64, STEPS))
    assert params["mu"] != pytest.approx(empirical_mu(16, STEPS))
