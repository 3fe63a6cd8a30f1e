"""FLUX.2 dev's files beside klein's: each transformer is told from its shapes and takes its own
kind of text encoder (dev a Mistral with its tokenizer, klein a Qwen3; in the kits both are 32
wide, so the width alone would not tell), a missing piece is named with where it goes, and the
download table offers Comfy-Org's dev files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from inline_core.diffusion.formats import mistral3
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import RunFailed
from inline_core.families.flux2 import Flux2Family
from inline_core.families.flux2.build import BUILDER
from inline_core.families.flux2.download import DEV_REPO, plan
from inline_core.families.flux2.kit import build_kit
from inline_core.families.flux2.kit_dev import build_dev_kit
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source

DEV_FILE = "flux2_dev_tiny.safetensors"
MISTRAL_FILE = "mistral_3_small_flux2_tiny.safetensors"


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flux2_both") / "models"
    build_kit(root, ("comfy",))
    build_dev_kit(root, ("comfy", "diffusers"))
    return root


def family(root: Path) -> Flux2Family:
    return Flux2Family(Catalog(root, ttl_s=0.0), {})


def test_each_variant_takes_its_own_text_encoder(both: Path) -> None:
    dev = family(both).files.found(DEV_FILE)
    assert not dev.missing
    encoder, tokenizer = dev.parts["text_encoder"], dev.parts["tokenizer"]
    assert encoder is not None and encoder.path.name == MISTRAL_FILE
    assert tokenizer is not None and tokenizer.path.name == MISTRAL_FILE  # the file's own
    klein = family(both).files.found("flux2_klein_tiny.safetensors")
    encoder = klein.parts["text_encoder"]
    assert not klein.missing and encoder is not None and encoder.path.name == "flux2_tiny_qwen3"
    folder = family(both).files.found("flux2_dev_tiny_diffusers")
    encoder = folder.parts["text_encoder"]
    assert encoder is not None and encoder.subfolder == "text_encoder"


def test_a_missing_mistral_is_named_with_where_it_goes(tmp_path: Path, both: Path) -> None:
    root = tmp_path / "models"
    (root / "diffusion_models").mkdir(parents=True)
    shutil.copy(both / "diffusion_models" / DEV_FILE, root / "diffusion_models")
    shutil.copytree(both / "vae", root / "vae")
    shutil.copytree(both / "text_encoders" / "flux2_tiny_qwen3", root / "text_encoders" / "q")
    found = family(root).files.found(DEV_FILE)
    (missing,) = found.missing
    assert missing.component == "text encoder"
    assert "mistral_3_small_flux2_bf16.safetensors" in missing.hint
    assert str(root / "text_encoders") in missing.hint


def test_a_mistral_file_without_its_tokenizer_is_not_used(tmp_path: Path, both: Path) -> None:
    """No other tokenizer is known to fit a Mistral file: one that does not carry its own is
    passed over, and the text encoder is missing."""
    root = tmp_path / "models"
    shutil.copytree(both, root, ignore=shutil.ignore_patterns("flux2_tiny_qwen3"))
    path = root / "text_encoders" / MISTRAL_FILE
    weights = dict(load_safetensors(path))
    del weights[mistral3.TOKENIZER_KEY]
    save_safetensors(weights, path)
    found = family(root).files.found(DEV_FILE)
    assert [m.component for m in found.missing] == ["text encoder"]


def test_dev_download_is_comfy_orgs_dev_files(tmp_path: Path) -> None:
    todo = plan(["dev"], tmp_path)
    assert [name for name, _ in todo] == ["dev_diffusion_model", "vae", "dev_text_encoder"]
    assert {t.repo_id for _, t in todo} == {DEV_REPO}
    assert {t.destination(tmp_path) for _, t in todo} == {
        tmp_path / "diffusion_models" / "flux2_dev_fp8mixed.safetensors",
        tmp_path / "vae" / "flux2-vae.safetensors",
        tmp_path / "text_encoders" / "mistral_3_small_flux2_bf16.safetensors",
    }
    (fp8,) = plan(["dev_text_encoder_fp8"], tmp_path)
    assert fp8[1].files == ("split_files/text_encoders/mistral_3_small_flux2_fp8.safetensors",)
    (turbo,) = plan(["dev_turbo_lora"], tmp_path)  # the templates' Turbo switch's LoRA
    assert turbo[1].destination(tmp_path) == tmp_path / "loras" / "Flux2TurboComfyv2.safetensors"


def test_a_mistral_folder_tokenizer_without_a_template_gets_mistral_small_3s(
    tmp_path: Path, both: Path
) -> None:
    """A diffusers folder's Mistral tokenizer with no chat template of its own is given the one
    ComfyUI's files are read with; another tokenizer without one is refused naming it."""
    folder = tmp_path / "dev"
    shutil.copytree(both / "diffusion_models" / "flux2_dev_tiny_diffusers", folder)
    (folder / "tokenizer" / "chat_template.jinja").unlink()
    tokenizer = BUILDER.load("tokenizer", Source(folder, "tokenizer"), None)
    assert tokenizer.chat_template == mistral3.CHAT_TEMPLATE
    qwen = tmp_path / "qwen"
    shutil.copytree(both / "text_encoders" / "flux2_tiny_qwen3", qwen)
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        (qwen / name).unlink(missing_ok=True)
    with pytest.raises(RunFailed, match="has no chat template"):
        BUILDER.load("tokenizer", Source(qwen), None)
