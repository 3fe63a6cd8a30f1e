"""What the video families' nodes check and convert alike (torch-free): the params that are whole
numbers, and the encoders an output format needs (PyAV for MP4 and FLAC takes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.errors import InvalidRequest
from inline_core.runtime.video import VIDEO_HINT, video_available

WHOLE_NUMBERS = ("width", "height", "frames", "fps", "steps", "seed")


def whole_numbers(request: dict[str, Any]) -> None:
    """The request's size, frames, fps, steps and seed as ints (the validator checked them)."""
    for name in WHOLE_NUMBERS:
        request[name] = int(request[name])


def check_encoders(
    params: Mapping[str, Any], node_id: str, png: str, *, audio: bool = False
) -> None:
    """Refuse an output format this install cannot encode: `format` mp4 (and, where the node
    has a soundtrack, `audio_format` flac) without PyAV. `png`: what format png gives instead."""
    if video_available():
        return
    if params.get("format") == "mp4":
        raise InvalidRequest(
            f"param 'format' mp4 needs PyAV, which is not installed: {VIDEO_HINT}; or ask "
            f"for format png ({png})",
            node_id=node_id,
        )
    if audio and params.get("audio_format") == "flac":
        raise InvalidRequest(
            f"param 'audio_format' flac needs PyAV, which is not installed: {VIDEO_HINT}; "
            "or ask for wav",
            node_id=node_id,
        )
