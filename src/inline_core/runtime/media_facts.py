"""A take's facts read from its bytes (torch-free): its content type and pixel size, and a
video's frame count and rate, so a client can lay it out and time it before fetching it.

PNG and APNG through Pillow (headers only: the APNG's frame count is its `acTL` chunk); MP4
through PyAV (the `video` extra) by demuxing, not decoding: a fragmented MP4 (ours) states no
frame count, so its packets are counted. Without PyAV an MP4 keeps its content type alone.
"""

from __future__ import annotations

import importlib
import io
import logging
from typing import Any, cast

from PIL import Image, UnidentifiedImageError

from inline_core.media import MediaKind, mime_for_suffix
from inline_core.runtime.video import VIDEO_MODULE, video_available
from inline_core.takes import MediaFacts

log = logging.getLogger(__name__)

_PILLOW_FORMATS = frozenset({"image/png", "image/apng", "image/jpeg", "image/webp", "image/gif"})


def media_facts(data: bytes, suffix: str, kind: MediaKind) -> MediaFacts:
    """The facts of a take file's bytes (a file it cannot read keeps its content type alone)."""
    content_type = mime_for_suffix(suffix)
    try:
        if content_type in _PILLOW_FORMATS:
            return _image_facts(data, content_type, kind)
        if kind == MediaKind.VIDEO and video_available():
            return _container_facts(data, content_type)
    except (OSError, ValueError, UnidentifiedImageError) as exc:
        log.warning("could not read the facts of a %s take: %s", content_type, exc)
    except Exception as exc:  # PyAV's errors: a file it cannot read never fails the take
        log.warning("could not read the facts of a %s take: %s", content_type, exc)
    return MediaFacts(content_type)


def _image_facts(data: bytes, content_type: str, kind: MediaKind) -> MediaFacts:
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        if kind != MediaKind.VIDEO:
            return MediaFacts(content_type, width, height)
        frames = int(getattr(image, "n_frames", 1))
        delay_ms = image.info.get("duration")  # the first frame's; ours are all equal
        fps = 1000.0 / float(delay_ms) if delay_ms else None
        return MediaFacts(content_type, width, height, frames, fps)


def _container_facts(data: bytes, content_type: str) -> MediaFacts:
    av = cast(Any, importlib.import_module(VIDEO_MODULE))
    with av.open(io.BytesIO(data), "r") as container:
        if not container.streams.video:
            return MediaFacts(content_type)
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        frames = sum(1 for packet in container.demux(stream) if packet.size)
        return MediaFacts(
            content_type,
            int(stream.codec_context.width),
            int(stream.codec_context.height),
            frames,
            float(rate) if rate else None,
        )
