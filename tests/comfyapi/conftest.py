"""The ComfyUI API's tests: one models folder holding the tiny Z-Image and Wan kits (built once per
session), the app over it in process, and a real server over it (module-scoped where a module
shares one)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from inline_core.config import Config  # noqa: E402
from inline_core.families.wan.kit import build_kit as build_wan_kit  # noqa: E402
from inline_core.families.zimage.kit import build_kit as build_zimage_kit  # noqa: E402
from inline_core.server.app import create_app  # noqa: E402


@pytest.fixture(scope="session")
def kit_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One models folder with the tiny Z-Image models and the tiny Wan models."""
    root = tmp_path_factory.mktemp("comfyapi") / "models"
    build_zimage_kit(root)
    build_wan_kit(root)
    return root


@pytest.fixture(scope="module")
def client(kit_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("comfyapi-data") / "data"
    config = Config(models_dir=kit_models, data_dir=data, profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as c:
        yield c
