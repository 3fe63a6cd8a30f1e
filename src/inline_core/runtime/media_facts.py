"""A take's facts read from its bytes (torch-free): its content type and pixel size, a video's
frame count and rate, and its sound's rate, channels and length, so a client can lay it out and
time it before fetching it.

PNG and APNG through Pillow (headers only: the APNG's frame count is its `acTL` chunk); WAV
through the standard library; MP4 and FLAC through PyAV (the `video` extra) by demuxing, not
decoding: a fragmented MP4 (ours) states no frame count, so its packets are counted, and its
sound's length is its last packet's end. Without PyAV an MP4 keeps its content type alone.
"""

from __future__ import annotations

import importlib
import io
import logging
import wave
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
        if content_type == "audio/wav":
            return _wav_facts(data, content_type)
        if kind in (MediaKind.VIDEO, MediaKind.AUDIO) and video_available():
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


def _wav_facts(data: bytes, content_type: str) -> MediaFacts:
    with wave.open(io.BytesIO(data), "rb") as reader:
        rate, channels = reader.getframerate(), reader.getnchannels()
        return MediaFacts(
            content_type,
            sample_rate=rate,
            channels=channels,
            audio_s=reader.getnframes() / rate if rate else None,
        )


def _container_facts(data: bytes, content_type: str) -> MediaFacts:
    av = cast(Any, importlib.import_module(VIDEO_MODULE))
    with av.open(io.BytesIO(data), "r") as container:
        video = container.streams.video[0] if container.streams.video else None
        sound = container.streams.audio[0] if container.streams.audio else None
        if video is None and sound is None:
            return MediaFacts(content_type)
        frames, end = 0, 0
        for packet in container.demux(*(s for s in (video, sound) if s is not None)):
            if not packet.size:
                continue
            if packet.stream is video:
                frames += 1
            elif packet.pts is not None:
                end = max(end, int(packet.pts) + int(packet.duration or 0))
        heard: dict[str, Any] = {}
        if sound is not None:
            rate = int(sound.codec_context.sample_rate)
            base = sound.time_base
            heard = {
                "sample_rate": rate,
                "channels": int(sound.codec_context.channels),
                "audio_s": float(end * base) if base else None,
            }
        if video is None:
            return MediaFacts(content_type, **heard)
        fps = video.average_rate or video.guessed_rate
        return MediaFacts(
            content_type,
            int(video.codec_context.width),
            int(video.codec_context.height),
            frames,
            float(fps) if fps else None,
            **heard,
        )
