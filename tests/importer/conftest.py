from __future__ import annotations

from pathlib import Path

import pytest
from comfy_harness import MODEL_FILES, Checker, FolderMedia, PrimitiveNotRunHere

from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.primitives import PRIMITIVE_DESCRIPTORS
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog


@pytest.fixture
def models_root(tmp_path: Path) -> Path:
    root = tmp_path / "models"
    for category, names in MODEL_FILES.items():
        (root / category).mkdir(parents=True)
        for name in names:
            (root / category / name).write_bytes(b"placeholder weights")
    return root


@pytest.fixture
def catalog(models_root: Path) -> Catalog:
    return Catalog(models_root, ttl_s=0.0)


@pytest.fixture
def media(tmp_path: Path) -> FolderMedia:
    folder = tmp_path / "assets"
    folder.mkdir()
    return FolderMedia(folder)


@pytest.fixture
def registry(media: FolderMedia) -> Registry:
    reg = Registry()
    register_builtin_nodes(reg, media)
    for descriptor in PRIMITIVE_DESCRIPTORS:
        if reg.runner(descriptor.type) is None:
            reg.register(reg.descriptor(descriptor.type), PrimitiveNotRunHere())
    return reg


@pytest.fixture
def checker(registry: Registry, catalog: Catalog) -> Checker:
    return Checker(registry, catalog)
