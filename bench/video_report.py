"""How the video benches end (`wan_video.py`, `ltx2_video.py`): their table printed, their
results written as JSON beside the machine they ran on and its load at the start and the end."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def report(
    lines: Sequence[tuple[str, str, str]],
    results: dict[str, Any],
    target: Path,
    load_start: Sequence[float],
    width: int,
    **machine: Any,
) -> None:
    """Print `(measure, figures, ratio)` lines, `width` wide for the figures, and write
    `results` to `target` with the machine (`machine`: the bench's own settings too)."""
    first = max(len(m) for m, _, _ in lines)
    for measure, figures, ratio in lines:
        print(f"{measure:<{first}}  {figures:<{width}}  {ratio}")
    about = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        **machine,
        "loadAverageStart": list(load_start),
        "loadAverageEnd": list(os.getloadavg()),
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"machine": about, **results}, indent=2) + "\n")
    print(f"wrote {target}")
