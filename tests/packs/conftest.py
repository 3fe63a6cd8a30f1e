from __future__ import annotations

from pathlib import Path

import pytest

from tests.packs.pack_support import SHARED_PACKS, install


@pytest.fixture(scope="session")
def packs_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One packs folder for the session: the fixture packs installed from the package registry
    into their own environments, once (the tests that change packs use their own folder)."""
    home = tmp_path_factory.mktemp("packs-home")
    for pack in SHARED_PACKS:
        install(home, pack)
    return home
