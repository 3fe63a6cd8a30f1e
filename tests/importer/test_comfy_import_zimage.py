"""The Z-Image Turbo template, in each form ComfyUI writes it, imports as one runnable graph."""

from __future__ import annotations

from typing import Any

import pytest
from comfy_harness import Checker, imported
from comfy_workflows import (
    PROMPT,
    ZIMAGE_ENCODER,
    ZIMAGE_MODEL,
    ZIMAGE_VAE,
    with_model_sampling,
    zimage_api,
    zimage_ui,
    zimage_ui_subgraph,
)

from inline_core.errors import InvalidGraph
from inline_core.models.catalog import Catalog


def tree(graph: dict[str, Any], node_id: str) -> dict[str, Any]:
    """A node and everything upstream of it, without our ids: equal trees are equal graphs."""
    nodes = {n["id"]: n for n in graph["nodes"]}
    node = nodes[node_id]
    return {
        "type": node["type"],
        "params": node["params"],
        "inputs": {port: tree(graph, edge["from"]) for port, edge in node["inputs"].items()},
    }


def expected_tree(*, prompt: str, seed: int, width: int = 1024) -> dict[str, Any]:
    encoder = {"type": "load/text-encoder", "params": {"file": ZIMAGE_ENCODER}, "inputs": {}}
    text = {"type": "input/text", "params": {"text": prompt}, "inputs": {}}
    return {
        "type": "vae/decode",
        "params": {},
        "inputs": {
            "vae": {"type": "load/vae", "params": {"file": ZIMAGE_VAE}, "inputs": {}},
            "latent": {
                "type": "sample",
                "params": {
                    "steps": 8,
                    "cfg": 1.0,
                    "sampler": "euler",
                    "scheduler": "simple",
                    "seed": seed,
                    "denoise": 1.0,
                },
                "inputs": {
                    "model": {
                        "type": "load/diffusion-model",
                        "params": {"file": ZIMAGE_MODEL},
                        "inputs": {},
                    },
                    # ConditioningZeroOut with cfg 1: no guidance, so no negative at all.
                    "positive": {
                        "type": "encode/text",
                        "params": {},
                        "inputs": {"text_encoder": encoder, "prompt": text},
                    },
                    "latent": {
                        "type": "latent/empty",
                        "params": {"width": width, "height": 1024, "batch": 1},
                        "inputs": {},
                    },
                },
            },
        },
    }


def test_api_format(catalog: Catalog, checker: Checker) -> None:
    result = imported(zimage_api(seed=42), catalog)
    body = result.to_json()
    assert result.target == "c8"
    assert tree(body["graph"], "c8") == expected_tree(prompt=PROMPT, seed=42)
    # Ids come from ComfyUI's; the prompt's source node sits beside its encoder.
    ids = [n["id"] for n in body["graph"]["nodes"]]
    assert sorted(ids) == sorted(["c16", "c18", "c6_text", "c6", "c13", "c3", "c17", "c8"])
    assert result.skipped == [] and result.warnings == []
    validated = checker.validate(result)
    assert validated.order[-1] == "c8"


def test_api_format_wrapped_as_a_prompt_request(catalog: Catalog) -> None:
    plain = imported(zimage_api(), catalog).to_json()
    wrapped = imported({"prompt": zimage_api(), "client_id": "abc"}, catalog).to_json()
    assert wrapped == plain


def test_ui_format_matches_api_format(catalog: Catalog, checker: Checker) -> None:
    api = imported(zimage_api(seed=7), catalog).to_json()
    ui = imported(zimage_ui(seed=7), catalog).to_json()
    assert ui["target"] == "c8"
    assert tree(ui["graph"], "c8") == tree(api["graph"], "c8")
    assert ui["skipped"] == [] and ui["warnings"] == []
    checker.validate(imported(zimage_ui(seed=7), catalog))


def test_ui_subgraph_flattens(catalog: Catalog, checker: Checker) -> None:
    result = imported(zimage_ui_subgraph(prompt="a lighthouse at dusk", seed=1234), catalog)
    body = result.to_json()
    # Inner nodes are named as ComfyUI runs them: <instance>:<inner>.
    assert result.target == "c57:8"
    # Promoted prompt and seed win over the stale inner values; the width comes from the
    # PrimitiveInt outside; the reroute is followed and the bypassed LoRA passes its model on.
    assert tree(body["graph"], "c57:8") == expected_tree(
        prompt="a lighthouse at dusk", seed=1234, width=768
    )
    skipped = {s["nodeId"]: s for s in body["skipped"]}
    assert set(skipped) == {"57:41", "57:42"}
    assert skipped["57:41"]["classType"] == "LoraLoaderModelOnly"
    assert "bypassed" in skipped["57:41"]["reason"]
    assert "muted" in skipped["57:42"]["reason"]
    assert not any(n["type"].startswith("Note") for n in body["graph"]["nodes"])
    checker.validate(result)


