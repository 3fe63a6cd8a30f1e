"""Byte counts for people: `human_size(2**50)` is "1.0 PiB", never "1073741824 MB"."""

from __future__ import annotations

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_size(count: float) -> str:
    """`count` bytes in the largest binary unit it fills at least once, to a tenth."""
    if abs(count) < 1024:
        return "1 byte" if count == 1 else f"{count:.0f} bytes"
    value = count / 1024
    step = 0
    while abs(value) >= 1024 and step < len(_UNITS) - 1:
        value /= 1024
        step += 1
    return f"{value:.1f} {_UNITS[step]}"
