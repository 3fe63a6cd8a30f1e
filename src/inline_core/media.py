"""Media kinds and sniffing them from bytes (never from a client's claimed content type)."""

from __future__ import annotations

from enum import StrEnum


class MediaKind(StrEnum):
    IMAGE = "image"
    VIDEO = "video"
    AUDIO = "audio"


_IMAGE_MIME = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}


def sniff(data: bytes) -> tuple[MediaKind, str] | None:
    """Return (kind, mime type) for recognised media bytes, else None."""
    for magic, mime in _IMAGE_MIME.items():
        if data.startswith(magic):
            return MediaKind.IMAGE, mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return MediaKind.IMAGE, "image/webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return MediaKind.AUDIO, "audio/wav"
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in (b"M4A ", b"M4B "):
            return MediaKind.AUDIO, "audio/mp4"
        if brand in (b"qt  ",):
            return MediaKind.VIDEO, "video/quicktime"
        return MediaKind.VIDEO, "video/mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return MediaKind.VIDEO, "video/webm"
    if data.startswith(b"OggS"):
        return MediaKind.AUDIO, "audio/ogg"
    if data.startswith(b"fLaC"):
        return MediaKind.AUDIO, "audio/flac"
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return MediaKind.AUDIO, "audio/mpeg"
    return None


def mime_for_suffix(suffix: str) -> str:
    return {
        ".png": "image/png",
        ".apng": "image/apng",
        ".jpg": "image/jpeg",
        ".jpeg": "image/jpeg",
        ".webp": "image/webp",
        ".gif": "image/gif",
        ".mp4": "video/mp4",
        ".webm": "video/webm",
        ".wav": "audio/wav",
        ".mp3": "audio/mpeg",
        ".ogg": "audio/ogg",
        ".flac": "audio/flac",
    }.get(suffix.lower(), "application/octet-stream")