def test_ui_subgraph_promoted_widget_without_proxy_list(catalog: Catalog) -> None:
    workflow = zimage_ui_subgraph()
    instance = workflow["nodes"][0]
    del instance["properties"]["proxyWidgets"]
    instance["widgets_values"] = ["a boat on a calm lake"]  # one value per widget input
    body = imported(workflow, catalog).to_json()
    encode = tree(body["graph"], "c57:8")["inputs"]["latent"]["inputs"]["positive"]
    assert encode["inputs"]["prompt"]["params"] == {"text": "a boat on a calm lake"}
    # Without the proxy list, the inner KSampler keeps its own seed.
    sample = tree(body["graph"], "c57:8")["inputs"]["latent"]
    assert sample["params"]["seed"] == 999


def test_version_1_workflow_with_object_links(catalog: Catalog) -> None:
    workflow = zimage_ui(seed=5)
    workflow["version"] = 1
    workflow["state"] = {"lastGroupId": 0, "lastNodeId": 18, "lastLinkId": 29, "lastRerouteId": 0}
    workflow["links"] = [
        {
            "id": row[0],
            "origin_id": row[1],
            "origin_slot": row[2],
            "target_id": row[3],
            "target_slot": row[4],
            "type": row[5],
        }
        for row in workflow["links"]
    ]
    api = imported(zimage_api(seed=5), catalog).to_json()
    body = imported(workflow, catalog).to_json()
    assert tree(body["graph"], "c8") == tree(api["graph"], "c8")


def test_guidance_with_a_zeroed_negative_uses_an_empty_prompt(
    catalog: Catalog, checker: Checker
) -> None:
    workflow = zimage_api()
    workflow["3"]["inputs"]["cfg"] = 4.0
    result = imported(workflow, catalog)
    sample = tree(result.to_json()["graph"], "c8")["inputs"]["latent"]
    assert sample["params"]["cfg"] == 4.0
    negative = sample["inputs"]["negative"]
    assert negative["type"] == "encode/text"
    assert negative["inputs"]["prompt"]["params"] == {"text": ""}
    assert negative["inputs"]["text_encoder"]["params"] == {"file": ZIMAGE_ENCODER}
    assert any("empty negative prompt" in w for w in result.warnings)
    checker.validate(result)


def test_a_shift_other_than_the_models_own_is_carried_onto_sample(
    catalog: Catalog, checker: Checker
) -> None:
    workflow = zimage_api()
    workflow["11"]["inputs"]["shift"] = 6.0
    workflow["3"]["inputs"]["sampler_name"] = "dpmpp_2m_sde_gpu"
    result = imported(workflow, catalog)
    # `sample` runs the shift as ComfyUI's ModelSamplingAuraFlow sets it: nothing changes.
    assert result.warnings == [] and result.to_json()["changesPicture"] == []
    sample = tree(result.to_json()["graph"], "c8")["inputs"]["latent"]
    assert (sample["params"]["sampler"], sample["params"]["shift"]) == ("dpmpp_2m_sde_gpu", 6.0)
    assert "mu" not in sample["params"]
    checker.validate(result)


def test_the_models_own_shift_leaves_sample_at_its_own(catalog: Catalog) -> None:
    result = imported(zimage_api(), catalog)  # the template's AuraFlow shift 3: Z-Image's own
    sample = tree(result.to_json()["graph"], "c8")["inputs"]["latent"]
    assert "shift" not in sample["params"] and "mu" not in sample["params"]


def test_model_sampling_flux_is_carried_as_comfyuis_mu(catalog: Catalog) -> None:
    workflow = with_model_sampling(
        zimage_api(), "ModelSamplingFlux", max_shift=1.5, base_shift=0.25, width=768, height=512
    )
    result = imported(workflow, catalog)
    sample = tree(result.to_json()["graph"], "c8")["inputs"]["latent"]
    # ComfyUI's arithmetic: 768 * 512 / 256 = 1536 tokens on the line (256, 0.25)-(4096, 1.5).
    slope = (1.5 - 0.25) / (4096 - 256)
    assert sample["params"]["mu"] == pytest.approx(1536 * slope + 0.25 - slope * 256, abs=1e-12)
    assert "shift" not in sample["params"]


def test_a_model_not_here_is_named_never_swapped_for_the_only_one(
    catalog: Catalog, checker: Checker
) -> None:
    """The folders hold one file each: a workflow naming others keeps its names (listed as
    unmatched) and the graph is refused at submit as `model_missing`, naming the file."""
    result = imported(
        zimage_api(model="z_image_fp8.safetensors", vae="other_ae.safetensors"), catalog
    )
    body = result.to_json()
    nodes = {n["id"]: n for n in body["graph"]["nodes"]}
    assert nodes["c16"]["params"]["file"] == "z_image_fp8.safetensors"
    assert nodes["c17"]["params"]["file"] == "other_ae.safetensors"
    missing = {m["file"]: m for m in body["unmatchedModels"]}
    assert set(missing) == {"z_image_fp8.safetensors", "other_ae.safetensors"}
    assert all(m["using"] is None for m in missing.values())
    with pytest.raises(InvalidGraph) as info:
        checker.validate(result)
    assert info.value.code == "model_missing" and "z_image_fp8.safetensors" in info.value.message
