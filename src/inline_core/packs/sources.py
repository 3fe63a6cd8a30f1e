"""Where a pack to install comes from: a folder, a source archive, or a name on the registry.

A name is fetched as its source distribution (it carries the `pyproject.toml` manifest) with
pip's own `download`, so it comes from the index pip is configured with.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from packaging.requirements import InvalidRequirement, Requirement

from inline_core.packs.environment import INSTALL_TIMEOUT_S
from inline_core.packs.errors import PackRefused
from inline_core.packs.store import MANIFEST

ARCHIVES = (".tar.gz", ".tgz", ".zip")


def _is_requirement(spec: str) -> bool:
    try:
        Requirement(spec)
    except InvalidRequirement:
        return False
    return True


def _unpack(archive: Path, into: Path) -> Path:
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                z.extractall(into)
        else:
            with tarfile.open(archive) as t:
                t.extractall(into, filter="data")  # no links or paths out of `into`
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise PackRefused(f"{archive.name} is not a readable source archive: {exc}") from exc
    found = sorted(into.glob(f"*/{MANIFEST}")) or sorted(into.glob(MANIFEST))
    if not found:
        raise PackRefused(f"{archive.name} holds no {MANIFEST} (a pack's manifest)")
    return found[0].parent


def _download(name: str, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    # Its source, not a wheel (only the source carries the manifest); its build backend may
    # still come as a wheel.
    command += ["--no-binary", Requirement(name).name, "--dest", str(into), name]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackRefused(f"fetching {name!r} failed: {exc}") from exc
    if done.returncode != 0:
        raise PackRefused(f"fetching {name!r} failed:\n{done.stderr.strip()[-2000:]}")
    archives = [p for p in into.iterdir() if p.name.endswith(ARCHIVES)]
    if not archives:
        raise PackRefused(f"{name!r} has no source distribution (a pack ships its manifest)")
    return archives[0]


@contextmanager
def pack_source(spec: str) -> Generator[Path]:
    """A folder holding the pack's `pyproject.toml`, for as long as the block runs."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / MANIFEST).is_file():
            raise PackRefused(f"{path} has no {MANIFEST}: a pack is a folder with its manifest")
        yield path.resolve()
        return
    with TemporaryDirectory(prefix="inline-pack-source-") as tmp:
        if path.is_file() and path.name.endswith(ARCHIVES):
            yield _unpack(path, Path(tmp))
            return
        if path.exists() or "/" in spec or not _is_requirement(spec):
            raise PackRefused(f"{spec!r} is not a pack folder, a source archive or a pack name")
        downloads = Path(tmp) / "download"
        downloads.mkdir()
        source = _unpack(_download(spec, downloads), Path(tmp) / "source")
        yield source


def copy_manifest(source: Path, into: Path) -> Path:
    target = into / MANIFEST
    shutil.copyfile(source / MANIFEST, target)
    return target
