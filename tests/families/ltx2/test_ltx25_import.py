"""ComfyUI's LTX-2.5 layout (its templates load Gemma 4 with a CLIPLoader of type `ltxv`):
not read here; the import is a 422 naming the loader and saying what LTX-2.5 renders from. The
2.5 template's sampling (both stages' sigmas, samplers, cfg) maps onto the node's params whole."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_ltx2_import import api_prompt

from tests.families.import_harness import target_of, template

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


def with_ltx25_sampling() -> dict[str, Any]:
    """The 2.0 t2v template's two stages sampling as ComfyUI's 2.5 template does
    (`video_ltx2_5_t2v.json`): its first sampler on ManualSigmas of the distilled sigmas, its
    refining one on "0.85, 0.7250, 0.4219, 0.0", both euler_ancestral, unguided; the 2.0 loaders
    kept (the 2.5 ones are the 422 above)."""
    prompt = api_prompt("video_ltx2_t2v.json", cut=False)
    group = next(i.partition(":")[0] for i in prompt if ":" in i)
    template = read_template("video_ltx2_5_t2v.json")
    prompt[f"{group}:9"] = {"class_type": "ManualSigmas", "inputs": {"sigmas": template["first"]}}
    prompt[f"{group}:73"]["inputs"]["sigmas"] = template["refine"]
    for guider in ("47", "82"):
        prompt[f"{group}:{guider}"]["inputs"]["cfg"] = 1.0
    for select in ("8", "66"):
        prompt[f"{group}:{select}"]["inputs"]["sampler_name"] = template["sampler"]
    return prompt


def read_template(name: str) -> dict[str, str]:
    """The 2.5 template's two ManualSigmas (the first sampler's, the refining one's) and its
    samplers' one name, read from the file itself."""
    nodes = [n for g in template(name)["definitions"]["subgraphs"] for n in g["nodes"]]
    sigmas = [n["widgets_values"][0] for n in nodes if n["type"] == "ManualSigmas"]
    samplers = {n["widgets_values"][0] for n in nodes if n["type"] == "KSamplerSelect"}
    (sampler,) = samplers
    first = next(s for s in sigmas if s.startswith("1.0"))
    (refine,) = [s for s in sigmas if s != first]
    return {"first": first, "refine": refine, "sampler": sampler}


def test_ltx25_s_template_sampling_maps_onto_the_node_with_nothing_lost(
    client: TestClient,
) -> None:
    """Its recipe is written out on the node, so it renders the same whichever version's
    defaults the model has (versions.py)."""
    response = client.post("/v1/import/comfy", json={"workflow": with_ltx25_sampling()})
    assert response.status_code == 200, response.text
    params = target_of(response.json())[0]["params"]
    wanted = read_template("video_ltx2_5_t2v.json")
    assert wanted["refine"] == "0.85, 0.7250, 0.4219, 0.0"
    assert (params["sigmas"], params["refine_sigmas"]) == (wanted["first"], wanted["refine"])
    assert (params["steps"], params["upscale"]) == (8, True)
    assert (params["sampler"], params["refine_sampler"]) == ("euler_ancestral", "euler_ancestral")
    assert (params["guidance"], params["audio_guidance"]) == (1.0, 1.0)
