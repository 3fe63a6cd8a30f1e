"""Images cross in the arena: shared memory the server makes for each worker, sealed so neither
side can cut it short under the other's mapping. An input there is read without a file, and gets
one only when a node asks for it; an image too large for the arena crosses as a raw pixel file;
a raw pixel file cut short is refused, not read past its end. An arena lives as long as its
worker: one killed with -9 or crashing mid-call leaves none behind, and neither does a closed
host (a memfd is freed with the last mapping of it, whoever dies)."""

from __future__ import annotations

import os
import signal
from collections.abc import Generator
from pathlib import Path

import pytest
from PIL import Image, ImageOps

from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall
from inline_core.packs.arena import make_arena
from inline_core.packs.errors import PackNodeFailed
from inline_core.packs.host import PackHost
from inline_core.packs.raw_pixels import RawPixelReader, RawPixelsError
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core_sdk.arena import ArenaError
from inline_core_sdk.image_ref import ImageRef
from tests.packs.pack_support import gradient
from tests.server.server_support import wait_until

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


def arenas(pid: int | None = None) -> set[str]:
    """The inodes of the pack arenas a process has mapped (this one by default)."""
    maps = Path(f"/proc/{pid if pid is not None else 'self'}/maps").read_text()
    return {line.split()[4] for line in maps.splitlines() if "memfd:inline-pack-arena" in line}


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


def test_a_large_calls_pages_are_given_back_when_the_next_call_begins() -> None:
    made = make_arena(4 * MB, keep=64 * 1024)
    assert made is not None and made.fd is not None

    def allocated() -> int:
        assert made is not None and made.fd is not None
        return os.fstat(made.fd).st_blocks * 512

    try:
        inputs = made.arena.inputs
        assert inputs.put(b"\x07" * MB) == inputs.start and allocated() >= MB
        inputs.begin_call()
        assert allocated() <= 64 * 1024  # what it keeps
        small = inputs.put(b"\x09" * 1000)
        assert small is not None
        with inputs.view(small, 1000) as kept:
            assert bytes(kept) == b"\x09" * 1000
        with inputs.view(inputs.start + MB - 8, 8) as released:
            assert bytes(released) == bytes(8)  # a released page reads as zeros
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


def test_a_worker_killed_with_9_leaves_no_arena_behind(host: PackHost, tmp_path: Path) -> None:
    before = arenas()
    image = gradient(24)
    assert run_node(host, tmp_path, "faults/echo", image).tobytes() == image.tobytes()
    worker = host.slots["faults"].worker
    assert worker is not None and worker.process.pid is not None
    [arena] = arenas(worker.process.pid)
    assert arenas() == before | {arena}  # the server maps the worker's arena too
    os.kill(worker.process.pid, signal.SIGKILL)
    wait_until(lambda: True if not worker.process.alive else None, "the worker to be gone")
    # Its next use finds it dead, lets its arena go and starts another with an arena of its own.
    assert run_node(host, tmp_path, "faults/echo", image).tobytes() == image.tobytes()
    renewed = host.slots["faults"].worker
    assert renewed is not None and renewed.process.pid is not None
    [fresh] = arenas(renewed.process.pid)
    assert fresh != arena and arenas() == before | {fresh}
    host.close()
    assert arenas() == before


def test_a_worker_crashing_mid_call_leaves_no_arena_behind(host: PackHost, tmp_path: Path) -> None:
    before = arenas()
    with pytest.raises(PackNodeFailed, match="crashed"):
        run_node(host, tmp_path, "segv/crash", gradient(24))  # its input was in the arena
    assert host.slots["segv"].worker is None and arenas() == before
