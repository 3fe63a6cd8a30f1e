"""A ComfyUI prompt built with custom sampling (SamplerCustomAdvanced and the nodes feeding it)
is accepted by `POST /prompt` and renders, as the importer maps it onto `sample`."""

from __future__ import annotations

from comfy_support import Json, until_done, zimage_prompt
from fastapi.testclient import TestClient


def custom_sampling_prompt() -> Json:
    prompt = zimage_prompt(seed=12)
    prompt["3"] = {
        "class_type": "SamplerCustomAdvanced",
        "inputs": {
            "noise": ["30", 0],
            "guider": ["31", 0],
            "sampler": ["32", 0],
            "sigmas": ["33", 0],
            "latent_image": ["13", 0],
        },
    }
    prompt["30"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": 12}}
    prompt["31"] = {
        "class_type": "BasicGuider",
        "inputs": {"model": ["11", 0], "conditioning": ["6", 0]},
    }
    prompt["32"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "uni_pc"}}
    prompt["33"] = {
        "class_type": "BasicScheduler",
        "inputs": {"model": ["11", 0], "scheduler": "karras", "steps": 2, "denoise": 1.0},
    }
    return prompt


def test_a_custom_sampling_prompt_is_accepted_and_renders(client: TestClient) -> None:
    with client.websocket_connect("/ws?clientId=custom-1") as ws:
        ws.receive_json()  # the status it greets with
        posted = {"prompt": custom_sampling_prompt(), "client_id": "custom-1"}
        answer = client.post("/prompt", json=posted)
        assert answer.status_code == 200, answer.text
        assert answer.json()["node_errors"] == {}
        prompt_id = answer.json()["prompt_id"]
        got = until_done(ws, prompt_id)
    assert "execution_success" in got.types()
    (executed,) = got.of("executed")
    assert executed["node"] == "9"
