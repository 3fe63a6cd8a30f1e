"""Missing components are refused at submit naming each; broken files fail the run naming them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from zimage_harness import make_runner, models_without_diffusion, node_params, render

from inline_core.config import Config
from inline_core.contract.files import StackResolver
from inline_core.errors import ModelMissing, RunFailed
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler
from inline_core.server.app import create_app
from inline_core.server.bootstrap import build_services

OVERRIDES = {
    "model": "INLINE_ZIMAGE_MODEL",
    "vae": "INLINE_ZIMAGE_VAE",
    "text_encoder": "INLINE_ZIMAGE_TEXT_ENCODER",
}


def resolver(root: Path, **overrides: Path) -> StackResolver:
    """Z-Image's file resolver over `root`, with `INLINE_ZIMAGE_*` overrides by part."""
    env = {OVERRIDES[part]: str(path) for part, path in overrides.items()}
    return ZImageFamily(Catalog(root, ttl_s=0.0), env).files


def test_empty_models_folder_names_every_component(tmp_path: Path) -> None:
    with pytest.raises(ModelMissing) as info:
        resolver(tmp_path).resolve().require("z")
    err = info.value
    assert err.code == "model_missing" and err.status == 422 and err.node_id == "z"
    for what in ("diffusion model:", "vae:", "text encoder:"):
        assert what in err.message
    assert str(tmp_path / "diffusion_models") in err.message
    assert str(tmp_path / "vae") in err.message and str(tmp_path / "text_encoders") in err.message


def test_only_the_diffusion_model_present_names_the_rest(kit: KitPaths, tmp_path: Path) -> None:
    assert kit.diffusion_file is not None
    (tmp_path / "diffusion_models").mkdir()
    shutil.copy(
        kit.diffusion_file, tmp_path / "diffusion_models" / "z_image_turbo_bf16.safetensors"
    )
    result = resolver(tmp_path).resolve()
    assert [m.component for m in result.missing] == ["vae", "text encoder"]


def test_diffusers_folder_alone_is_complete(kit: KitPaths, tmp_path: Path) -> None:
    assert kit.diffusers_dir is not None
    shutil.copytree(kit.diffusers_dir, tmp_path / "diffusion_models" / "Z-Image-Turbo")
    sources = resolver(tmp_path).resolve().require()
    assert (
        sources.require("vae").subfolder == "vae"
        and sources.require("text_encoder").subfolder == "text_encoder"
    )
    assert (
        sources.require("tokenizer").subfolder == "tokenizer"
        and sources.get("scheduler") is not None
    )


def test_model_picker_and_overrides(kit: KitPaths, tmp_path: Path) -> None:
    assert kit.diffusers_dir is not None and kit.vae_file is not None
    picked = resolver(kit.root).resolve("zimage_tiny_diffusers").require()
    assert (
        picked.require("transformer").path == kit.diffusers_dir
        and picked.require("vae").subfolder == "vae"
    )
    auto = resolver(kit.root).resolve().require()
    assert (
        auto.require("transformer").path == kit.diffusion_file
        and auto.require("vae").path == kit.vae_file
    )
    unknown = resolver(kit.root).resolve("nope.safetensors")
    assert unknown.missing[0].component == "diffusion model" and "nope" in unknown.missing[0].hint
    # The environment overrides beat the picker and the folder's own pieces.
    over = (
        resolver(tmp_path, model=kit.diffusers_dir, vae=kit.vae_file).resolve("ignored").require()
    )
    assert (
        over.require("transformer").path == kit.diffusers_dir
        and over.require("vae").path == kit.vae_file
    )
    gone = resolver(tmp_path, model=tmp_path / "absent.safetensors").resolve()
    assert "INLINE_ZIMAGE_MODEL" in gone.missing[0].hint


def test_uncached_repo_id_override_is_missing_not_downloaded(tmp_path: Path) -> None:
    result = resolver(tmp_path, model=Path("no-such-org/no-such-model")).resolve()
    assert "not in the local cache" in result.missing[0].hint


