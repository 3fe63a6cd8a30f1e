"""The tiny-model kit's machinery, shared by every family's kit recipe (imports torch).

A family's kit builds its stack from fixed seeds at a tiny size and writes it in the layouts its
users have (ComfyUI single files with their key naming, diffusers folders), so the real loading
code is tested end to end without a download. This module holds what every recipe needs: seeded
construction, writing weights, and a byte-level BPE tokenizer (no merges: one token per byte) with
whatever special tokens and chat template a family's text encoder expects.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.libs import manual_seed, save_safetensors, transformers

# A FLUX-shaped AutoencoderKL (16 latent channels, 8x down) at test size. 32 norm groups: LDM
# (ComfyUI) VAE naming implies GroupNorm(32), so channels are multiples of 32.
TINY_FLUX_VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [32, 32, 64, 64],
    "layers_per_block": 1,
    "latent_channels": 16,
    "norm_num_groups": 32,
    "sample_size": 1024,
    "scaling_factor": 0.3611,
    "shift_factor": 0.1159,
    "use_quant_conv": False,
    "use_post_quant_conv": False,
}


def seeded(seed: int) -> None:
    """Seed torch before building one component (each component has its own fixed seed)."""
    manual_seed(seed)


def save_weights(sd: Mapping[str, torch.Tensor], path: Path, dtype: torch.dtype) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors({k: v.detach().to(dtype).contiguous() for k, v in sd.items()}, path)
    return path


# safetensors' names of the dtypes a kit writes.
_SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def write_random_safetensors(
    path: Path, shapes: Mapping[str, tuple[int, ...]], dtype: torch.dtype, *, seed: int
) -> Path:
    """A safetensors file of random weights with these names and shapes, written one tensor at
    a time (a real-size model never sits in memory whole). Deterministic: each tensor draws from
    its own generator, seeded from `seed` and its name. Norm scales are ones, other vectors
    zeros, everything else N(0, 0.02), so activations stay finite through many layers."""
    import zlib

    names = sorted(shapes)
    item = torch.empty((), dtype=dtype).element_size()
    header: dict[str, Any] = {}
    offset = 0
    for name in names:
        size = item * _numel(shapes[name])
        header[name] = {
            "dtype": _SAFETENSORS_DTYPES[dtype],
            "shape": list(shapes[name]),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as out:
        out.write(len(encoded).to_bytes(8, "little") + encoded)
        for name in names:
            shape = shapes[name]
            if len(shape) == 1:
                value = (torch.ones if "norm" in name else torch.zeros)(shape, dtype=dtype)
            else:
                generator = torch.Generator().manual_seed(
                    seed * 1_000_003 + zlib.crc32(name.encode())
                )
                value = (torch.randn(shape, generator=generator) * 0.02).to(dtype)
            out.write(value.contiguous().view(torch.uint8).numpy().tobytes())
    partial.replace(path)
    return path


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for side in shape:
        count *= side
    return count


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def byte_alphabet() -> list[str]:
    """GPT-2's byte -> printable character map (what a byte-level BPE vocabulary is made of)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += list(range(ord("®"), ord("ÿ") + 1))
    chars: dict[int, int] = {b: b for b in keep}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return [chr(chars[b]) for b in range(256)]


def byte_tokenizer(
    special_tokens: Sequence[str],
    *,
    pad_token: str,
    eos_token: str,
    chat_template: str | None = None,
    model_max_length: int = 131072,
) -> Any:
    """A byte-level BPE (no merges: one token per byte) with `special_tokens` added."""
    tk = cast(Any, importlib.import_module("tokenizers"))
    vocab = {ch: i for i, ch in enumerate(byte_alphabet())}
    tok = tk.Tokenizer(tk.models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens(list(special_tokens))
    options: dict[str, Any] = {"chat_template": chat_template} if chat_template else {}
    return transformers().PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=pad_token,
        eos_token=eos_token,
        model_max_length=model_max_length,
        **options,
    )


def tokenizer_vocab_size(tokenizer_json: Path) -> int:
    """One more than the largest token id in a `tokenizer.json` (read without loading it)."""
    data = cast(dict[str, Any], json.loads(tokenizer_json.read_text(encoding="utf-8")))
    model = cast(dict[str, Any], data.get("model", {}))
    ids = list(cast(dict[str, int], model.get("vocab", {})).values())
    ids += [int(t["id"]) for t in cast(list[dict[str, Any]], data.get("added_tokens", []))]
    return max(ids) + 1


def kit_parser(
    prog: str,
    description: str,
    *,
    sizes: Sequence[str] = (),
    layouts: Sequence[str] = (),
    size_help: str | None = None,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """A kit command's options: `--out` (the models folder), `--size` among `sizes` (tiny by
    default) and a repeatable `--layout` among `layouts` where the kit has them."""
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog)
    parser.add_argument("--out", type=Path, default=Path("models"), help="models folder")
    if sizes:
        parser.add_argument("--size", choices=sizes, default="tiny", help=size_help)
    if layouts:
        help_text = "write only this layout (repeatable)"
        parser.add_argument("--layout", choices=layouts, action="append", help=help_text)
    return parser


def report(out: Path, written: Sequence[Path | None]) -> str:
    """What a kit run prints: the models folder and each path it wrote."""
    paths = [str(p) for p in written if p is not None]
    return json.dumps({"models": str(out), "written": paths}, indent=2)
