"""ComfyUI's custom sampling (SamplerCustom, SamplerCustomAdvanced and the nodes that feed them)
onto `sample` exactly, or refused naming what it asked for and the closest offered."""

from __future__ import annotations

from typing import Any

import pytest
from comfy_harness import Checker, imported
from comfy_workflows import with_model_sampling, zimage_api

from inline_core.errors import InvalidRequest
from inline_core.models.catalog import Catalog

Json = dict[str, Any]


def sample_params(workflow: Json, catalog: Catalog, checker: Checker) -> Json:
    result = imported(workflow, catalog)
    checker.validate(result)
    nodes = {n["id"]: n for n in result.to_json()["graph"]["nodes"]}
    assert nodes["c3"]["type"] == "sample"
    assert result.warnings == []
    skipped = {s["nodeId"] for s in result.to_json()["skipped"]}
    assert not skipped & {"30", "31", "32", "33"}  # each read, none listed as dropped
    return dict(nodes["c3"]["params"])


def advanced(sigmas: Json, sampler: str = "dpmpp_2m", guider: Json | None = None) -> Json:
    """The Z-Image template with its KSampler replaced by SamplerCustomAdvanced."""
    workflow = zimage_api()
    workflow["3"] = {
        "class_type": "SamplerCustomAdvanced",
        "inputs": {
            "noise": ["30", 0],
            "guider": ["31", 0],
            "sampler": ["32", 0],
            "sigmas": ["33", 0],
            "latent_image": ["13", 0],
        },
    }
    workflow["30"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": 77}}
    workflow["31"] = guider or {
        "class_type": "CFGGuider",
        "inputs": {"model": ["11", 0], "positive": ["6", 0], "negative": ["7", 0], "cfg": 1.0},
    }
    workflow["32"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": sampler}}
    workflow["33"] = sigmas
    return workflow


def basic(scheduler: str = "karras", steps: int = 6, denoise: float = 1.0) -> Json:
    inputs = {"model": ["11", 0], "scheduler": scheduler, "steps": steps, "denoise": denoise}
    return {"class_type": "BasicScheduler", "inputs": inputs}


def test_sampler_custom_advanced_maps_its_nodes_onto_sample(
    catalog: Catalog, checker: Checker
) -> None:
    params = sample_params(advanced(basic("karras", 6, 0.5)), catalog, checker)
    assert params == {
        "steps": 6,
        "cfg": 1.0,
        "sampler": "dpmpp_2m",
        "scheduler": "karras",
        "seed": 77,
        "denoise": 0.5,
    }


def test_a_basic_guider_samples_without_guidance(catalog: Catalog, checker: Checker) -> None:
    guider = {"class_type": "BasicGuider", "inputs": {"model": ["11", 0], "conditioning": ["6", 0]}}
    params = sample_params(advanced(basic(), "uni_pc", guider), catalog, checker)
    assert (params["cfg"], params["sampler"]) == (1.0, "uni_pc")


def test_sampler_custom_maps_onto_sample(catalog: Catalog, checker: Checker) -> None:
    workflow = advanced(basic("beta", 5))
    workflow["3"] = {
        "class_type": "SamplerCustom",
        "inputs": {
            "model": ["11", 0],
            "add_noise": True,
            "noise_seed": 5,
            "cfg": 1.0,
            "positive": ["6", 0],
            "negative": ["7", 0],
            "sampler": ["32", 0],
            "sigmas": ["33", 0],
            "latent_image": ["13", 0],
        },
    }
    del workflow["30"], workflow["31"]
    result = imported(workflow, catalog)
    checker.validate(result)
    params = {n["id"]: n for n in result.to_json()["graph"]["nodes"]}["c3"]["params"]
    assert (params["sampler"], params["scheduler"], params["steps"], params["seed"]) == (
        "dpmpp_2m",
        "beta",
        5,
        5,
    )


def test_schedulers_with_the_librarys_shapes_map(catalog: Catalog, checker: Checker) -> None:
    beta = {
        "class_type": "BetaSamplingScheduler",
        "inputs": {"model": ["11", 0], "steps": 7, "alpha": 0.6, "beta": 0.6},
    }
    assert sample_params(advanced(beta), catalog, checker)["scheduler"] == "beta"
    # Karras over the model's own range: the template's AuraFlow shift of 3, its first of 1000
    # timesteps t = 0.001 shifted to 3 t / (1 + 2 t).
    sigma_max, sigma_min = 1.0, 0.0029940119760479044
    karras = {
        "class_type": "KarrasScheduler",
        "inputs": {"steps": 4, "sigma_max": sigma_max, "sigma_min": sigma_min, "rho": 7.0},
    }
    params = sample_params(advanced(karras), catalog, checker)
    assert (params["scheduler"], params["steps"]) == ("karras", 4)


def karras_under_flux(sigma_min: float) -> Json:
    """Karras sigmas from 1 to `sigma_min` under ModelSamplingFlux at mu 1.15 (1024x1024 is
    4096 tokens: the line's `max_shift` end)."""
    karras = {
        "class_type": "KarrasScheduler",
        "inputs": {"steps": 5, "sigma_max": 1.0, "sigma_min": sigma_min, "rho": 7.0},
    }
    flux = {"max_shift": 1.15, "base_shift": 0.5, "width": 1024, "height": 1024}
    return with_model_sampling(advanced(karras), "ModelSamplingFlux", **flux)


def test_karras_over_a_flux_shifts_range_maps_with_its_mu(
    catalog: Catalog, checker: Checker
) -> None:
    # ModelSamplingFlux's table at mu 1.15 is 10000 long: its first timestep t = 1e-4 is at
    # e^1.15 / (e^1.15 + 1 / t - 1) = 3.1581929 / 10002.1581929.
    params = sample_params(karras_under_flux(0.0003157511457805717), catalog, checker)
    assert (params["scheduler"], params["steps"]) == ("karras", 5)
    assert params["mu"] == pytest.approx(1.15) and "shift" not in params


def test_karras_over_another_mus_range_is_refused(catalog: Catalog) -> None:
    # The range at mu 0.5 (e^0.5 / (e^0.5 + 9999)): not the workflow's model's.
    with pytest.raises(InvalidRequest, match="closest offered is 'karras' over the model's own"):
        imported(karras_under_flux(0.0001648614321582369), catalog)


@pytest.mark.parametrize(
    ("sigmas", "sampler", "says"),
    [
        (basic("karras"), "dpmpp_3m_sde_cfg_pp", "closest offered is 'dpmpp_3m_sde'"),
        (basic("karras_new"), "euler", "closest offered is 'karras'"),
        (
            {
                "class_type": "BetaSamplingScheduler",
                "inputs": {"model": ["11", 0], "steps": 7, "alpha": 0.5, "beta": 0.7},
            },
            "euler",
            "closest offered is 'beta'",
        ),
        (
            {
                "class_type": "KarrasScheduler",
                "inputs": {"steps": 4, "sigma_max": 14.614642, "sigma_min": 0.0291675, "rho": 7},
            },
            "euler",
            "closest offered is 'karras' over the model's own range",
        ),
        (
            {"class_type": "ExponentialScheduler", "inputs": {"steps": 4}},
            "euler",
            "takes sigmas from BasicScheduler",
        ),
    ],
)
def test_what_sample_does_not_run_is_refused_naming_the_closest(
    catalog: Catalog, sigmas: Json, sampler: str, says: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        imported(advanced(sigmas, sampler), catalog)
    assert caught.value.status == 422
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({"sampling": "eps", "zsnr": False}, "a flow model's sampling is its shift"),
        ({"sampling": "v_prediction", "zsnr": False}, "closest offered is 'eps'"),
    ],
)
def test_model_sampling_discrete_on_a_flow_model_or_another_prediction_is_refused(
    catalog: Catalog, inputs: Json, says: str
) -> None:
    workflow = zimage_api()
    workflow["12"] = {
        "class_type": "ModelSamplingDiscrete",
        "inputs": {"model": ["16", 0], **inputs},
    }
    workflow["3"]["inputs"]["model"] = ["12", 0]
    with pytest.raises(InvalidRequest) as caught:
        imported(workflow, catalog)
    assert caught.value.status == 422
    assert says in caught.value.message


def split(of: Json, half: int, cls: str = "SplitSigmas", **inputs: Any) -> Json:
    """The template on `half` of a split of the sigmas `of` (node 34)."""
    workflow = advanced({"class_type": cls, "inputs": {"sigmas": ["34", 0], **inputs}})
    workflow["3"]["inputs"]["sigmas"] = ["33", half]
    workflow["34"] = of
    return workflow


@pytest.mark.parametrize(
    ("half", "cls", "inputs", "window"),
    [
        (1, "SplitSigmas", {"step": 2}, {"start_step": 2}),
        (0, "SplitSigmas", {"step": 2}, {"end_step": 2, "leftover_noise": True}),
        (1, "SplitSigmasDenoise", {"denoise": 0.5}, {"start_step": 3}),
        (0, "SplitSigmasDenoise", {"denoise": 0.5}, {"end_step": 3, "leftover_noise": True}),
    ],
)
def test_a_half_of_split_sigmas_is_a_window_of_the_schedule(
    catalog: Catalog, checker: Checker, half: int, cls: str, inputs: Json, window: Json
) -> None:
    params = sample_params(split(basic("karras", 6), half, cls, **inputs), catalog, checker)
    assert {k: params[k] for k in ("steps", "scheduler", *window)} == {
        "steps": 6,
        "scheduler": "karras",
        **window,
    }


@pytest.mark.parametrize("step", [0, 6])
def test_a_split_that_leaves_a_half_without_steps_is_refused(catalog: Catalog, step: int) -> None:
    with pytest.raises(InvalidRequest) as caught:
        imported(split(basic("karras", 6), 1, step=step), catalog)
    assert caught.value.status == 422
    assert f"splits 6 steps at step {step}" in caught.value.message
