"""An all-in-one Z-Image checkpoint in `models/checkpoints/` (ComfyUI's layout: the diffusion
model under `model.diffusion_model.`, the VAE under `first_stage_model.`, the text encoder under
`text_encoders.qwen3_4b.transformer.`): each part is read as a view of the one file, header first
and mapped, exactly as its split file is, and a render from it has the split files' pixels."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from zimage_harness import make_runner, render, take_pixels

from inline_core.config import Config
from inline_core.device.policy import Placement
from inline_core.diffusion.files.checkpoint import checkpoint_contents
from inline_core.diffusion.footprint import footprint
from inline_core.diffusion.formats import ldm_vae, qwen3
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.loading import load_component
from inline_core.families.zimage import ZImageFamily, transformer
from inline_core.families.zimage.kit import KitPaths
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source
from inline_core.sampling.loop import StepLoopSampler
from inline_core.server.app import create_app
from tests.diffusion.checkpoint_files import write_checkpoint

TEXT_ENCODER = "text_encoders.qwen3_4b.transformer.model."
CHECKPOINT = "checkpoints/zimage_tiny_aio.safetensors"
FLOAT32 = Placement(device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def checkpoint_models(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder whose only diffusion model is one all-in-one checkpoint of the kit's split
    files (and the kit's text-encoder folder, for its tokenizer)."""
    assert kit.diffusion_file is not None and kit.vae_file is not None
    assert kit.text_encoder_dir is not None
    root = tmp_path_factory.mktemp("checkpoint-models")
    write_checkpoint(
        root / CHECKPOINT,
        {
            "model.diffusion_model.": kit.diffusion_file,
            "first_stage_model.": kit.vae_file,
            TEXT_ENCODER: kit.text_encoder_dir / "model.safetensors",
        },
    )
    shutil.copytree(kit.text_encoder_dir, root / "text_encoders" / kit.text_encoder_dir.name)
    return root


def split_models(kit: KitPaths, root: Path) -> Path:
    assert kit.diffusion_file is not None and kit.vae_file is not None
    assert kit.text_encoder_dir is not None
    for file, category in (
        (kit.diffusion_file, "diffusion_models"),
        (kit.vae_file, "vae"),
    ):
        (root / category).mkdir(parents=True, exist_ok=True)
        shutil.copy(file, root / category / file.name)
    shutil.copytree(kit.text_encoder_dir, root / "text_encoders" / kit.text_encoder_dir.name)
    return root


def test_the_catalog_lists_what_a_checkpoint_contains(checkpoint_models: Path) -> None:
    catalog = Catalog(checkpoint_models, ttl_s=0.0, contents=checkpoint_contents)
    [entry] = catalog.to_json()["checkpoints"]
    assert entry["name"] == "zimage_tiny_aio.safetensors"
    assert entry["contains"] == [
        {"part": "diffusion_model", "name": "diffusion_model", "prefix": "model.diffusion_model."},
        {"part": "vae", "name": "vae", "prefix": "first_stage_model."},
        {"part": "text_encoder", "name": "qwen3_4b", "prefix": "text_encoders.qwen3_4b."},
    ]


def test_the_server_lists_a_checkpoints_contents(checkpoint_models: Path, tmp_path: Path) -> None:
    config = Config(models_dir=checkpoint_models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        [entry] = client.get("/v1/models").json()["catalog"]["checkpoints"]
    assert [part["part"] for part in entry["contains"]] == [
        "diffusion_model",
        "vae",
        "text_encoder",
    ]


def test_the_resolver_takes_every_part_from_the_checkpoints_views(checkpoint_models: Path) -> None:
    family = ZImageFamily(Catalog(checkpoint_models, ttl_s=0.0), {})
    sources = family.files.resolve().require("z")
    path = checkpoint_models / CHECKPOINT
    assert sources.model_name == "zimage_tiny_aio.safetensors"
    assert sources.get("transformer") == Source(path, view="model.diffusion_model.")
    assert sources.get("vae") == Source(path, view="first_stage_model.")
    assert sources.get("text_encoder") == Source(path, view="text_encoders.qwen3_4b.")
    # Two parts of one file are two components: residency keys them apart.
    assert len({sources.require(p).identity() for p in ("transformer", "vae")}) == 2
    # The picked name resolves to the same model again (a take's graph names it).
    again = family.files.resolve("zimage_tiny_aio.safetensors").require("z")
    assert again.get("transformer") == sources.get("transformer")


def test_a_text_encoder_view_encodes_what_its_split_folder_does(
    kit: KitPaths, checkpoint_models: Path
) -> None:
    assert kit.text_encoder_dir is not None
    view = Source(checkpoint_models / CHECKPOINT, view="text_encoders.qwen3_4b.")
    from_view = load_component(qwen3.FORMAT, view, FLOAT32)
    split = load_component(
        qwen3.FORMAT, Source(kit.text_encoder_dir / "model.safetensors"), FLOAT32
    )
    assert footprint(from_view).mapped_bytes > 0  # read mapped, as the split file is
    ids = torch.randint(0, 200, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        want = split(input_ids=ids, output_hidden_states=True).hidden_states[-2]
        got = from_view(input_ids=ids, output_hidden_states=True).hidden_states[-2]
    assert torch.equal(got, want)


def test_a_checkpoint_renders_the_pixels_of_its_split_files(
    kit: KitPaths, checkpoint_models: Path, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """The text encoder comes from the kit's folder here (an override: a single-file Qwen3 takes
    the packaged Qwen3 tokenizer, which the kit's tiny encoder does not read); the test above
    shows the checkpoint's own encodes the same."""
    assert kit.text_encoder_dir is not None
    encoder = str(checkpoint_models / "text_encoders" / kit.text_encoder_dir.name)
    whole = make_runner(checkpoint_models, sampler, env={"INLINE_ZIMAGE_TEXT_ENCODER": encoder})
    split = make_runner(split_models(kit, tmp_path / "split"), sampler)
    want = take_pixels(render(split, tmp_path, seed=4))
    got = take_pixels(render(whole, tmp_path, seed=4))
    # The very weights (bitwise; below), but at other byte offsets in the file: the CPU's matrix
    # kernels round the last float32 bit by the operands' alignment (the transformer's output
    # moves 1e-6; the same weights copied to aligned memory compute identically). Measured: 1
    # level on 1 value of 12288.
    assert int(np.abs(got - want).max()) <= 1 and float(np.not_equal(got, want).mean()) < 0.001
    stats = whole.runtime.residency.stats()
    assert stats.mapped_bytes > 0  # the views are mapped from the one file, not copied


@pytest.mark.parametrize(
    ("prefix", "fmt", "split"),
    [
        ("model.diffusion_model.", transformer.FORMAT, "diffusion"),
        ("first_stage_model.", ldm_vae.FORMAT, "vae"),
    ],
)
def test_each_view_holds_its_split_files_very_weights(
    kit: KitPaths, checkpoint_models: Path, prefix: str, fmt: ModelFormat, split: str
) -> None:
    file = kit.diffusion_file if split == "diffusion" else kit.vae_file
    assert file is not None
    view = load_component(fmt, Source(checkpoint_models / CHECKPOINT, view=prefix), FLOAT32)
    whole = load_component(fmt, Source(file), FLOAT32)
    got, want = view.state_dict(), whole.state_dict()
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    assert footprint(view).mapped_bytes > 0
