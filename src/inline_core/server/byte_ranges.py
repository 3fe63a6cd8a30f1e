"""`Range: bytes=...` for take downloads (video scrubbing, resumed downloads).

One range is served as 206; several ranges are answered with the whole file (200), which HTTP
allows; a range that is malformed or names no byte of the file is a 416.
"""

from __future__ import annotations

import re

from inline_core.errors import RangeNotSatisfiable

_ONE_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) byte offsets, inclusive, or None to send the whole file."""
    if header is None:
        return None
    value = header.strip().replace(" ", "")
    if value.startswith("bytes=") and "," in value:
        return None
    match = _ONE_RANGE.fullmatch(value)
    if match is None or match.group(1) == match.group(2) == "":
        raise RangeNotSatisfiable(f"malformed Range header {header!r}", size=size)
    first_raw, last_raw = match.groups()
    if first_raw == "":  # a suffix: the last N bytes
        length = int(last_raw)
        if length == 0 or size == 0:
            raise RangeNotSatisfiable(f"range {header!r} is empty", size=size)
        return max(0, size - length), size - 1
    first = int(first_raw)
    last = size - 1 if last_raw == "" else min(int(last_raw), size - 1)
    if first >= size or (last_raw != "" and int(last_raw) < first):
        raise RangeNotSatisfiable(f"range {header!r} is outside the {size} bytes", size=size)
    return first, last
