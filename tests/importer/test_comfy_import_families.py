"""Which model family a workflow is for: mapped only onto one this server runs; another is a 422
naming the family, the nodes that show it and what to do; nodes whose loss changes the picture
refuse the import or are listed as changing it; an explicit model-name mapping."""

from __future__ import annotations

from typing import Any

import pytest
from comfy_harness import imported
from comfy_workflows import with_nodes, zimage_api

from inline_core.contract.registry import Families
from inline_core.errors import InlineError, InvalidRequest
from inline_core.importer import import_request
from inline_core.models.catalog import Catalog


def families_running(catalog: Catalog) -> str:
    """The titles of the installed families, as a refusal lists them."""
    return ", ".join(sorted(title for _, title in Families.discovered(catalog, {}).family_names()))


def refusal(workflow: Any, catalog: Catalog, **kw: Any) -> InlineError:
    with pytest.raises(InvalidRequest) as refused:
        imported(workflow, catalog, **kw)
    return refused.value


def flux_api() -> dict[str, Any]:
    """ComfyUI's FLUX.1 dev template, as its loaders name its files."""
    workflow = zimage_api()
    workflow["16"]["inputs"]["unet_name"] = "flux1-dev.safetensors"
    workflow["18"] = {
        "class_type": "DualCLIPLoader",
        "inputs": {
            "clip_name1": "clip_l.safetensors",
            "clip_name2": "t5xxl_fp16.safetensors",
            "type": "flux",
        },
    }
    return workflow


def test_a_flux_workflow_is_refused_naming_the_family_and_its_nodes(catalog: Catalog) -> None:
    error = refusal(flux_api(), catalog)
    assert error.code == "unsupported_model_family" and error.status == 422
    assert error.message.startswith(
        "this workflow is built for FLUX.1 (UNETLoader 16 'flux1-dev.safetensors'; "
        "DualCLIPLoader 18 type 'flux'), which this server cannot run; "
        f"the model families it runs: {families_running(catalog)}."  # own nodes' too
    )
    assert "family package installed into the server's environment" in error.message
    assert "'z_image_turbo_bf16.safetensors'" in error.message  # what it could be mapped onto


def test_a_wan_cloud_api_workflow_is_not_told_there_is_no_wan_family(catalog: Catalog) -> None:
    """ComfyUI's Wan cloud-API template: Wan runs here, through ComfyUI's local templates."""
    workflow = {
        "1": {"class_type": "WanTextToVideoApi", "inputs": {"prompt": "a paper boat"}},
        "2": {"class_type": "SaveVideo", "inputs": {"video": ["1", 0]}},
    }
    error = refusal(workflow, catalog)
    assert error.code == "unsupported_model_family"
    assert "no Wan family" not in error.message
    assert "built for Wan (WanTextToVideoApi 1)" in error.message
    assert "this server runs Wan: import ComfyUI's local Wan templates" in error.message
    assert f"The model families it runs: {families_running(catalog)}" in error.message
    assert "Wan, Z-Image" in families_running(catalog)


def test_the_text_encoder_type_alone_names_the_family(catalog: Catalog) -> None:
    workflow = zimage_api()
    workflow["18"]["class_type"] = "CLIPLoader"
    workflow["18"]["inputs"].update(type="wan")
    error = refusal(workflow, catalog)
    assert "built for Wan (CLIPLoader 18 type 'wan')" in error.message


def test_a_workflow_with_no_model_file_is_named_by_its_node_classes(catalog: Catalog) -> None:
    workflow = {
        "1": {"class_type": "WanVideoSampler", "inputs": {"steps": 4}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}},
    }
    assert "built for Wan (WanVideoSampler 1)" in refusal(workflow, catalog).message


def test_a_model_of_no_known_family_asks_for_the_file_or_a_mapping(catalog: Catalog) -> None:
    workflow = zimage_api()
    workflow["16"]["inputs"]["unet_name"] = "my_merge_v3.safetensors"
    workflow["18"]["inputs"]["type"] = "stable_diffusion"  # shared by many families: tells nothing
    error = refusal(workflow, catalog)
    assert error.message.startswith(
        "cannot tell which model family this workflow is built for: UNETLoader 16 "
        "'my_merge_v3.safetensors' is not a file in models/diffusion_models/"
    )
    assert "--model WORKFLOW_FILE=CATALOG_FILE" in error.message
    mapped = imported(
        workflow, catalog, models={"my_merge_v3.safetensors": "z_image_turbo_bf16.safetensors"}
    )
    assert mapped.family.family == "z-image"
    assert mapped.graph.node("c16").params["file"] == "z_image_turbo_bf16.safetensors"
    # Nothing says it is another family's, so nothing is said to change the picture.
    assert not any("changes the picture" in w for w in mapped.warnings)


def test_a_controlnet_on_the_way_refuses_the_import(catalog: Catalog) -> None:
    workflow = with_nodes(
        zimage_api(),
        **{
            "60": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": "c.pth"}},
            "61": {"class_type": "LoadImage", "inputs": {"image": "pose.png"}},
            "62": {
                "class_type": "ControlNetApplyAdvanced",
                "inputs": {
                    "positive": ["6", 0],
                    "negative": ["7", 0],
                    "control_net": ["60", 0],
                    "image": ["61", 0],
                    "strength": 1.0,
                },
            },
        },
    )
    workflow["3"]["inputs"]["positive"] = ["62", 0]
    error = refusal(workflow, catalog)
    assert error.code == "unsupported_node"
    assert error.message.startswith("ControlNetApplyAdvanced 62 conditions the picture on an image")
    assert "plain text-to-image" in error.message
    # Not connected to the image, it changes nothing: the import goes on.
    workflow["3"]["inputs"]["positive"] = ["6", 0]
    assert imported(workflow, catalog).target == "c8"


def test_an_api_node_that_makes_the_image_refuses_the_import(catalog: Catalog) -> None:
    workflow = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "photo.png"}},
        "2": {"class_type": "TopazImageEnhance", "inputs": {"image": ["1", 0], "scale": 2}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0]}},
    }
    error = refusal(workflow, catalog, assets={"photo.png": "sha256-feed"})
    assert error.code == "unsupported_node"
    assert "made by TopazImageEnhance 2" in error.message
    assert "would return its input image unchanged" in error.message


def test_the_route_body_takes_models_and_checks_them(catalog: Catalog) -> None:
    facts = Families.discovered(catalog, {})
    # FLUX by its model file (its DualCLIPLoader's two encoders Z-Image takes no way: refused).
    workflow = with_nodes(flux_api(), **{"18": zimage_api()["18"]})
    body = {
        "workflow": workflow,
        "models": {"flux1-dev.safetensors": "z_image_turbo_bf16.safetensors"},
    }
    result = import_request(body, catalog, facts=facts)
    answer = result.to_json()
    assert answer["family"] == {"name": "z-image", "title": "Z-Image"}
    assert any(
        w.startswith("changes the picture: this workflow is built for FLUX.1")
        for w in answer["warnings"]
    )
    with pytest.raises(InvalidRequest, match="DualCLIPLoader 18 loads 2 text encoder"):
        import_request({**body, "workflow": flux_api()}, catalog, facts=facts)
    for bad in ({"flux1-dev.safetensors": 3}, ["flux1-dev.safetensors"]):
        with pytest.raises(InvalidRequest, match="'models' must"):
            import_request({"workflow": flux_api(), "models": bad}, catalog, facts=facts)
