"""Node mapping: the SD template, names onto ours, unknown nodes, images in and out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from comfy_harness import Checker, FolderMedia, imported
from comfy_workflows import sd_txt2img_ui, with_nodes, zimage_api

from inline_core.errors import InvalidGraph, InvalidRequest
from inline_core.graph.descriptor import SEED_MAX
from inline_core.models.catalog import Catalog


def nodes_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in body["graph"]["nodes"]}


def test_sd_txt2img_checkpoint(catalog: Catalog, checker: Checker) -> None:
    # A Stable Diffusion workflow, mapped onto the catalog's model by the caller.
    models = {"v1-5-pruned-emaonly.safetensors": "z_image_turbo_bf16.safetensors"}
    result = imported(sd_txt2img_ui(), catalog, models=models)
    nodes = nodes_of(result.to_json())
    assert result.target == "c8"
    # One checkpoint becomes three loaders, each matched in its own folder (the only file there).
    assert nodes["c4"]["type"] == "load/diffusion-model"
    assert nodes["c4"]["params"] == {"file": "z_image_turbo_bf16.safetensors"}
    assert nodes["c4_text_encoder"]["params"] == {"file": "qwen_3_4b.safetensors"}
    assert nodes["c4_vae"]["params"] == {"file": "ae.safetensors"}
    sample = nodes["c3"]
    assert sample["params"] == {
        "steps": 20,
        "cfg": 8.0,
        "sampler": "euler",
        "scheduler": "normal",
        "seed": 156680208700286,
        "denoise": 1.0,
    }
    assert sample["inputs"]["positive"] == {"from": "c6", "output": "conditioning"}
    assert sample["inputs"]["negative"] == {"from": "c7", "output": "conditioning"}
    assert nodes["c6_text"]["params"]["text"].startswith("beautiful scenery")
    assert nodes["c7_text"]["params"] == {"text": "text, watermark"}
    assert nodes["c6"]["inputs"]["text_encoder"] == {
        "from": "c4_text_encoder",
        "output": "text_encoder",
    }
    assert nodes["c5"]["params"] == {"width": 512, "height": 512, "batch": 1}
    assert nodes["c8"]["inputs"]["vae"] == {"from": "c4_vae", "output": "vae"}
    warnings = " | ".join(result.warnings)
    assert "checkpoint bundles" in warnings
    assert "changes the picture: this workflow is built for Stable Diffusion 1.5" in warnings
    assert "'v1-5-pruned-emaonly.safetensors' is diffusion_models/'z_image_turbo_bf16" in warnings
    checker.validate(result)


@pytest.mark.parametrize(
    ("sampler", "scheduler"),
    [
        ("euler_ancestral", "beta"),
        ("dpmpp_2m_sde", "karras"),
        ("res_multistep", "kl_optimal"),
        ("er_sde", "linear_quadratic"),
        ("dpmpp_sde", "sgm_uniform"),
        ("dpmpp_2m_sde_gpu", "ddim_uniform"),
        ("gradient_estimation", "simple"),
        ("euler_cfg_pp", "simple"),  # a CFG++ sampler: the model's family runs it or refuses it
        ("res_multistep_ancestral_cfg_pp", "karras"),
    ],
)
def test_sampler_and_scheduler_map_one_to_one(
    catalog: Catalog, sampler: str, scheduler: str
) -> None:
    workflow = zimage_api()
    workflow["3"]["inputs"].update(sampler_name=sampler, scheduler=scheduler)
    result = imported(workflow, catalog)
    params = nodes_of(result.to_json())["c3"]["params"]
    assert (params["sampler"], params["scheduler"]) == (sampler, scheduler)
    assert result.warnings == []


@pytest.mark.parametrize(
    ("field", "wanted", "closest"),
    [
        ("sampler_name", "dpmpp_3m_sde_cfg_pp", "dpmpp_3m_sde"),
        ("sampler_name", "uni_pc_bh3", "uni_pc_bh2"),
        ("scheduler", "karras_new", "karras"),
    ],
)
def test_a_name_not_offered_is_refused_naming_it_and_the_closest(
    catalog: Catalog, field: str, wanted: str, closest: str
) -> None:
    workflow = zimage_api()
    workflow["3"]["inputs"][field] = wanted
    with pytest.raises(InvalidRequest) as caught:
        imported(workflow, catalog)
    assert caught.value.status == 422
    assert f"{wanted!r} is not offered" in caught.value.message
    assert f"closest offered is {closest!r}" in caught.value.message


def test_values_are_fitted_to_our_ranges(catalog: Catalog, checker: Checker) -> None:
    workflow = zimage_api(seed=2**64 - 1, width=1000, height=8000)
    workflow["3"]["inputs"].update(steps=500, cfg=42.0)
    result = imported(workflow, catalog)
    nodes = nodes_of(result.to_json())
    assert nodes["c13"]["params"] == {"width": 1008, "height": 4096, "batch": 1}
    assert nodes["c3"]["params"]["steps"] == 200
    assert nodes["c3"]["params"]["cfg"] == 30.0
    assert nodes["c3"]["params"]["seed"] == (2**64 - 1) % (SEED_MAX + 1)
    assert len([w for w in result.warnings if "outside" in w]) == 5
    checker.validate(result)


def test_large_seeds_stay_exact(catalog: Catalog) -> None:
    seed = 2**60 + 1  # beyond a float's exact integers
    result = imported(zimage_api(seed=seed), catalog)
    assert result.graph.node("c3").params["seed"] == seed
    assert result.warnings == []


def test_widget_values_from_primitive_nodes_in_api_format(catalog: Catalog) -> None:
    workflow = with_nodes(
        zimage_api(),
        **{
            "20": {"class_type": "PrimitiveInt", "inputs": {"value": 31337}},
            "21": {"class_type": "PrimitiveStringMultiline", "inputs": {"value": "from a node"}},
        },
    )
    workflow["3"]["inputs"]["seed"] = ["20", 0]
    workflow["6"]["inputs"]["text"] = ["21", 0]
    result = imported(workflow, catalog)
    nodes = nodes_of(result.to_json())
    assert nodes["c3"]["params"]["seed"] == 31337
    assert nodes["c6"]["inputs"]["prompt"] == {"from": "c21", "output": "text"}
    assert nodes["c21"]["params"] == {"text": "from a node"}
    assert result.skipped == []


def test_model_names_match_by_file_name(tmp_path: Path, catalog: Catalog) -> None:
    (catalog.root / "diffusion_models" / "zimage").mkdir()
    (catalog.root / "diffusion_models" / "zimage" / "turbo.safetensors").write_bytes(b"x")
    workflow = zimage_api()
    workflow["16"]["inputs"]["unet_name"] = "zimage\\turbo.safetensors"  # a Windows path
    workflow["17"]["inputs"]["vae_name"] = "flux/ae.safetensors"
    result = imported(workflow, catalog)
    nodes = nodes_of(result.to_json())
    assert nodes["c16"]["params"] == {"file": "zimage/turbo.safetensors"}
    assert nodes["c17"]["params"] == {"file": "ae.safetensors"}
    assert any(
        "'flux/ae.safetensors' was found in vae/ as 'ae.safetensors'" in w for w in result.warnings
    )


def test_a_missing_model_with_several_candidates_is_kept_and_reported(
    catalog: Catalog, checker: Checker
) -> None:
    (catalog.root / "diffusion_models" / "other.safetensors").write_bytes(b"x")
    workflow = zimage_api()
    workflow["16"]["inputs"]["unet_name"] = "z_image_turbo_fp8.safetensors"
    result = imported(workflow, catalog)
    body = result.to_json()
    assert nodes_of(body)["c16"]["params"] == {"file": "z_image_turbo_fp8.safetensors"}
    assert any(
        "'z_image_turbo_fp8.safetensors' is not in diffusion_models/" in w for w in result.warnings
    )
    # The catalog's candidates for the loader, to map it with `models`.
    assert body["unmatchedModels"] == [
        {
            "nodeId": "c16",
            "comfyNode": "UNETLoader 16 ('Load Diffusion Model')",
            "file": "z_image_turbo_fp8.safetensors",
            "category": "diffusion_models",
            "using": None,
            # Every file, the workflow's family's first.
            "candidates": ["z_image_turbo_bf16.safetensors", "other.safetensors"],
        }
    ]
    with pytest.raises(InvalidGraph, match="z_image_turbo_fp8.safetensors"):
        checker.validate(result)


def test_unknown_node_in_the_path_passes_its_input_through(
    catalog: Catalog, checker: Checker
) -> None:
    workflow = with_nodes(
        zimage_api(),
        **{
            "30": {
                "class_type": "FreeU_V2",
                "inputs": {"b1": 1.3, "b2": 1.4, "model": ["11", 0]},
            },
            "31": {
                "class_type": "SuperUpscale4x",
                "inputs": {"scale": 4, "image": ["8", 0]},
            },
            "32": {"class_type": "ShowText|pysssss", "inputs": {"text": "hello"}},
        },
    )
    workflow["3"]["inputs"]["model"] = ["30", 0]
    workflow["9"]["inputs"]["images"] = ["31", 0]
    result = imported(workflow, catalog)
    skipped = {s.node_id: s for s in result.skipped}
    assert set(skipped) == {"30", "31", "32"}
    assert "unknown node type 'FreeU_V2'" in skipped["30"].reason
    assert "passed straight through" in skipped["30"].reason
    assert "passed straight through" in skipped["31"].reason
    assert "unknown node type 'ShowText|pysssss'" in skipped["32"].reason
    assert result.target == "c8"
    nodes = nodes_of(result.to_json())
    assert nodes["c3"]["inputs"]["model"] == {"from": "c16", "output": "model"}
    # Dropping them changes the picture: listed as such, and said so in the warnings.
    changes = {c["nodeId"]: c for c in result.to_json()["changesPicture"]}
    assert set(changes) == {"30", "31"}
    assert "no 'FreeU_V2'" in changes["30"]["reason"]
    assert "SuperUpscale4x" in changes["31"]["reason"]
    assert any(w.startswith("changes the picture: FreeU_V2 30") for w in result.warnings)
    checker.validate(result)


def test_unknown_node_without_a_way_through_refuses_the_import(catalog: Catalog) -> None:
    """The graph would fail at submit (its sampler has no latent): refused here, naming why."""
    workflow = with_nodes(
        zimage_api(),
        **{"40": {"class_type": "MagicLatentSource", "inputs": {"magic": 3}}},
    )
    workflow["3"]["inputs"]["latent_image"] = ["40", 0]
    with pytest.raises(InvalidRequest) as refused:
        imported(workflow, catalog)
    assert refused.value.code == "unsupported_node"
    message = refused.value.message
    assert "sample c3 would have no 'latent' input" in message
    assert "MagicLatentSource 40: unknown node type" in message


def test_ksampler_advanced(catalog: Catalog, checker: Checker) -> None:
    full = zimage_api()
    inputs = full["3"]["inputs"]
    seed = inputs.pop("seed")
    del inputs["denoise"]
    full["3"]["class_type"] = "KSamplerAdvanced"
    inputs.update(
        add_noise="enable",
        noise_seed=seed,
        start_at_step=0,
        end_at_step=10000,
        return_with_leftover_noise="disable",
    )
    result = imported(full, catalog)
    assert nodes_of(result.to_json())["c3"]["params"]["seed"] == seed
    checker.validate(result)

    partial = zimage_api()
    partial["3"]["class_type"] = "KSamplerAdvanced"
    partial["3"]["inputs"].update(
        add_noise="disable",
        noise_seed=1,
        start_at_step=4,
        end_at_step=8,
        return_with_leftover_noise="enable",
    )
    params = nodes_of(imported(partial, catalog).to_json())["c3"]["params"]
    window = {k: params[k] for k in ("start_step", "end_step", "add_noise", "leftover_noise")}
    assert window == {"start_step": 4, "end_step": 8, "add_noise": False, "leftover_noise": True}


def test_img2img_with_an_asset(catalog: Catalog, checker: Checker, media: FolderMedia) -> None:
    (media.root / "sha256-feed").write_bytes(b"\x89PNG")
    workflow = with_nodes(
        zimage_api(),
        **{
            "50": {"class_type": "LoadImage", "inputs": {"image": "photo.png", "upload": "image"}},
            "51": {"class_type": "VAEEncode", "inputs": {"pixels": ["50", 0], "vae": ["17", 0]}},
        },
    )
    del workflow["13"]
    workflow["3"]["inputs"].update(latent_image=["51", 0], denoise=0.6)
    result = imported(workflow, catalog, assets={"photo.png": "sha256-feed"})
    nodes = nodes_of(result.to_json())
    assert nodes["c50"] == {
        "id": "c50",
        "type": "input/image",
        "params": {"asset": {"ref": "asset", "id": "sha256-feed"}},
        "inputs": {},
    }
    assert nodes["c51"]["inputs"] == {
        "vae": {"from": "c17", "output": "vae"},
        "image": {"from": "c50", "output": "image"},
    }
    assert nodes["c3"]["params"]["denoise"] == 0.6
    assert result.warnings == []
    checker.validate(result)

    unresolved = imported(workflow, catalog)
    assert nodes_of(unresolved.to_json())["c50"]["params"]["asset"] == {"ref": "asset", "id": ""}
    assert any("'photo.png' is not an uploaded asset" in w for w in unresolved.warnings)


def test_preview_is_the_target_when_there_is_no_save(catalog: Catalog) -> None:
    workflow = zimage_api()
    workflow["9"]["class_type"] = "PreviewImage"
    del workflow["9"]["inputs"]["filename_prefix"]
    assert imported(workflow, catalog).target == "c8"


def test_the_first_save_image_wins_over_previews(catalog: Catalog) -> None:
    workflow = with_nodes(
        zimage_api(),
        **{
            "2": {"class_type": "PreviewImage", "inputs": {"images": ["60", 0]}},
            "60": {"class_type": "VAEDecode", "inputs": {"samples": ["13", 0], "vae": ["17", 0]}},
        },
    )
    result = imported(workflow, catalog)
    assert result.target == "c8"
    # The preview's branch is kept in the graph too.
    assert "c60" in nodes_of(result.to_json())


def test_no_save_or_preview_falls_back_to_a_decoder(catalog: Catalog) -> None:
    workflow = zimage_api()
    del workflow["9"]
    result = imported(workflow, catalog)
    assert result.target == "c8"
    assert any("no SaveImage or PreviewImage" in w for w in result.warnings)


def test_disconnected_known_nodes_are_reported(catalog: Catalog) -> None:
    workflow = with_nodes(
        zimage_api(),
        **{"70": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}}},
    )
    result = imported(workflow, catalog)
    assert [(s.node_id, s.reason) for s in result.skipped] == [
        ("70", "not connected to an image output")
    ]
    assert "c70" not in nodes_of(result.to_json())
