"""The takes' PNG encoder: the same pixels as the image, a valid PNG any decoder reads, the
text chunks Pillow's `add_text` writes, whichever deflater and however many bands."""

from __future__ import annotations

import io
import struct
import zlib
from types import ModuleType

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngImageFile

from inline_core.runtime import png
from inline_core.runtime.png import PNG_OPTIONS, Deflater, deflater, encode_png

ZLIB_NG = deflater()


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every chunk of a PNG, each CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, out = 8, list[tuple[bytes, bytes]]()
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(body, zlib.crc32(kind)) == crc
        out.append((kind, body))
        at += 12 + length
    return out


def _picture(mode: str, width: int, height: int) -> Image.Image:
    rng = np.random.default_rng(3)
    channels = len(mode)
    smooth = np.linspace(0, 255, width * height * channels).reshape(height, width, channels)
    noisy = smooth + rng.integers(-20, 21, smooth.shape)
    pixels = np.clip(noisy, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels[..., 0] if channels == 1 else pixels, mode)


DEFLATERS: list[tuple[str, Deflater]] = [("zlib", zlib)]
if ZLIB_NG[0] == "zlib-ng":
    DEFLATERS.append(ZLIB_NG)


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA"])
@pytest.mark.parametrize("threads", [1, 5])
@pytest.mark.parametrize("name", [name for name, _ in DEFLATERS])
def test_same_pixels_valid_png(mode: str, threads: int, name: str) -> None:
    module = dict(DEFLATERS)[name]
    image = _picture(mode, 301, 467)  # an odd size, several bands of unequal height
    data = encode_png(image, {"graph": "{}"}, threads=threads, module=module)
    kinds = [kind for kind, _ in _chunks(data)]
    assert kinds == [b"IHDR", b"tEXt", b"IDAT", b"IEND"]
    # zlib checks the stream's Adler-32: the bands make one stream with one checksum.
    idat = dict(_chunks(data))[b"IDAT"]
    assert len(zlib.decompress(idat)) == 467 * (1 + 301 * len(mode))
    decoded = Image.open(io.BytesIO(data))
    decoded.load()
    assert decoded.mode == mode and decoded.size == image.size
    assert np.array_equal(np.asarray(decoded), np.asarray(image))


def test_size_within_a_few_percent_of_pillows() -> None:
    image = _picture("RGB", 512, 512)
    ours = encode_png(image, {}, threads=4)
    buf = io.BytesIO()
    image.save(buf, format="PNG", **PNG_OPTIONS)
    assert len(ours) <= len(buf.getvalue()) * 1.05


def test_text_chunks_read_back_as_pillow_writes_them() -> None:
    text = {"graph": '{"a": 1}', "params": "caf\u00e9", "prompt": "\u732b and \u72ac"}
    data = encode_png(_picture("RGB", 8, 8), text)
    kinds = [kind for kind, _ in _chunks(data)]
    assert kinds == [b"IHDR", b"tEXt", b"tEXt", b"iTXt", b"IDAT", b"IEND"]
    decoded = Image.open(io.BytesIO(data))
    assert isinstance(decoded, PngImageFile)
    assert dict(decoded.text) == text


@pytest.mark.parametrize("mode", ["P", "I;16", "1"])
def test_other_modes_go_through_pillow(mode: str) -> None:
    if mode == "I;16":
        image = Image.fromarray(np.arange(1200, dtype=np.uint16).reshape(30, 40) * 50)
    else:
        image = _picture("L", 40, 30).convert(mode)
    assert image.mode == mode
    data = encode_png(image, {"graph": "{}"})
    decoded = Image.open(io.BytesIO(data))
    assert isinstance(decoded, PngImageFile)
    decoded.load()
    assert np.array_equal(np.asarray(decoded), np.asarray(image))
    assert decoded.text == {"graph": "{}"}


def test_one_row_and_one_pixel_images() -> None:
    for width, height in ((1, 1), (700, 1), (1, 700)):
        image = _picture("RGB", width, height)
        decoded = Image.open(io.BytesIO(encode_png(image, {}, threads=8)))
        assert np.array_equal(np.asarray(decoded), np.asarray(image))


def test_the_fastest_installed_deflater_is_named() -> None:
    name, module = deflater()
    assert name in ("zlib", "zlib-ng")
    assert isinstance(module, ModuleType)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_picture_is_cut_into_bands_of_bounded_size(threads: int) -> None:
    image = _picture("RGBA", 700, 600)  # 1.6 MiB of rows: two bands at least, on one thread too
    assert len(png._bands(600, 1 + 700 * 4, threads)) >= 2  # pyright: ignore[reportPrivateUsage]
    data = encode_png(image, {}, threads=threads)
    idat = dict(_chunks(data))[b"IDAT"]
    assert len(zlib.decompress(idat)) == 600 * (1 + 700 * 4)
    decoded = Image.open(io.BytesIO(data))
    assert np.array_equal(np.asarray(decoded), np.asarray(image))
