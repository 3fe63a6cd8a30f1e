"""What a part's weight files hold, read from their headers (torch-free): how many numbers, and
in which floating dtype most of them are stored (scales left out; NVFP4 and int8 layers,
dequantized at load, count as numbers but not as a dtype). The device policy reads it to tell
whether a float32 copy of the part would fit its memory budget (`device/storage.py`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from inline_core.diffusion.files.header import HeaderError, read_view
from inline_core.diffusion.files.int8 import STORED as INT8
from inline_core.diffusion.files.nvfp4 import FORMAT as NVFP4
from inline_core.diffusion.files.nvfp4 import unpacked
from inline_core.diffusion.files.scales import FP8_DTYPES, weights_only
from inline_core.models.source import Source

# safetensors' names of the floating dtypes a part may be stored in, as torch names them.
FLOAT_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", **FP8_DTYPES}


@dataclass(frozen=True)
class StoredWeights:
    dtype: str  # the torch name of the floating dtype most of its numbers are stored in
    numbers: int  # floating numbers in all its files


def stored_weights(source: Source) -> StoredWeights | None:
    """The part's stored floating weights; None when it has no readable safetensors files or
    stores them in no float (an integer-quantized checkpoint)."""
    files = _weight_files(source)
    counts: Counter[str] = Counter()
    dequantized = 0  # NVFP4 and int8 numbers: floats of the compute dtype once loaded
    for path in files:
        try:
            header = read_view(path, source.view)
        except (HeaderError, OSError):
            return None
        for info in weights_only(unpacked(header)).values():
            dtype = FLOAT_DTYPES.get(info.dtype)
            numbers = 1
            for side in info.shape:
                numbers *= side
            if dtype is not None:
                counts[dtype] += numbers
            elif info.dtype in (NVFP4, INT8):
                dequantized += numbers
    if not counts:
        return None
    dtype, _ = counts.most_common(1)[0]
    return StoredWeights(dtype, sum(counts.values()) + dequantized)


def _weight_files(source: Source) -> list[Path]:
    if source.is_file:
        return [source.path] if source.path.suffix == ".safetensors" else []
    where = source.location
    return sorted(where.glob("*.safetensors")) if where.is_dir() else []
