"""The disk budget: uploads refused (507) below the free-space floor or past the assets cap, and a
take the disk cannot hold ending its run with a clear error and no half-written file.

The floor is set relative to the real free space, so nothing here fills the disk; the one test of
a truly full disk mounts a 256 KB tmpfs in a private mount namespace (skipped where the system
does not allow one).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from server_support import HERE, SRC

from inline_core.config import Config
from inline_core.errors import InsufficientStorage, RunFailed
from inline_core.media import MediaKind
from inline_core.runtime.disk_space import MB, free_bytes
from inline_core.runtime.file_store import FileTakeStore, take_id_for
from inline_core.server.app import create_app
from inline_core.server.assets import AssetStore, DiskBudget
from inline_core.sizes import human_size


def png_bytes(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(buf, format="PNG")
    return buf.getvalue()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_the_settings_are_read_from_the_environment() -> None:
    config = Config.from_env(
        {
            "INLINE_MIN_FREE_DISK_MB": "2048",
            "INLINE_MAX_ASSETS_GB": "1.5",
            "INLINE_MAX_WEBSOCKETS": "10",
            "INLINE_MAX_WEBSOCKETS_PER_RUN": "3",
        }
    )
    assert (config.min_free_disk_mb, config.max_assets_gb) == (2048, 1.5)
    assert (config.max_websockets, config.max_websockets_per_run) == (10, 3)
    defaults = Config.from_env({"INLINE_MAX_ASSETS_GB": "0"})
    assert (defaults.min_free_disk_mb, defaults.max_assets_gb) == (1024, None)
    assert (defaults.max_websockets, defaults.max_websockets_per_run) == (2000, 64)


def test_an_upload_below_the_free_space_floor_is_a_507_envelope(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    floor_mb = free_bytes(tmp_path) // MB + 1024 * 1024  # a terabyte more than there is
    config = Config(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        run_workers=1,
        min_free_disk_mb=floor_mb,
    )
    with TestClient(create_app(config)) as client:
        response = client.post(
            "/v1/assets", content=png_bytes((1, 2, 3)), headers={"content-type": "image/png"}
        )
    assert response.status_code == 507
    error = response.json()["error"]
    assert error["code"] == "insufficient_storage"
    assert "INLINE_MIN_FREE_DISK_MB" in error["message"]
    # Sizes in human units: the floor is a terabyte and more, said in TiB, not as millions of MB.
    assert re.search(
        r"\d+\.\d [KMGTP]iB free on the data disk, and \d+\.\d TiB are kept free", error["message"]
    ), error["message"]
    assert list(config.assets_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (256 * MB, "256.0 MiB"),
        (3 * 1024 * MB // 2, "1.5 GiB"),
        (2**50, "1.0 PiB"),
        (10**16, "8.9 PiB"),
    ],
)
def test_sizes_in_messages_are_in_human_units(count: int, said: str) -> None:
    assert human_size(count) == said


def test_an_upload_is_refused_while_streaming_once_it_would_cross_the_floor(
    tmp_path: Path,
) -> None:
    root = tmp_path / "assets"
    root.mkdir()
    room = 16 * MB  # what the floor leaves for this upload
    budget = DiskBudget(min_free_bytes=free_bytes(root) - room)
    store = AssetStore(root, max_bytes=256 * MB, budget=budget)
    upload = store.begin()
    chunk = b"\0" * MB
    written = 0
    with pytest.raises(InsufficientStorage, match="INLINE_MIN_FREE_DISK_MB"):
        upload.write(png_bytes((9, 9, 9))[:8] + chunk[8:])
        written += 1
        while written < 64:
            upload.write(chunk)
            written += 1
    assert 1 <= written < 64  # some bytes were taken, then the floor stopped it
    assert list(root.iterdir()) == []  # the temp file went with it


def test_the_assets_cap_counts_stored_and_in_flight_bytes(tmp_path: Path) -> None:
    root = tmp_path / "assets"
    a, b, c, d = (png_bytes((i, 0, 0)) for i in range(4))
    cap = len(a) + len(b) + len(c) // 2
    store = AssetStore(root, max_bytes=MB, budget=DiskBudget(max_total_bytes=cap))
    first = store.save(a)
    store.save(b)
    store.save(a)  # the same bytes again do not grow the folder ...
    assert store.stored_bytes() == len(a) + len(b)
    with pytest.raises(InsufficientStorage, match="INLINE_MAX_ASSETS_GB"):
        store.save(c)  # ... but new ones past the cap are refused
    store.save(b)  # and bytes already stored are still taken at the cap
    assert leftovers(root) == []

    # A new process measures what is already stored. Two uploads that each fit but not together
    # cannot both land: what is in flight counts.
    cap = len(a) + len(b) + len(c) + len(d) // 2
    again = AssetStore(root, max_bytes=MB, budget=DiskBudget(max_total_bytes=cap))
    assert again.stored_bytes() == len(a) + len(b)
    one, two = again.begin(), again.begin()
    one.write(c)
    two.write(d)
    with pytest.raises(InsufficientStorage):
        two.finish()
    assert one.finish().size == len(c)
    assert again.stored_bytes() == len(a) + len(b) + len(c)
    assert again.get(first.id).size == len(a)
    assert leftovers(root) == []


def test_a_take_that_cannot_be_written_is_a_clear_error_and_leaves_no_temp_file(
    tmp_path: Path,
) -> None:
    takes = FileTakeStore(tmp_path / "takes")
    # A real OS error after the temp file was written: the final name is taken by a folder.
    blocked = takes.path_for(take_id_for("run_x", "n", 0), ".png")
    blocked.mkdir()
    with pytest.raises(RunFailed, match="could not write take") as failed:
        takes.write(
            run_id="run_x",
            node_id="n",
            index=0,
            kind=MediaKind.IMAGE,
            data=png_bytes((5, 5, 5)),
            suffix=".png",
            params={},
        )
    assert failed.value.node_id == "n"
    assert leftovers(takes.root) == [] and blocked.is_dir()


# Runs in a private user + mount namespace: the takes folder becomes a 256 KB tmpfs, is filled to
# the last byte, and a run is submitted; prints the run's final state and the folder's names.
FULL_DISK_RUN = r"""
import json, os, subprocess, sys, time
from pathlib import Path
data = Path(sys.argv[1])
takes = data / "takes"
takes.mkdir(parents=True)
mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(takes)])
if mounted.returncode != 0:
    sys.exit(77)
