"""A pack's manifest: its `pyproject.toml`.

    [project]
    name = "inline-pack-blur"              # the distribution
    version = "1.2.0"
    dependencies = ["inline-core-sdk>=1.0,<2", "pillow>=11,<12"]   # the SDK range + its own deps

    [tool.inline-core.pack]
    name = "blur"                          # the namespace: its nodes are served as blur/<node>
    nodes = { gaussian = "blur_pack:Gaussian" }
    timeout-s = 60                         # one node call's time limit (default 300)
    memory-mb = 1024                       # the worker's resident memory limit (default 2048)

Everything is checked here, before an environment is built: a manifest either parses whole or
is refused with a message that says which field is wrong.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from inline_core.packs.errors import PackRefused

SDK_DISTRIBUTION = "inline-core-sdk"
PACK_TABLE = "tool.inline-core.pack"
NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,39}")
NODE_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,59}")
TARGET_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# Namespaces of the server's own nodes: a pack may not serve types that look like built-in ones.
RESERVED_NAMES = frozenset(
    {"core", "input", "image", "load", "encode", "latent", "sample", "vae", "alibaba", "test"}
)
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MEMORY_MB = 2048
MAX_NODES = 200


@dataclass(frozen=True)
class PackManifest:
    name: str  # the namespace of its node types
    distribution: str
    version: str
    sdk: SpecifierSet  # the SDK versions it was built for
    nodes: Mapping[str, str]  # node name -> "module:Class"
    dependencies: tuple[str, ...]
    requires_python: str | None
    timeout_s: float
    memory_mb: int

    def node_type(self, node: str) -> str:
        return f"{self.name}/{node}"


def _refuse(where: Path | str, problem: str) -> PackRefused:
    return PackRefused(f"pack manifest {where}: {problem}")


def _table(raw: Mapping[str, Any], dotted: str) -> Mapping[str, Any] | None:
    table: Mapping[str, Any] = raw
    for part in dotted.split("."):
        found: object = table.get(part)
        if not isinstance(found, Mapping):
            return None
        table = cast(Mapping[str, Any], found)
    return table


def _sdk_range(where: Path | str, dependencies: list[str]) -> SpecifierSet:
    for raw in dependencies:
        try:
            requirement = Requirement(raw)
        except InvalidRequirement as exc:
            raise _refuse(where, f"dependency {raw!r} is not a requirement: {exc}") from exc
        if canonicalize_name(requirement.name) == SDK_DISTRIBUTION:
            if not str(requirement.specifier):
                raise _refuse(where, f"{raw!r} needs a version range, e.g. '>=1.0,<2'")
            return requirement.specifier
    raise _refuse(
        where,
        f"[project].dependencies must name {SDK_DISTRIBUTION} with the range the pack was built "
        f"for (e.g. \"{SDK_DISTRIBUTION}>=1.0,<2\")",
    )


def _positive(where: Path | str, table: Mapping[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _refuse(where, f"[{PACK_TABLE}].{key} must be a positive number, got {value!r}")
    return float(value)


def _nodes(where: Path | str, table: Mapping[str, Any]) -> dict[str, str]:
    raw = table.get("nodes")
    if not isinstance(raw, Mapping) or not raw:
        raise _refuse(where, f'[{PACK_TABLE}].nodes must be a table {{ name = "module:Class" }}')
    nodes = cast(Mapping[object, object], raw)
    if len(nodes) > MAX_NODES:
        raise _refuse(where, f"more than {MAX_NODES} nodes")
    out: dict[str, str] = {}
    for name, target in nodes.items():
        if not isinstance(name, str) or not NODE_PATTERN.fullmatch(name):
            raise _refuse(where, f"node name {name!r} must match {NODE_PATTERN.pattern}")
        if not isinstance(target, str) or not TARGET_PATTERN.fullmatch(target):
            raise _refuse(where, f"node {name!r} must name its class as 'module:Class'")
        out[name] = target
    return out


def parse_manifest(raw: Mapping[str, Any], where: Path | str) -> PackManifest:
    project = _table(raw, "project")
    if project is None:
        raise _refuse(where, "there is no [project] table")
    distribution, version = project.get("name"), project.get("version")
    if not isinstance(distribution, str) or not distribution:
        raise _refuse(where, "[project].name is missing")
    if not isinstance(version, str):
        raise _refuse(where, "[project].version is missing (a pack has a fixed version)")
    try:
        Version(version)
    except InvalidVersion as exc:
        raise _refuse(where, f"[project].version {version!r} is not a version") from exc
    dependencies = project.get("dependencies", [])
    if not isinstance(dependencies, list) or not all(
        isinstance(d, str) for d in cast(list[object], dependencies)
    ):
        raise _refuse(where, "[project].dependencies must be a list of requirement strings")
    deps = cast(list[str], dependencies)
    sdk = _sdk_range(where, deps)
    table = _table(raw, PACK_TABLE)
    if table is None:
        raise _refuse(where, f"there is no [{PACK_TABLE}] table (is this a node pack?)")
    name = table.get("name", canonicalize_name(distribution))
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise _refuse(where, f"pack name {name!r} must match {NAME_PATTERN.pattern}")
    if name in RESERVED_NAMES:
        raise _refuse(where, f"pack name {name!r} is taken by the server's own nodes")
    requires_python = project.get("requires-python")
    return PackManifest(
        name=name,
        distribution=distribution,
        version=version,
        sdk=sdk,
        nodes=_nodes(where, table),
        dependencies=tuple(deps),
        requires_python=requires_python if isinstance(requires_python, str) else None,
        timeout_s=_positive(where, table, "timeout-s", DEFAULT_TIMEOUT_S),
        memory_mb=int(_positive(where, table, "memory-mb", DEFAULT_MEMORY_MB)),
    )


def read_manifest(path: Path) -> PackManifest:
    """The manifest of the pack whose `pyproject.toml` is `path`."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _refuse(path, "no such file (a pack is a folder with a pyproject.toml)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _refuse(path, f"not readable TOML: {exc}") from exc
    return parse_manifest(raw, path)


def check_sdk(manifest: PackManifest, sdk_version: str, where: Path | str) -> None:
    """Refuse a pack built for SDK versions that exclude this server's."""
    if not manifest.sdk.contains(sdk_version, prereleases=True):
        raise _refuse(
            where,
            f"pack {manifest.name!r} {manifest.version} was built for {SDK_DISTRIBUTION}"
            f"{manifest.sdk}, and this server provides {sdk_version}",
        )
