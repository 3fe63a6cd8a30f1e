"""`inline-core packs install PATH|NAME`, `packs list` and `packs remove NAME`.

They change the packs folder under the data dir (`INLINE_DATA_DIR`, or `--data-dir`); a running
server picks the change up by itself. Exit status: 0 done, 1 no such pack, 2 refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from inline_core.config import Config
from inline_core.errors import InlineError
from inline_core.packs.environment import Installer
from inline_core.packs.errors import PackNotInstalled, PackRefused
from inline_core.packs.install import install_pack, remove_pack
from inline_core.packs.loaded import load_installed
from inline_core.packs.store import PackStore
from inline_core_sdk.version import sdk_version


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inline-core packs", description="Manage node packs.")
    p.add_argument("--data-dir", help="the server's data dir (default INLINE_DATA_DIR, ./.inline)")
    sub = p.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install or upgrade a pack in its own environment")
    install.add_argument("pack", help="a pack folder, a source archive, or a name on the registry")
    listing = sub.add_parser("list", help="the installed packs")
    listing.add_argument("--json", action="store_true", help="print JSON")
    remove = sub.add_parser("remove", help="remove a pack and its environment")
    remove.add_argument("name")
    return p


def _config(args: argparse.Namespace) -> Config:
    config = Config.from_env()
    if args.data_dir:
        config = replace(config, data_dir=Path(args.data_dir))
    return config


def _list(store: PackStore, as_json: bool) -> int:
    rows: list[dict[str, object]] = []
    lines: list[str] = []
    for name, installed in sorted(store.installed().items()):
        try:
            loaded = load_installed(installed, sdk_version())
        except PackRefused as exc:
            rows.append({"name": name, "version": installed.version, "status": "refused",
                         "error": exc.message, "nodeTypes": []})
            lines.append(f"{name:<20} {installed.version:<10} refused  {exc.message}")
            continue
        types = sorted(n.descriptor.type for n in loaded.nodes.values())
        row: dict[str, object] = {"name": name, "version": installed.version, "status": "ok"}
        row["nodeTypes"] = types
        rows.append(row)
        lines.append(f"{name:<20} {installed.version:<10} ok       {', '.join(types)}")
    if as_json:
        print(json.dumps({"packs": rows}, indent=2))
    else:
        print("\n".join(lines) if lines else "no packs installed")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        config = _config(args)
        store = PackStore(config.packs_dir)
        if args.command == "list":
            return _list(store, args.json)
        if args.command == "remove":
            removed = remove_pack(args.name, store)
            print(f"removed {removed.name} {removed.version}")
            return 0
        installer = Installer.choose(config.packs_installer)
        report = install_pack(args.pack, store, installer, sdk_version())
    except PackNotInstalled as exc:
        print(f"inline-core packs: {exc.message}", file=sys.stderr)
        return 1
    except InlineError as exc:
        print(f"inline-core packs: {exc.message}", file=sys.stderr)
        return 2
    pack = report.pack
    types = ", ".join(sorted(n.descriptor.type for n in pack.nodes.values()))
    was = f", replacing {report.replaced.version}" if report.replaced else ""
    print(
        f"installed {pack.name} {pack.version}{was} with {report.installer} in "
        f"{report.seconds:.1f} s: {types}"
    )
    return 0
