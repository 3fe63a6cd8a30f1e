"""SDXL Turbo's template imports onto `stability/sdxl`: SamplerCustom with KSamplerSelect's
euler_ancestral and SDTurboScheduler's one step at cfg 1 become the node's sampler, `sgm_uniform`
at one step (the very sigmas SDTurboScheduler picks) and guidance 1, and the imported chain
renders the graph written by hand. What no schedule here walks (more Turbo steps, a denoise) and
samplers not offered are refused naming the node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_sdxl_import import by_hand, default_graph, rendered

from inline_core.diffusion.sigma.schedules import schedule_sigmas
from inline_core.families.sdxl.comfy_custom import turbo_timesteps
from inline_core.families.sdxl.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.families.sdxl.schedule import discrete_sampling
from tests.families.import_harness import import_comfy, target_of, template

TURBO = "sd_xl_turbo_1.0_fp16.safetensors"


def turbo_graph(checkpoint: str, steps: int = 1, denoise: float = 1.0) -> dict[str, Any]:
    """The Turbo template's chain in the API format, at a size a CPU test renders."""
    graph = default_graph(checkpoint)
    del graph["3"]
    graph["14"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler_ancestral"}}
    graph["22"] = {
        "class_type": "SDTurboScheduler",
        "inputs": {"steps": steps, "denoise": denoise, "model": ["4", 0]},
    }
    graph["13"] = {"class_type": "SamplerCustom",
                   "inputs": {"add_noise": True, "noise_seed": 9, "cfg": 1.0, "model": ["4", 0],
                              "positive": ["6", 0], "negative": ["7", 0], "sampler": ["14", 0],
                              "sigmas": ["22", 0], "latent_image": ["5", 0]}}  # fmt: skip
    graph["8"]["inputs"]["samples"] = ["13", 0]
    return graph


def test_sd_turbo_schedulers_one_step_is_sgm_uniforms_one_step() -> None:
    """The mapping's ground: SDTurboScheduler's sigma at one step, denoise 1 (training timestep
    999, then 0), equals `sgm_uniform`'s at one step on SDXL's noise table."""
    sampling = discrete_sampling(DEFAULT_SCHEDULER_CONFIG)
    (timestep,) = turbo_timesteps(1, 1.0)
    assert timestep == 999
    ours = schedule_sigmas("sgm_uniform", sampling, 1)
    assert ours == pytest.approx([sampling.sigma(float(timestep)), 0.0], rel=1e-6)
    assert turbo_timesteps(2, 1.0) == [999, 899]  # two steps: no schedule here walks these


def test_the_turbo_template_imports_exactly(client: TestClient, sdxl_kit: SDXLKit) -> None:
    response = import_comfy(
        client, template("sdxlturbo_example.json"), {TURBO: sdxl_kit.checkpoint_name}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["type"] == "stability/sdxl"
    expected = {"model": sdxl_kit.checkpoint_name, "width": 512, "height": 512, "steps": 1,
                "guidance": 1.0, "sampler": "euler_ancestral", "schedule": "sgm_uniform",
                "seed": 0}  # fmt: skip
    assert {k: target["params"][k] for k in expected} == expected
    assert body["changesPicture"] == []


def test_the_turbo_chain_renders_what_the_graph_by_hand_renders(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    response = import_comfy(client, turbo_graph(TURBO), {TURBO: sdxl_kit.checkpoint_name})
    assert response.status_code == 200, response.text
    body = response.json()
    imported, _take = rendered(client, body["graph"], body["target"])
    hand = by_hand(sdxl_kit)
    hand["nodes"][-1]["params"] |= {"steps": 1, "guidance": 1.0, "sampler": "euler_ancestral",
                                    "schedule": "sgm_uniform"}  # fmt: skip
    by_hand_pixels, _ = rendered(client, hand, "w")
    assert np.array_equal(imported, by_hand_pixels)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"22": {"steps": 2}}, "SDTurboScheduler 22: 2 steps at denoise 1 walk the training "
                               "timesteps 999, 899"),
        ({"22": {"denoise": 0.5}}, "SDTurboScheduler 22: 1 steps at denoise 0.5"),
        ({"14": {"sampler_name": "seeds_2"}}, "KSamplerSelect 14: sampler 'seeds_2'"),
        ({"13": {"add_noise": False}}, "add_noise off"),
    ],
    ids=["two-turbo-steps", "turbo-denoise", "sampler-not-offered", "no-noise"],
)  # fmt: skip
def test_what_no_schedule_here_walks_is_refused_naming_the_node(
    client: TestClient, sdxl_kit: SDXLKit, change: dict[str, dict[str, Any]], named: str
) -> None:
    graph = turbo_graph(TURBO)
    for node, inputs in change.items():
        graph[node]["inputs"] |= inputs
    response = import_comfy(client, graph, {TURBO: sdxl_kit.checkpoint_name})
    assert response.status_code == 422, response.text
    assert named in response.json()["error"]["message"]
