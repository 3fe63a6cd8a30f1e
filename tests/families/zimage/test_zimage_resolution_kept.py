"""A family's files are resolved again only when the catalog's files change: a warm render's
submit reads no header and scores no file, and a file replaced, added or named by an override is
seen at once (`contract/files.py`: `StackResolver.resolve`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from zimage_harness import models_without_diffusion

from inline_core.contract import files
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.models.catalog import Catalog


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every header the resolver reads shapes from (the real reader runs)."""
    seen: list[Path] = []
    real = files.read_shapes

    def counted(path: Path, view: str | None = None) -> dict[str, tuple[int, ...]] | None:
        seen.append(path)
        return real(path, view)

    monkeypatch.setattr(files, "read_shapes", counted)
    return seen


def comfy_models(kit: KitPaths, root: Path) -> Path:
    assert kit.diffusion_file is not None
    models_without_diffusion(kit, root)
    shutil.copy(kit.diffusion_file, root / "diffusion_models" / "z_image_turbo.safetensors")
    return root


def test_a_second_resolution_of_the_same_files_reads_no_header(
    kit: KitPaths, tmp_path: Path, reads: list[Path]
) -> None:
    family = ZImageFamily(Catalog(comfy_models(kit, tmp_path / "models")), {})
    first = family.files.resolve()
    assert first.sources is not None and reads  # the model file was recognised by its header
    reads.clear()
    again = family.files.resolve()
    assert again is first and reads == []


def test_a_file_replaced_is_resolved_again(
    kit: KitPaths, tmp_path: Path, reads: list[Path]
) -> None:
    root = comfy_models(kit, tmp_path / "models")
    catalog = Catalog(root, ttl_s=0.0)
    family = ZImageFamily(catalog, {})
    first = family.files.resolve()
    model = root / "diffusion_models" / "z_image_turbo.safetensors"
    model.write_bytes(model.read_bytes() + b" ")  # one more byte: a new size
    reads.clear()
    again = family.files.resolve()
    assert model in reads  # recognised again by its header
    assert again is not first and again.sources is not None


def test_a_model_removed_is_missing_at_once(kit: KitPaths, tmp_path: Path) -> None:
    root = comfy_models(kit, tmp_path / "models")
    family = ZImageFamily(Catalog(root, ttl_s=0.0), {})
    assert family.files.resolve().sources is not None
    (root / "diffusion_models" / "z_image_turbo.safetensors").unlink()
    assert [m.component for m in family.files.resolve().missing] == ["diffusion model"]


def test_an_override_is_resolved_every_time(
    kit: KitPaths, tmp_path: Path, reads: list[Path]
) -> None:
    root = comfy_models(kit, tmp_path / "models")
    vae = root / "vae" / next(p.name for p in (root / "vae").iterdir())
    family = ZImageFamily(Catalog(root), {"INLINE_ZIMAGE_VAE": str(vae)})
    first = family.files.resolve()
    reads.clear()
    assert family.files.resolve() == first
    assert reads  # a path outside the catalog's fingerprint: read again, never kept
