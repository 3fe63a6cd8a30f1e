"""Upgrading and removing a pack while the server runs: a call in flight finishes on the version
it started on; the next call runs the new version; a removed pack's nodes are refused clearly;
a version folder goes once no worker uses it."""

from __future__ import annotations

import json
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.packs.pack_support import (
    chain_graph,
    finished,
    install,
    pack_server,
    packs_cli,
    packs_listing,
    run_state,
    run_to_end,
    start_run,
    submit,
    take_image,
)
from tests.server.server_support import LiveServer, wait_until

STAMP = '''
import os
from inline_core_sdk import Call, Node, Outputs, Param, Port, RawImage

class Stamp(Node):
    """Waits for the file its `release` param names (if any), then writes its version's mark."""
    cacheable = False
    outputs = (Port("mask", "mask"),)
    params = (Param.text("release"),)

    def run(self, call: Call) -> Outputs:
        call.progress(0.5)
        while call.params["release"] and not os.path.exists(call.params["release"]):
            if call.wait(0.02):
                call.check_cancelled()
        return {"mask": RawImage("L", (2, 1), bytes([MARK, MARK]))}
'''


def versioned_pack(root: Path, version: str, mark: int) -> Path:
    folder = root / f"versioned-{version}"
    (folder / "versioned_pack").mkdir(parents=True)
    (folder / "versioned_pack" / "__init__.py").write_text(f"MARK = {mark}\n{STAMP}")
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "inline-test-versioned"\nversion = "{version}"\n'
        'dependencies = ["inline-core-sdk>=1.0,<2"]\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["versioned_pack"]\n'
        '[tool.inline-core.pack]\nname = "versioned"\nnodes = { stamp = "versioned_pack:Stamp" }\n'
    )
    return folder


def stamp_graph(release: Path | None) -> dict[str, object]:
    return chain_graph(None, ("versioned/stamp", {"release": str(release) if release else ""}))


def at_work(live: LiveServer, run_id: str) -> None:
    def probe() -> bool | None:
        node = run_state(live, run_id)["nodes"].get("n1", {})
        return True if node.get("fraction", 0) >= 0.5 else None

    wait_until(probe, f"run {run_id} to be at work in the pack")


def mark(live: LiveServer, state: dict[str, object]) -> int:
    assert state["status"] == "done", state
    takes = state["takes"]
    assert isinstance(takes, list)
    return take_image(live, takes[0]).tobytes()[0]  # pyright: ignore[reportUnknownArgumentType]


def version_folders(packs_dir: Path) -> list[str]:
    folder = packs_dir / "versioned"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@contextmanager
def call_in_flight(tmp_path: Path) -> Generator[tuple[LiveServer, Path, str, Path]]:
    """Version 1 installed and a server running its node, held until `release` exists:
    (server, packs folder, the run, release)."""
    packs_dir = tmp_path / "packs"
    install(packs_dir, versioned_pack(tmp_path, "1.0.0", 1))
    with pack_server(tmp_path / "server", packs_dir) as live:
        release = tmp_path / "release"
        in_flight = start_run(live, stamp_graph(release), "n1")
        at_work(live, in_flight)
        yield live, packs_dir, in_flight, release


def test_upgrade_while_running_finishes_in_flight_on_the_old_version(tmp_path: Path) -> None:
    with call_in_flight(tmp_path) as (live, packs_dir, in_flight, release):
        [old_folder] = version_folders(packs_dir)

        install(packs_dir, versioned_pack(tmp_path, "2.0.0", 2))
        assert packs_listing(live)["versioned"]["version"] == "2.0.0"
        # The old version's folder stays while its worker is busy.
        assert old_folder in version_folders(packs_dir) and len(version_folders(packs_dir)) == 2
        assert run_state(live, in_flight)["status"] == "running"

        release.touch()
        assert mark(live, finished(live, in_flight)) == 1  # finished on the version it began on
        remaining = version_folders(packs_dir)  # the old one went with its worker
        assert len(remaining) == 1 and old_folder not in remaining
        assert mark(live, run_to_end(live, stamp_graph(None), "n1")) == 2


def test_remove_while_running_lets_the_call_finish_and_refuses_new_ones(tmp_path: Path) -> None:
    with call_in_flight(tmp_path) as (live, packs_dir, in_flight, release):
        removed = packs_cli(packs_dir, "remove", "versioned")
        assert removed.returncode == 0, removed.stderr
        assert "versioned" not in packs_listing(live)
        refused = submit(live, stamp_graph(None), "n1")
        assert refused.status_code == 422
        assert "pack 'versioned' was removed" in refused.json()["error"]["message"]
        model = httpx.get(live.base + "/v1/models/versioned/stamp", timeout=10).json()
        assert model["available"] is False
        release.touch()
        assert mark(live, finished(live, in_flight)) == 1
        assert version_folders(packs_dir) == []
        index = json.loads((packs_dir / "index.json").read_text())
        assert index == {"packs": {}}
        # Installed again, it serves its node again.
        install(packs_dir, versioned_pack(tmp_path, "3.0.0", 3))
        assert packs_listing(live)["versioned"]["status"] == "idle"
        assert mark(live, run_to_end(live, stamp_graph(None), "n1")) == 3
