"""Fixtures of the worker-group tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from inline_core.families.zimage.kit import KitPaths


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    """The tiny random-weight Z-Image stack, diffusers layout, in a models folder (built once)."""
    from inline_core.families.zimage.kit import build_kit

    return build_kit(tmp_path_factory.mktemp("kit") / "models", "tiny", layouts=("diffusers",))
