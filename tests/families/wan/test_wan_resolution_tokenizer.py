"""A kept stack resolution (`contract/files.py`: `StackResolver.resolve`, kept per catalog
fingerprint) still sees the tokenizer come and go: a tokenizer folder is no catalog entry, so
adding one (as the missing-tokenizer hint asks) or removing it changes no fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path

from inline_core.families.wan import WanFamily
from inline_core.families.wan.kit import WanKit
from inline_core.models.catalog import Catalog


def models_without_tokenizer(kit: WanKit, root: Path) -> Path:
    for category, path in (
        ("diffusion_models", kit.diffusion_file),
        ("vae", kit.vae_file),
        ("text_encoders", kit.text_encoder_file),
    ):
        assert path is not None
        (root / category).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, root / category / path.name)
    return root


def test_a_tokenizer_folder_added_after_it_was_missing_is_found(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    root = models_without_tokenizer(wan_kit, tmp_path / "models")
    family = WanFamily(Catalog(root, ttl_s=0.0), {})
    assert [m.component for m in family.files.resolve().missing] == ["tokenizer"]
    assert wan_kit.tokenizer_dir is not None
    shutil.copytree(wan_kit.tokenizer_dir, root / "text_encoders" / "umt5-xxl-tokenizer")
    again = family.files.resolve()
    assert again.missing == () and again.sources is not None
    assert family.files.resolve() is again  # complete now: kept


def test_a_kept_stack_whose_tokenizer_folder_is_removed_says_it_is_missing(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    root = models_without_tokenizer(wan_kit, tmp_path / "models")
    assert wan_kit.tokenizer_dir is not None
    tokenizer = root / "text_encoders" / "umt5-xxl-tokenizer"
    shutil.copytree(wan_kit.tokenizer_dir, tokenizer)
    family = WanFamily(Catalog(root, ttl_s=0.0), {})
    first = family.files.resolve()
    assert first.missing == () and family.files.resolve() is first
    shutil.rmtree(tokenizer)
    assert [m.component for m in family.files.resolve().missing] == ["tokenizer"]
