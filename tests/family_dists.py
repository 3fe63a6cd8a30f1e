"""The test family distributions (`tests/families/tiny_chroma`, `broken_family`) installed as a
user installs a family, and a models folder holding two families' tiny kits: fixtures for the
family tests and for the ComfyUI API's tests of what a family's recipe adds (`tests/conftest.py`
offers them everywhere, one per session)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run_once import built_once

FAMILIES = Path(__file__).resolve().parent / "families"
DISTRIBUTIONS = ("tiny_chroma", "broken_family")


@pytest.fixture(scope="session")
def family_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test family distributions, built and installed by pip into a folder of their own
    (never the project's environment: a server started from it must not list them); once per
    run (tests/run_once.py)."""
    return built_once(tmp_path_factory, "family-site", _install_families)


def _install_families(site: Path) -> None:
    work = site.with_name(site.name + "-sources")
    shutil.rmtree(work, ignore_errors=True)
    sources = [shutil.copytree(FAMILIES / name, work / name) for name in DISTRIBUTIONS]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            *map(str, sources),
        ],
        check=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def installed(family_site: Path) -> Iterator[Path]:
    """The test families found, for this module's tests and the servers and ranks they start;
    taken off the path again afterwards, so no other test sees them."""
    before = os.environ.get("PYTHONPATH")
    sys.path.insert(0, str(family_site))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(family_site), before) if p)
    try:
        yield family_site
    finally:
        sys.path.remove(str(family_site))
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


@pytest.fixture(scope="session")
def two_families(family_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder with Z-Image's tiny kit (ComfyUI files) and Chroma's (diffusers folders),
    each written by its own `inline-core kit --family`; once per run (tests/run_once.py)."""

    def write(folder: Path) -> None:
        from inline_core.families.zimage.kit import build_kit

        root = folder / "models"
        build_kit(root, "tiny", layouts=("comfy",))
        env = {**os.environ, "PYTHONPATH": str(family_site)}
        command = [sys.executable, "-m", "inline_core.cli", "kit", "--family", "chroma"]
        subprocess.run([*command, "--out", str(root)], check=True, env=env, timeout=300)

    return built_once(tmp_path_factory, "two-families", write) / "models"
