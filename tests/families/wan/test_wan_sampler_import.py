"""ComfyUI's sampler and scheduler names import onto `alibaba/wan`'s `sampler` and `schedule` one
to one: a KSampler's, two KSamplerAdvanced stages', a SamplerCustomAdvanced chain's
(KSamplerSelect, BasicScheduler). A name Wan does not run is a 422 naming it and the closest; two
stages on a multistep sampler list that the node walks on across the switch where ComfyUI starts
the second stage afresh."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_wan_a14b_import import import_comfy as import_a14b
from test_wan_a14b_import import two_stages
from test_wan_import import import_comfy, rendered_alike, small_graph, small_workflow

from inline_core.families.wan.kit import WanKit
from tests.families.import_harness import target_of


@pytest.mark.parametrize(
    ("sampler", "scheduler"),
    [("dpmpp_2m_sde", "karras"), ("euler_ancestral_cfg_pp", "beta"), ("uni_pc_bh2", "normal")],
)
def test_a_ksamplers_names_are_the_nodes_own(
    client: TestClient, sampler: str, scheduler: str
) -> None:
    workflow = small_workflow(None)
    workflow["3"]["inputs"].update(sampler_name=sampler, scheduler=scheduler)
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert (target["params"]["sampler"], target["params"]["schedule"]) == (sampler, scheduler)
    assert body["changesPicture"] == []
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text
    client.delete(f"/v1/runs/{submitted.json()['runId']}")


@pytest.mark.parametrize(
    ("widget", "name", "closest"),
    [("sampler_name", "dpm_fast", "dpm_2"), ("scheduler", "align_your_steps", "simple")],
)
def test_a_name_wan_does_not_run_is_refused_naming_it_and_the_closest(
    client: TestClient, widget: str, name: str, closest: str
) -> None:
    workflow = small_workflow(None)
    workflow["3"]["inputs"][widget] = name
    response = import_comfy(client, workflow)
    assert response.status_code == 422, response.text
    assert repr(name) in response.text and "KSampler 3" in response.text
    assert "the closest offered is" in response.text and "Nothing is swapped" in response.text
    assert closest in response.text


def test_an_imported_non_default_sampler_renders_the_hand_written_graphs_frames(
    client: TestClient,
) -> None:
    workflow = small_workflow(None)
    workflow["3"]["inputs"].update(sampler_name="dpmpp_2m", scheduler="karras")
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    by_hand = small_graph(None, sampler="dpmpp_2m", schedule="karras")
    (take, _by_hand) = rendered_alike(client, response.json(), by_hand)
    assert take["params"]["sampler"] == "dpmpp_2m" and take["params"]["schedule"] == "karras"


def test_a_sampler_custom_advanced_chain_imports_with_its_names(client: TestClient) -> None:
    workflow: dict[str, Any] = small_workflow(None)
    sampler = workflow.pop("3")["inputs"]
    workflow.update(
        {
            "20": {"class_type": "RandomNoise", "inputs": {"noise_seed": 11}},
            "21": {
                "class_type": "CFGGuider",
                "inputs": {
                    "cfg": 3.0,
                    "model": sampler["model"],
                    "positive": sampler["positive"],
                    "negative": sampler["negative"],
                },
            },
            "22": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "heun"}},
            "23": {
                "class_type": "BasicScheduler",
                "inputs": {
                    "scheduler": "exponential",
                    "steps": 3,
                    "denoise": 1.0,
                    "model": sampler["model"],
                },
            },  # fmt: skip
            "3": {
                "class_type": "SamplerCustomAdvanced",
                "inputs": {
                    "noise": ["20", 0],
                    "guider": ["21", 0],
                    "sampler": ["22", 0],
                    "sigmas": ["23", 0],
                    "latent_image": sampler["latent_image"],
                },
            },
        }
    )
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    target, _nodes = target_of(response.json())
    expected = {"sampler": "heun", "schedule": "exponential", "steps": 3, "seed": 11,
                "guidance": 3.0, "shift": 6.0}  # fmt: skip
    assert {k: target["params"][k] for k in expected} == expected


def test_two_stages_on_a_multistep_sampler_list_the_history_carried_across(
    client: TestClient, wan_kit: WanKit
) -> None:
    workflow = two_stages(wan_kit)
    for stage in ("81", "78"):
        workflow[stage]["inputs"]["sampler_name"] = "dpmpp_2m"
    response = import_a14b(client, workflow)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["params"]["sampler"] == "dpmpp_2m"
    (change,) = [c for c in body["changesPicture"] if "afresh" in str(c)]
    assert "dpmpp_2m" in str(change) and "KSamplerAdvanced 78" in str(change)
