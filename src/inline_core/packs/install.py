"""`packs install` and `packs remove`: build a pack's environment, record it, or take it away.

Nothing is recorded until everything has worked: the environment is built in a staging folder,
the pack's nodes are declared from inside it and checked as the server will check them at start,
and only then is the folder moved into place and the index replaced. A refusal leaves the packs
folder as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.packs.environment import Installer, build_env, env_python
from inline_core.packs.errors import PackRefused
from inline_core.packs.loaded import LoadedPack, check_python, load_installed
from inline_core.packs.manifest import PackManifest, check_sdk, read_manifest
from inline_core.packs.sdk_wheel import sdk_wheel
from inline_core.packs.sources import copy_manifest, pack_source
from inline_core.packs.store import (
    DESCRIBED,
    ENV,
    MANIFEST,
    InstalledPack,
    PackStore,
    hold_in_use,
)

DESCRIBE_TIMEOUT_S = 300
SDK_CACHE = ".sdk"


@dataclass(frozen=True)
class InstallReport:
    pack: LoadedPack
    replaced: InstalledPack | None
    installer: str
    seconds: float


def describe_nodes(env_dir: Path, manifest: PackManifest, cwd: Path) -> dict[str, Any]:
    """Ask the pack's own environment what its nodes declare (the SDK's `describe`)."""
    command = [str(env_python(env_dir)), "-I", "-m", "inline_core_sdk", "describe"]
    command += ["--nodes", json.dumps(dict(manifest.nodes))]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=DESCRIBE_TIMEOUT_S,
            cwd=cwd,
            env=build_env(os.environ),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackRefused(f"pack {manifest.name!r}: describing its nodes failed: {exc}") from exc
    if done.returncode != 0:
        raise PackRefused(
            f"pack {manifest.name!r}: its nodes could not be loaded:\n{done.stderr.strip()[-2000:]}"
        )
    try:
        return cast(dict[str, Any], json.loads(done.stdout))
    except ValueError as exc:
        raise PackRefused(f"pack {manifest.name!r}: its description is not JSON: {exc}") from exc


def install_pack(
    spec: str, store: PackStore, installer: Installer, sdk_version: str
) -> InstallReport:
    """Install (or upgrade) the pack at `spec`: a folder, a source archive or a registry name."""
    started = time.monotonic()
    with pack_source(spec) as source:
        manifest = read_manifest(source / MANIFEST)
        check_sdk(manifest, sdk_version, source / MANIFEST)
        check_python(manifest, source / MANIFEST)
        with store.changing():
            stage = store.staging(manifest.name)
            in_use = hold_in_use(stage)  # a concurrent sweep leaves this folder alone
            try:
                loaded, replaced = _build_and_commit(
                    source, stage, manifest, store, installer, sdk_version
                )
            finally:
                os.close(in_use)
            store.sweep()
    return InstallReport(loaded, replaced, installer.name, time.monotonic() - started)


def _build_and_commit(
    source: Path,
    stage: Path,
    manifest: PackManifest,
    store: PackStore,
    installer: Installer,
    sdk_version: str,
) -> tuple[LoadedPack, InstalledPack | None]:
    try:
        installed = _build(source, stage, manifest, store, installer)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    try:  # the very checks a server makes at start, before anything is recorded
        return load_installed(installed, sdk_version), store.commit(installed)
    except BaseException:
        shutil.rmtree(installed.folder, ignore_errors=True)
        raise


def _build(
    source: Path, stage: Path, manifest: PackManifest, store: PackStore, installer: Installer
) -> InstalledPack:
    env = build_env(os.environ)
    copy_manifest(source, stage)
    installer.create(stage / ENV, env)
    wheel = sdk_wheel(store.root / SDK_CACHE)
    installer.install(stage / ENV, [str(wheel), str(source)], env)
    described = describe_nodes(stage / ENV, manifest, stage)
    (stage / DESCRIBED).write_text(json.dumps(described, indent=2), encoding="utf-8")
    folder = stage.parent / f"{manifest.version}-{time.time_ns():x}"
    stage.rename(folder)
    return InstalledPack(manifest.name, manifest.version, folder, time.time(), str(source))


def remove_pack(name: str, store: PackStore) -> InstalledPack:
    """Forget the pack; its folder goes now, or once no running server uses it."""
    with store.changing():
        removed = store.remove(name)
        store.sweep()
    return removed
