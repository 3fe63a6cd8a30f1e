"""`taesd`: a tiny decoder from `models/vae_approx/` (ComfyUI's files) turns latents into pixels.

ComfyUI picks the first file there whose name starts with the format's decoder name
(`taef1_decoder.safetensors`, `taef1_decoder.pth`); so does this (a video format's decoders are
`taehv.py`'s). The file's layout is
read from its keys (`diffusion/formats/taesd.py`) and loaded into diffusers' `DecoderTiny`. The
decoder takes the latents as the transformer sees them and returns pixels in (-1, 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from PIL import Image

from inline_core.diffusion.formats.taesd import infer_config, to_diffusers_key
from inline_core.diffusion.libs import assign_state, load_safetensors, module
from inline_core.diffusion.preview.formats import PreviewFormat
from inline_core.diffusion.preview.latent_rgb import first_image, to_image

SUFFIXES = (".safetensors", ".pth")


def find_decoder(vae_approx: Path, fmt: PreviewFormat) -> Path | None:
    """The format's tiny decoder file in `vae_approx`, or None (none named, or none there): the
    first file whose name starts with one of the format's names, in their order."""
    if not vae_approx.is_dir():
        return None
    files = sorted(p for p in vae_approx.iterdir() if p.is_file() and p.suffix in SUFFIXES)
    for stem in fmt.tiny_decoders:
        for path in files:
            if path.name.startswith(stem):
                return path
    return None


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """A decoder file's tensors (safetensors, or a weights-only torch pickle)."""
    if path.suffix == ".safetensors":
        return load_safetensors(path)
    loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    return cast(dict[str, torch.Tensor], loaded)


def check_channels(path: Path, latent_channels: int, fmt: PreviewFormat) -> None:
    """A decoder file's latent channels against the format's (a clear refusal otherwise)."""
    if latent_channels != fmt.channels:
        raise ValueError(
            f"{path.name} decodes {latent_channels} latent channels; {fmt.name} latents have "
            f"{fmt.channels}"
        )


def assign_weights(
    path: Path, decoder: torch.nn.Module, weights: dict[str, torch.Tensor], kind: str
) -> None:
    """The file's weights into the decoder built for them, every one in place."""
    missing, unexpected = assign_state(decoder, {k: v.float() for k, v in weights.items()})
    if missing or unexpected:
        raise ValueError(
            f"{path.name} does not fit a {kind} decoder: missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}"
        )


class TinyDecoder:
    def __init__(self, path: Path, fmt: PreviewFormat) -> None:
        state = read_weights(path)
        config = infer_config({k: tuple(v.shape) for k, v in state.items()})
        check_channels(path, config.latent_channels, fmt)
        vae_module = module("diffusers.models.autoencoders.vae")
        decoder = cast(torch.nn.Module, vae_module.DecoderTiny(**config.to_diffusers()))
        assign_weights(path, decoder, {to_diffusers_key(k): v for k, v in state.items()}, "tiny")
        self.path = path
        self.format = fmt
        self.device = torch.device("cpu")
        self.decoder: Any = decoder.eval()

    def decode(self, latents: torch.Tensor) -> Image.Image:
        """Decoded on the latents' device (the decoder moves there on first use)."""
        x = first_image(latents, self.format).to(torch.float32).unsqueeze(0)
        if x.device != self.device:
            self.decoder = self.decoder.to(x.device)
            self.device = x.device
        with torch.inference_mode():
            pixels = cast(torch.Tensor, self.decoder(x))[0]  # (3, H, W) in (-1, 1)
        return to_image(pixels.permute(1, 2, 0), value_range=(-1.0, 1.0))
