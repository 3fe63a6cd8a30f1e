"""Content-addressed assets and the media resolver."""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path

import pytest
from PIL import Image
from store_support import claim, lease, open_store

from inline_core.errors import NotFound, PayloadTooLarge, UnsupportedMedia
from inline_core.media import MediaKind
from inline_core.server.assets import AssetStore, StoredMediaResolver
from inline_core.server.run_state import NewRun, RunStatus
from inline_core.takes import MediaFacts, MediaRef, Take


def png_bytes(colour: tuple[int, int, int] = (200, 10, 10)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(buf, format="PNG")
    return buf.getvalue()


def test_same_bytes_give_the_same_id(tmp_path: Path) -> None:
    store = AssetStore(tmp_path / "assets", max_bytes=1 << 20)
    data = png_bytes()
    first = store.save(data)
    second = store.save(data)
    assert first.id == second.id == "sha256-" + hashlib.sha256(data).hexdigest()
    assert first.kind == MediaKind.IMAGE and first.content_type == "image/png"
    assert first.size == len(data)
    assert first.path.read_bytes() == data
    assert store.get(first.id).size == len(data)
    # Nothing but the asset itself is left in the folder (no temp files).
    assert [p.name for p in (tmp_path / "assets").iterdir()] == [first.id]


def test_non_media_bytes_are_refused(tmp_path: Path) -> None:
    store = AssetStore(tmp_path / "assets", max_bytes=1 << 20)
    with pytest.raises(UnsupportedMedia):
        store.save(b'{"not": "an image"}')
    with pytest.raises(UnsupportedMedia):
        store.save(b"")
    assert list((tmp_path / "assets").iterdir()) == []


def test_an_upload_over_the_limit_is_refused_while_streaming(tmp_path: Path) -> None:
    store = AssetStore(tmp_path / "assets", max_bytes=1000)
    upload = store.begin()
    upload.write(png_bytes()[:8] + b"\0" * 592)
    with pytest.raises(PayloadTooLarge):
        upload.write(b"\0" * 401)
    assert upload.size == 600  # the chunk that crossed the limit was never written
    assert list((tmp_path / "assets").iterdir()) == []


@pytest.mark.parametrize(
    "bad_id",
    ["../runs.db", "sha256-../../etc/passwd", "sha256-" + "g" * 64, "/etc/passwd", "", "sha256-"],
)
def test_malformed_asset_ids_never_reach_the_disk(tmp_path: Path, bad_id: str) -> None:
    store = AssetStore(tmp_path / "assets", max_bytes=1 << 20)
    with pytest.raises(NotFound):
        store.path(bad_id)


def test_resolver_finds_assets_and_recorded_takes_only_inside_their_roots(tmp_path: Path) -> None:
    assets = AssetStore(tmp_path / "assets", max_bytes=1 << 20)
    runs = open_store(tmp_path, None)
    takes_root = tmp_path / "takes"
    takes_root.mkdir()
    try:
        asset = assets.save(png_bytes())
        inside_file = takes_root / "tk_aa.png"
        inside_file.write_bytes(png_bytes())
        outside_file = tmp_path / "secret.png"
        outside_file.write_bytes(png_bytes())
        runs.insert_run(NewRun("run_a", "t", {"nodes": []}, "h", None, ("t",), time.time()))
        [running] = claim(runs)
        recorded = [
            Take(
                "tk_aa", "run_a", "t", MediaKind.IMAGE, "u", "sha256-x", {}, 1.0, str(inside_file),
                MediaFacts("image/png"),
            ),
            Take(
                "tk_bb", "run_a", "t", MediaKind.IMAGE, "u", "sha256-x", {}, 1.0, str(outside_file),
                MediaFacts("image/png"),
            ),
        ]
        runs.finish_future(
            lease(running), 1, RunStatus.DONE, nodes={}, fraction=1.0, takes=recorded
        ).result()
        resolver = StoredMediaResolver(assets, runs, takes_root)

        assert resolver.resolve(MediaRef("asset", asset.id)) == asset.path
        assert resolver.resolve(MediaRef("take", "tk_aa")) == inside_file
        with pytest.raises(NotFound):
            resolver.resolve(MediaRef("take", "tk_bb"))  # recorded, but outside the takes root
        with pytest.raises(NotFound):
            resolver.resolve(MediaRef("take", "tk_cc"))
        with pytest.raises(NotFound):
            resolver.resolve(MediaRef("asset", "sha256-" + "0" * 64))
    finally:
        runs.close()
