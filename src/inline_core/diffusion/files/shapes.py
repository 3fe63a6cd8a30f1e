"""Config inference from tensor shapes: the machinery every family's rule table uses (torch-free).

A single-file checkpoint carries weights but no config. Everything a config needs is either visible
in the shapes (widths, layer counts, head size) or a fixed property of the architecture (rope, eps),
so a real 12 GB file and the kit's 2 MB one go through the same code. A family writes its rules with
these helpers; the shared formats (`diffusion/formats/`) are written the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from inline_core.diffusion.files.header import TensorInfo, read_view
from inline_core.diffusion.files.nvfp4 import unpacked
from inline_core.diffusion.files.scales import weights_only

Shapes = Mapping[str, tuple[int, ...]]
SAFETENSORS_SUFFIXES = (".safetensors", ".sft")


class ConfigInferenceError(ValueError):
    """The shapes do not describe a model this rule table can build."""


def strip_prefix(
    shapes: Shapes, prefixes: tuple[str, ...]
) -> tuple[str, dict[str, tuple[int, ...]]]:
    """Remove the first of `prefixes` that every key starts with (or none)."""
    for prefix in prefixes:
        if shapes and all(k.startswith(prefix) for k in shapes):
            return prefix, {k[len(prefix) :]: v for k, v in shapes.items()}
    return "", dict(shapes)


def count_blocks(shapes: Shapes, pattern: str) -> int:
    """How many numbered blocks `pattern` (with one `(\\d+)` group) finds: the largest index + 1."""
    rx = re.compile(pattern)
    found = {int(m.group(1)) for k in shapes if (m := rx.match(k))}
    return max(found) + 1 if found else 0


def shape_of(shapes: Shapes, *names: str) -> tuple[int, ...]:
    """The shape of the first of `names` present; `ConfigInferenceError` naming the first if
    none is."""
    for name in names:
        if name in shapes:
            return shapes[name]
    raise ConfigInferenceError(f"missing tensor {names[0]!r}")


def weight_shapes(header: Mapping[str, TensorInfo]) -> dict[str, tuple[int, ...]]:
    """The weights' shapes in a header: scales left out (`scales.py`), NVFP4 weights at their
    dequantized shape (`nvfp4.py`)."""
    return {k: v.shape for k, v in weights_only(unpacked(header)).items()}


def read_shapes(path: Path, view: str | None = None) -> dict[str, tuple[int, ...]] | None:
    """Tensor shapes from a safetensors header (of a checkpoint's `view`: its prefix cut), as
    `weight_shapes` gives them; None when the file cannot be read as one."""
    if path.suffix.lower() not in SAFETENSORS_SUFFIXES:
        return None
    try:
        header: dict[str, TensorInfo] = read_view(path, view)
    except Exception:  # an unreadable or malformed header: not identifiable
        return None
    return weight_shapes(header)
