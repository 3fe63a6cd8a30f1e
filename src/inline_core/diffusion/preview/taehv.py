"""`taesd` for video latents: a TAEHV decoder (Wan's `lighttaew2_1` / `lighttaew2_2` in
`models/vae_approx/`, as ComfyUI previews Wan) turns a video's first latent frame into its first
frame.

diffusers has no class for it (0.42 has TAESD's `DecoderTiny` for images only), so the decoder is
built here from the layout its file's keys give (`diffusion/formats/taehv.py`), its layers at the
file's indexes so the weights load as they are. It is causal in time: each memory block sees its
input beside the previous frame's (zeros before the first), and each temporal grow turns a frame
into `stride` frames. It decodes the VAE's raw latents, so a preview's normalised latents are
scaled back by the format's statistics first (`latents * std + mean`, ComfyUI's `process_out`).
The first latent frame decodes to `time_factor` frames, of which the last is the video's first
frame (the decoder's first `time_factor - 1` outputs are the start-up ones it trims), as
ComfyUI's preview decodes that frame alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from inline_core.diffusion.formats.taehv import (
    BLOCKS,
    PREFIX,
    STAGES,
    TinyVideoDecoderConfig,
    infer_config,
)
from inline_core.diffusion.preview.formats import PreviewFormat
from inline_core.diffusion.preview.latent_rgb import first_image, to_image
from inline_core.diffusion.preview.tiny_decoder import assign_weights, check_channels, read_weights


def _conv(channels_in: int, channels_out: int, bias: bool = True) -> nn.Conv2d:
    return nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=bias)


class _Clamp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / 3) * 3


class _MemoryBlock(nn.Module):
    """Three convs over a frame beside the previous frame's input, added to the frame."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            _conv(2 * width, width),
            nn.ReLU(),
            _conv(width, width),
            nn.ReLU(),
            _conv(width, width),
        )

    def forward(self, x: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(torch.cat([x, past], dim=1)) + x)


class _TemporalGrow(nn.Module):
    """Each frame's channels times `stride`, then split into `stride` frames in order."""

    def __init__(self, width: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(width, width * stride, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).reshape(-1, *x.shape[1:])


def build_decoder(config: TinyVideoDecoderConfig) -> nn.Sequential:
    """The decoder's layers at the indexes its files use (random weights)."""
    widths = config.widths
    layers: list[nn.Module] = [_Clamp(), _conv(config.latent_channels, widths[0]), nn.ReLU()]
    for stage in range(STAGES):
        width = widths[stage]
        layers += [_MemoryBlock(width) for _ in range(BLOCKS)]
        layers += [
            nn.Upsample(scale_factor=2),
            _TemporalGrow(width, config.time_strides[stage]),
            _conv(width, widths[stage + 1], bias=False),
        ]
    layers += [nn.ReLU(), _conv(widths[-1], 3 * config.patch_size**2)]
    return nn.Sequential(*layers)


def decode_frames(
    decoder: nn.Sequential, config: TinyVideoDecoderConfig, latents: torch.Tensor
) -> torch.Tensor:
    """(N, T, C, h, w) raw latents -> (N, T x time_factor, 3, H, W) frames in (0, 1), every
    frame at once (the start-up frames included)."""
    rows = latents.shape[0]
    x: torch.Tensor = latents.flatten(0, 1)
    for layer in decoder:
        if isinstance(layer, _MemoryBlock):
            frames = x.reshape(rows, -1, *x.shape[1:])
            past = F.pad(frames, (0, 0, 0, 0, 0, 0, 1, 0))[:, :-1]  # zeros, then frame t-1
            x = cast(torch.Tensor, layer(x, past.flatten(0, 1)))
        else:
            x = cast(torch.Tensor, layer(x))
    if config.patch_size > 1:
        x = F.pixel_shuffle(x, config.patch_size)
    return x.reshape(rows, -1, *x.shape[1:]).clamp(0, 1)


class TinyVideoDecoder:
    def __init__(self, path: Path, fmt: PreviewFormat) -> None:
        state = read_weights(path)
        config = infer_config({k: tuple(v.shape) for k, v in state.items()})
        check_channels(path, config.latent_channels, fmt)
        if fmt.latents_mean is None or fmt.latents_std is None:
            raise ValueError(f"{fmt.name} latents have no statistics for a TAEHV decoder")
        decoder = build_decoder(config)
        weights = {k[len(PREFIX) :]: v for k, v in state.items() if k.startswith(PREFIX)}
        assign_weights(path, decoder, weights, "TAEHV")
        self.path = path
        self.format = fmt
        self.config = config
        self.decoder = decoder.eval()
        self._mean = torch.tensor(fmt.latents_mean).view(-1, 1, 1)
        self._std = torch.tensor(fmt.latents_std).view(-1, 1, 1)

    def decode(self, latents: torch.Tensor) -> Image.Image:
        """The first frame, decoded on the latents' device (the decoder moves there once)."""
        x = first_image(latents, self.format).to(torch.float32)
        if self._mean.device != x.device:
            self.decoder = self.decoder.to(x.device)
            self._mean, self._std = self._mean.to(x.device), self._std.to(x.device)
        raw = x * self._std + self._mean
        with torch.inference_mode():
            frames = decode_frames(self.decoder, self.config, raw[None, None])
        first = frames[0, self.config.time_factor - 1]  # (3, H, W)
        return to_image(first.permute(1, 2, 0), value_range=(0.0, 1.0))
