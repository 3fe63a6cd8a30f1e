"""The tiny video decoders (TAEHV's layout: `taew2_1` / `taew2_2`, and lightx2v's `lighttaew2_1` /
`lighttaew2_2` that ComfyUI previews Wan with) as files in `models/vae_approx/`: the keys of an
autoencoder whose `decoder.<index>.*` are the layers of one sequence (the `encoder.*` keys are
ignored: a preview only decodes). Torch-free: shapes in, a config out.

The decoder, by index: 0 a clamp (no weights), 1 a conv from the latents, 2 a ReLU; then three
stages of six layers (three memory blocks, each a conv sequence over its input beside the previous
frame's; an upsample, no weights; a temporal grow, a 1x1 conv to `stride` frames' channels, no
bias; a conv to the next stage's width, no bias); 21 a ReLU and 22 the conv to RGB, `3 x patch^2`
channels that a pixel shuffle spreads over `patch x patch` pixels (Wan 2.2's 48-channel latents
are 16x down: 8x from the stages, 2x from the patch). The decoder takes the VAE's raw latents, not
the normalised ones the transformer sees, and gives frames in (0, 1). Only that (base) layout is
read: the larger `_super` decoders (a 1x1 conv at index 0) are refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import isqrt, prod

Shapes = Mapping[str, tuple[int, ...]]

PREFIX = "decoder."
STAGES = 3
BLOCKS = 3  # memory blocks per stage
FIRST = 1  # the conv from the latents
LAST = 3 + 6 * STAGES + 1  # 22: the conv to RGB (a ReLU before it)


@dataclass(frozen=True)
class TinyVideoDecoderConfig:
    latent_channels: int
    widths: tuple[int, ...]  # the first conv's, then each stage's conv out (four)
    time_strides: tuple[int, ...]  # each stage's temporal grow: frames out per frame in
    patch_size: int

    @property
    def spatial_factor(self) -> int:
        return 2**STAGES * self.patch_size

    @property
    def time_factor(self) -> int:
        """Frames out per latent frame (the first latent frame's last one is its video frame)."""
        return prod(self.time_strides)


def stage_start(stage: int) -> int:
    """The index of a stage's first memory block (its upsample, grow and conv follow)."""
    return FIRST + 2 + 6 * stage


class NotATinyVideoDecoder(ValueError):
    pass


def _shape(shapes: Shapes, key: str) -> tuple[int, ...]:
    found = shapes.get(PREFIX + key)
    if found is None:
        raise NotATinyVideoDecoder(f"no {PREFIX + key}: not a TAEHV decoder")
    return found


def is_tiny_video_decoder(shapes: Shapes) -> bool:
    return f"{PREFIX}{FIRST}.weight" in shapes and f"{PREFIX}{LAST}.bias" in shapes


def infer_config(shapes: Shapes) -> TinyVideoDecoderConfig:
    """The decoder's layout from its keys' shapes; `NotATinyVideoDecoder` when they do not fit."""
    if f"{PREFIX}0.weight" in shapes:
        raise NotATinyVideoDecoder(
            "a TAEHV '_super' decoder (weights at decoder.0): only the base decoder is read; "
            "use lighttaew2_1 / taew2_1 (Wan 2.1 latents) or lighttaew2_2 / taew2_2 (Wan 2.2)"
        )
    first = _shape(shapes, f"{FIRST}.weight")
    if len(first) != 4:
        raise NotATinyVideoDecoder(f"the first conv's weight has shape {first}")
    widths = [first[0]]
    strides: list[int] = []
    for stage in range(STAGES):
        start, width = stage_start(stage), widths[-1]
        for block in range(start, start + BLOCKS):
            got = _shape(shapes, f"{block}.conv.0.weight")
            if got != (width, 2 * width, 3, 3):
                raise NotATinyVideoDecoder(
                    f"memory block {block} has weight {got}, not ({width}, {2 * width}, 3, 3)"
                )
        grown = _shape(shapes, f"{start + 4}.conv.weight")[0]
        if grown % width:
            raise NotATinyVideoDecoder(f"temporal grow {start + 4} gives {grown} channels")
        strides.append(grown // width)
        widths.append(_shape(shapes, f"{start + 5}.weight")[0])
    rgb = _shape(shapes, f"{LAST}.weight")
    patch = isqrt(rgb[0] // 3)
    if rgb[0] != 3 * patch * patch or rgb[1] != widths[-1]:
        raise NotATinyVideoDecoder(f"the last conv's weight has shape {rgb}")
    return TinyVideoDecoderConfig(first[1], tuple(widths), tuple(strides), patch)
