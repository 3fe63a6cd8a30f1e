"""ComfyUI's per-layer quantization marker, `<layer>.comfy_quant` (torch-free): what a layer's
bytes of JSON say about its format.

ComfyUI writes it in `comfy/ops.py` (`_quantized_weight_state_dict`): `{"format": name}`, with
`"convrot": true, "convrot_groupsize": G` for an `int8_tensorwise` layer whose weight is rotated
(`files/int8.py`), and reads the rotation from the top level or from a `"params"` object, 256 by
default (`_load_quantized_module`). Formats are `QUANT_ALGOS`' names in `comfy/quant_ops.py`.

A file may instead list its layers once, in its header's metadata: `_quantization_metadata`, a
JSON `{"layers": {layer: {"format": ...}, ...}}` keyed by the file's own layer names, which
ComfyUI turns into the same per-layer markers before loading (`comfy/utils.py`,
`convert_old_quants`; the metadata's entry wins over a marker tensor of the same layer).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from inline_core.errors import RunFailed

MARKER = ".comfy_quant"
FP8_FORMATS = ("float8_e4m3fn", "float8_e5m2")
# The formats this server reads: fp8 with per-tensor scales (`scales.py`), NVFP4 (`nvfp4.py`)
# and int8 (`int8.py`). ComfyUI knows more (mxfp8, convrot_w4a4, asym_w4a8_int8, awq_w4a16).
READ = (*FP8_FORMATS, "nvfp4", "int8_tensorwise")
DEFAULT_GROUP = 256  # ComfyUI's default convrot_groupsize
FILE_METADATA = "_quantization_metadata"  # the header metadata's key listing every layer


@dataclass(frozen=True)
class QuantMarker:
    format: str | None
    convrot: bool = False
    convrot_groupsize: int = DEFAULT_GROUP


def parse(raw: bytes, layer: str) -> QuantMarker:
    """A layer's marker bytes, read as ComfyUI reads them; `RunFailed` naming the layer when they
    are not a JSON object or its rotation fields are not a flag and a whole number."""
    try:
        found: object = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFailed(f"{layer}{MARKER} is not JSON") from exc
    if not isinstance(found, dict):
        raise RunFailed(f"{layer}{MARKER} is not a JSON object")
    conf = cast(dict[str, object], found)
    params = conf.get("params")
    nested = cast(dict[str, object], params) if isinstance(params, dict) else {}
    name = conf.get("format")
    convrot = conf.get("convrot", nested.get("convrot", False))
    group = conf.get("convrot_groupsize", nested.get("convrot_groupsize", DEFAULT_GROUP))
    if not isinstance(convrot, bool) or isinstance(group, bool) or not isinstance(group, int):
        raise RunFailed(
            f"{layer}{MARKER} has convrot {convrot!r} and convrot_groupsize {group!r}: not a "
            "flag and a whole number"
        )
    return QuantMarker(name if isinstance(name, str) else None, convrot, group)


def unread_format(marker: QuantMarker, layer: str) -> str | None:
    """Why a layer marked so cannot be read here (None: its format is one this server reads)."""
    if marker.format in READ:
        return None
    return (
        f"{layer} is quantized as {marker.format!r} (its {MARKER[1:]}): a format this server "
        f"does not read (it reads {', '.join(READ)})"
    )


def file_markers(metadata: Mapping[str, str], view: str | None = None) -> dict[str, bytes]:
    """Each layer's marker bytes from a header's `_quantization_metadata`, keyed as the loaded
    tensors are (a view's prefix cut, other layers left out); `RunFailed` when it is not
    `{"layers": {name: object}}`."""
    raw = metadata.get(FILE_METADATA)
    if raw is None:
        return {}
    try:
        found: object = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RunFailed(f"its header's {FILE_METADATA} is not JSON") from exc
    layers = cast(dict[str, object], found).get("layers") if isinstance(found, dict) else None
    if not isinstance(layers, dict):
        raise RunFailed(f'its header\'s {FILE_METADATA} has no "layers" object')
    out: dict[str, bytes] = {}
    for name, conf in cast(dict[str, object], layers).items():
        if not isinstance(conf, dict):
            raise RunFailed(f"its header's {FILE_METADATA} describes {name} with {conf!r}")
        if view and not name.startswith(view):
            continue
        out[name[len(view or "") :] + MARKER] = json.dumps(conf).encode()
    return out