def test_runner_check_refuses_at_submit(tmp_path: Path, sampler: StepLoopSampler) -> None:
    runner = make_runner(tmp_path, sampler)
    with pytest.raises(ModelMissing) as info:
        runner.check("z", node_params())
    assert info.value.node_id == "z"


def test_garbage_diffusion_file_fails_the_run_naming_it(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    root = models_without_diffusion(kit, tmp_path / "models")
    broken = root / "diffusion_models" / "z_image_turbo_bf16.safetensors"
    broken.write_bytes(b"this is not a checkpoint" * 10)
    runner = make_runner(root, sampler)
    runner.check("z", node_params())  # present: submit accepts it
    with pytest.raises(RunFailed) as info:
        render(runner, tmp_path / "takes")
    assert str(broken) in info.value.message


def test_truncated_diffusion_file_fails_the_run_naming_it(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    assert kit.diffusion_file is not None
    root = models_without_diffusion(kit, tmp_path / "models")
    data = kit.diffusion_file.read_bytes()
    cut = root / "diffusion_models" / "zimage_cut.safetensors"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(RunFailed) as info:
        render(make_runner(root, sampler), tmp_path / "takes")
    assert str(cut) in info.value.message


def test_wrong_kind_of_file_is_refused_naming_it(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """Refused as the low-level loader refuses it: model_missing, from the file's header (the
    server's submit check runs the same resolution)."""
    assert kit.vae_file is not None and kit.diffusion_file is not None
    root = models_without_diffusion(kit, tmp_path / "models")
    shutil.copy(kit.diffusion_file, root / "diffusion_models" / "zimage.safetensors")
    shutil.copy(kit.vae_file, root / "diffusion_models" / "not_a_dit.safetensors")
    with pytest.raises(ModelMissing) as info:
        render(make_runner(root, sampler), tmp_path / "takes", model="not_a_dit.safetensors")
    assert "not_a_dit.safetensors" in info.value.message
    assert "not a Z-Image diffusion model" in info.value.message


def test_broken_vae_fails_naming_it(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    assert kit.diffusion_file is not None and kit.text_encoder_dir is not None
    root = tmp_path / "models"
    (root / "diffusion_models").mkdir(parents=True)
    shutil.copy(kit.diffusion_file, root / "diffusion_models" / kit.diffusion_file.name)
    shutil.copytree(kit.text_encoder_dir, root / "text_encoders" / kit.text_encoder_dir.name)
    (root / "vae").mkdir()
    broken = root / "vae" / "zimage_vae.safetensors"
    broken.write_bytes(b"\x00" * 64)
    with pytest.raises(RunFailed) as info:
        render(make_runner(root, sampler), tmp_path / "takes")
    assert str(broken) in info.value.message


def test_the_node_is_available_only_with_its_models(kit: KitPaths, tmp_path: Path) -> None:
    """/v1/models says whether the node's models are there, and why not, as the models come."""
    models = tmp_path / "models"
    models.mkdir()
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    services = build_services(config)
    with TestClient(create_app(config, services)) as client:
        listing = {d["type"]: d for d in client.get("/v1/models").json()["models"]}
        node = listing[NODE_TYPE]
        assert node["available"] is False and node["modelsMissing"] is True
        assert node["unavailableReason"].startswith("Z-Image is missing model files.")
        assert str(models / "diffusion_models") in node["unavailableReason"]
        one = client.get(f"/v1/models/{NODE_TYPE}").json()
        assert one["available"] is False
        assert listing["input/text"]["available"] is True  # nodes without models stay so
        shutil.copytree(kit.root, models, dirs_exist_ok=True)
        services.catalog.rescan()
        node = {d["type"]: d for d in client.get("/v1/models").json()["models"]}[NODE_TYPE]
        assert node["available"] is True and "modelsMissing" not in node
