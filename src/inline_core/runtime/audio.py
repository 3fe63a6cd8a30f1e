"""Audio takes: a soundtrack (`runtime.video.Audio`) as FLAC or WAV (torch-free).

WAV (16-bit PCM) through the standard library; FLAC (lossless, about half the size) through
PyAV, the `video` extra. A WAV's samples round to 16 bits, as every player reads them; a FLAC
keeps the same 16 bits, compressed. Neither format has a place for long metadata that every
reader keeps, so the graph and params ride in a WAV's `LIST/INFO` comment and a FLAC's tags.
"""

from __future__ import annotations

import importlib
import io
import json
import struct
import wave
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from inline_core.errors import RunFailed
from inline_core.runtime.video import VIDEO_HINT, VIDEO_MODULE, Audio, video_available

AUDIO_FORMATS = ("wav", "flac")
AUDIO_SUFFIXES = {"wav": ".wav", "flac": ".flac"}


def pcm16(audio: Audio) -> bytes:
    """The samples interleaved as little-endian 16-bit integers."""
    clipped = np.clip(audio.samples, -1.0, 1.0)
    ints = np.round(clipped * 32767.0).astype("<i2")
    return ints.T.tobytes()


def encode_audio(audio: Audio, format: str, metadata: Mapping[str, str] | None = None) -> bytes:
    if format == "wav":
        return encode_wav(audio, metadata)
    if format == "flac":
        return encode_flac(audio, metadata)
    raise RunFailed(f"unknown audio format {format!r}")


def encode_wav(audio: Audio, metadata: Mapping[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(audio.channels)
        out.setsampwidth(2)
        out.setframerate(audio.sample_rate)
        out.writeframes(pcm16(audio))
    data = buf.getvalue()
    if not metadata:
        return data
    return _with_info(data, json.dumps(dict(metadata), sort_keys=True))


def _with_info(data: bytes, comment: str) -> bytes:
    """The WAV with a `LIST/INFO` chunk holding `comment` (ICMT) appended, its RIFF size fixed."""
    text = comment.encode("utf-8") + b"\0"
    text += b"\0" * (len(text) % 2)
    info = b"INFO" + b"ICMT" + struct.pack("<I", len(text)) + text
    chunk = b"LIST" + struct.pack("<I", len(info)) + info
    body = data[8:] + chunk
    return b"RIFF" + struct.pack("<I", len(body)) + body


def encode_flac(audio: Audio, metadata: Mapping[str, str] | None = None) -> bytes:
    if not video_available():
        raise RunFailed(f"FLAC takes need PyAV: {VIDEO_HINT}; or ask for WAV")
    av = cast(Any, importlib.import_module(VIDEO_MODULE))
    buf = io.BytesIO()
    layout = "mono" if audio.channels == 1 else "stereo"
    with av.open(buf, "w", format="flac") as out:
        out.metadata.update(metadata or {})
        stream = out.add_stream("flac", rate=audio.sample_rate)
        stream.layout = layout
        stream.format = "s16"
        ints = np.round(np.clip(audio.samples, -1.0, 1.0) * 32767.0).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(ints.T.reshape(1, -1)), format="s16", layout=layout
        )
        frame.sample_rate = audio.sample_rate
        frame.pts = 0
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def decode_wav(data: bytes) -> Audio:
    """A WAV take's samples (the tests' comparisons)."""
    with wave.open(io.BytesIO(data), "rb") as reader:
        channels, rate = reader.getnchannels(), reader.getframerate()
        raw = reader.readframes(reader.getnframes())
    ints = np.frombuffer(raw, dtype="<i2").reshape(-1, channels).T
    return Audio((ints.astype(np.float32) / 32767.0), rate)
