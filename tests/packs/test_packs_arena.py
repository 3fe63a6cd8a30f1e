"""Images cross in the arena: shared memory the server makes for each worker, sealed so neither
side can cut it short under the other's mapping. An input there is read without a file, and gets
one only when a node asks for it; an image too large for the arena crosses as a raw pixel file;
a raw pixel file cut short is refused, not read past its end."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest
from PIL import Image, ImageOps

from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall
from inline_core.packs.arena import make_arena
from inline_core.packs.host import PackHost
from inline_core.packs.raw_pixels import RawPixelReader, RawPixelsError
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core_sdk.arena import ArenaError
from inline_core_sdk.image_ref import ImageRef
from tests.packs.pack_support import gradient

MB = 1024 * 1024


@pytest.fixture
def host(packs_home: Path) -> Generator[PackHost]:
    host = PackHost(packs_home, Registry(), watch=False)
    host.start()
    try:
        yield host
    finally:
        host.close()


def run_node(host: PackHost, tmp_path: Path, node_type: str, image: Image.Image) -> Image.Image:
    pack, node = node_type.split("/")
    loaded = host.slots[pack].loaded
    assert loaded is not None
    ctx = ExecutionContext(run_id="run_arena", takes=FileTakeStore(tmp_path / "takes"))
    call = NodeCall(ctx, "n1", {"direction": "horizontal"}, {"image": image})
    _, values = host.outputs(loaded.nodes[node], call)
    out = values["image"]
    assert isinstance(out, Image.Image)
    return out


def large_rgba(size: int) -> Image.Image:
    """Past the arena's half as RGBA (4200 px: 67 MiB), and different in every direction."""
    ramp = Image.linear_gradient("L").resize((size, size))
    return Image.merge("RGBA", (ramp, ramp.rotate(90), ramp.rotate(180), ramp.rotate(270)))


def test_the_arena_cannot_be_cut_short_or_grown() -> None:
    made = make_arena(MB)
    assert made is not None and made.fd is not None
    try:
        for size in (0, MB // 2, 2 * MB):
            with pytest.raises(PermissionError):
                os.ftruncate(made.fd, size)
        assert os.fstat(made.fd).st_size == MB
    finally:
        made.close()


def test_an_arena_half_refuses_what_it_cannot_hold() -> None:
    made = make_arena(8192)
    assert made is not None
    try:
        outputs = made.arena.outputs
        assert outputs.put(b"x" * (outputs.end - outputs.start + 1)) is None
        for offset, size in ((0, 16), (outputs.end - 8, 16), (outputs.start, 0)):
            with pytest.raises(ArenaError), outputs.view(offset, size):
                pass
        first, second = outputs.put(b"a" * 10), outputs.put(b"b" * 10)
        assert first == outputs.start and second is not None and second % 64 == 0
        outputs.begin_call()
        assert outputs.put(b"c") == outputs.start
    finally:
        made.close()


def test_an_input_in_the_arena_gets_its_file_only_when_asked(tmp_path: Path) -> None:
    made = make_arena(MB)
    assert made is not None
    image = gradient(32)
    offset = made.arena.inputs.put(image.tobytes())
    assert offset is not None
    file = tmp_path / "in-image.raw"
    ref = ImageRef.in_arena(made.arena.inputs, offset, file, 32, 32, "RGB", "image")
    try:
        assert ref.to_pil().tobytes() == image.tobytes() == ref.read_bytes()
        assert ref == ImageRef(file, 32, 32, "RGB") and "in-image.raw" in repr(ref)
        assert hash(ref) == hash(ImageRef(file, 32, 32, "RGB"))
        assert not file.exists()  # nothing asked for the file yet
        assert ref.path.read_bytes() == image.tobytes()
    finally:
        made.close()


def test_a_node_reading_its_inputs_file_gets_the_pixels(host: PackHost, tmp_path: Path) -> None:
    image = gradient(24)
    assert run_node(host, tmp_path, "faults/echo", image).tobytes() == image.tobytes()


def test_images_too_large_for_the_arena_cross_as_raw_pixel_files(
    host: PackHost, tmp_path: Path
) -> None:
    for image, as_files in ((gradient(64).convert("RGBA"), False), (large_rgba(4200), True)):
        flipped = run_node(host, tmp_path, "pillow11/flip", image)
        assert flipped.tobytes() == ImageOps.mirror(image).tobytes()
        worker = host.slots["pillow11"].worker
        assert worker is not None
        call_dir = worker.process.scratch / "call"
        files = {p.name: p.stat().st_size for p in call_dir.iterdir()}
        size = image.width * image.height * 4
        assert files == ({"in-image.raw": size, "image.raw": size} if as_files else {})


def test_a_raw_pixel_file_cut_short_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "out.raw"
    file.write_bytes(b"\0" * (16 * 16 * 3 - 1))
    with pytest.raises(RawPixelsError, match="holds 767 bytes, not 768"):
        RawPixelReader().image(file, 16, 16, "RGB")

