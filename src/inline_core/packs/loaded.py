"""An installed pack read back and checked: the same checks at install and at every start.

A pack is loaded whole or refused whole: its manifest must parse, its SDK range must hold this
server's SDK, and every node declaration recorded at install must map onto a descriptor.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from inline_core.packs.environment import env_python
from inline_core.packs.errors import PackRefused
from inline_core.packs.manifest import PackManifest, check_sdk, read_manifest
from inline_core.packs.store import DESCRIBED, InstalledPack
from inline_core.packs.wire import PackNode, pack_nodes
from inline_core_sdk.version import PROTOCOL_VERSION


@dataclass(frozen=True)
class LoadedPack:
    installed: InstalledPack
    manifest: PackManifest
    nodes: dict[str, PackNode]

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def python(self) -> Path:
        return env_python(self.installed.env_dir)

    @property
    def identity(self) -> str:
        """Changes with every install, even of the same version (cache keys use it)."""
        return f"{self.name}@{self.version}:{self.installed.folder.name}"


def check_python(manifest: PackManifest, where: Path | str) -> None:
    if manifest.requires_python is None:
        return
    try:
        allowed = SpecifierSet(manifest.requires_python)
    except InvalidSpecifier as exc:
        raise PackRefused(f"pack manifest {where}: requires-python is not a range: {exc}") from exc
    if not allowed.contains(platform.python_version()):
        raise PackRefused(
            f"pack {manifest.name!r} needs Python {allowed}; this server runs "
            f"{platform.python_version()}"
        )


def read_described(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackRefused(f"{path}: the pack's recorded nodes are unreadable: {exc}") from exc
    if not isinstance(raw, dict):
        raise PackRefused(f"{path}: the pack's recorded declarations are not an object")
    return cast(dict[str, Any], raw)


def check_protocol(name: str, described: dict[str, Any]) -> None:
    """Refuse a pack whose environment holds an SDK that speaks another protocol (one installed
    by an older server): its worker could not talk to this server."""
    spoken = described.get("protocol")
    if spoken != PROTOCOL_VERSION:
        raise PackRefused(
            f"pack {name!r} was installed with inline-core-sdk {described.get('sdk')}, which "
            f"speaks protocol {spoken}; this server speaks {PROTOCOL_VERSION}: install the pack "
            "again to give it this server's SDK"
        )


def load_installed(installed: InstalledPack, sdk_version: str) -> LoadedPack:
    """Read and check an installed pack; raises `PackRefused` saying what is wrong."""
    manifest = read_manifest(installed.manifest_path)
    check_sdk(manifest, sdk_version, installed.manifest_path)
    check_python(manifest, installed.manifest_path)
    if (manifest.name, manifest.version) != (installed.name, installed.version):
        raise PackRefused(
            f"{installed.manifest_path}: it declares {manifest.name} {manifest.version}, but "
            f"{installed.name} {installed.version} was installed there"
        )
    described = read_described(installed.folder / DESCRIBED)
    check_protocol(manifest.name, described)
    nodes = pack_nodes(manifest, described)
    loaded = LoadedPack(installed, manifest, nodes)
    if not loaded.python.exists():
        raise PackRefused(f"pack {manifest.name!r}: its environment {installed.env_dir} is gone")
    return loaded