fd = os.open(takes / "filler", os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"\0" * 4096)
except OSError:
    pass
os.close(fd)
from fastapi.testclient import TestClient
from server_support import slow_graph
from inline_core.config import Config
from inline_core.server.app import create_app
config = Config(models_dir=data.parent / "models", data_dir=data, profile="cpu", dtype="float32",
                plugins=("server_nodes:register",), run_workers=1, min_free_disk_mb=0)
with TestClient(create_app(config)) as client:
    body = {"graph": slow_graph(steps=1), "target": "s"}
    run_id = client.post("/v1/runs", json=body).json()["runId"]
    for _ in range(2000):
        state = client.get(f"/v1/runs/{run_id}").json()
        if state["status"] in ("done", "error", "cancelled"):
            break
        time.sleep(0.01)
print(json.dumps({"state": state, "files": sorted(os.listdir(takes))}))
"""


def test_a_run_whose_take_does_not_fit_on_the_disk_ends_with_insufficient_storage(
    tmp_path: Path,
) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or sys.platform != "linux":
        pytest.skip("needs unshare(1) for a private tmpfs")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(HERE)]))
    child = subprocess.run(
        [unshare, "-rm", sys.executable, "-c", FULL_DISK_RUN, str(tmp_path / "data")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if child.returncode == 77 or (child.returncode != 0 and "unshare" in child.stderr):
        pytest.skip(f"no private mount namespace here: {child.stderr.strip()[-200:]}")
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    state = result["state"]
    assert state["status"] == "error", state
    assert state["error"]["code"] == "insufficient_storage"
    assert state["error"]["nodeId"] == "s"
    assert "is full" in state["error"]["message"]
    assert result["files"] == ["filler"]  # no half-written take, no temp file
