"""The tiny decoders (TAESD family: `taesd`, `taef1`, ...) as ComfyUI keeps them in
`models/vae_approx/`: a decoder-only file whose keys are the indexes of one `nn.Sequential`
(`1.weight`, `3.conv.0.weight`, ...), index 0 being a parameterless clamp. diffusers'
`DecoderTiny` has the same layers without the clamp in its `layers` Sequential, so a key's index
moves down by one. Torch-free: shapes in, a config and key names out.

The layout, read off the keys: a first conv, then per stage its blocks (`N.conv.*`) and one conv
(after an upsample, which has no weights); the last stage's conv has a bias and writes the RGB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Shapes = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class TinyDecoderConfig:
    latent_channels: int
    out_channels: int
    num_blocks: tuple[int, ...]
    block_out_channels: tuple[int, ...]

    @property
    def spatial_factor(self) -> int:
        return 2 ** (len(self.num_blocks) - 1)

    def to_diffusers(self) -> dict[str, object]:
        """`DecoderTiny`'s constructor arguments (TAESD's own activation and upsampling)."""
        return {
            "in_channels": self.latent_channels,
            "out_channels": self.out_channels,
            "num_blocks": self.num_blocks,
            "block_out_channels": self.block_out_channels,
            "upsampling_scaling_factor": 2,
            "act_fn": "relu",
            "upsample_fn": "nearest",
        }


class NotATinyDecoder(ValueError):
    pass


def _index(key: str) -> int:
    head = key.split(".", 1)[0]
    if not head.isdigit():
        raise NotATinyDecoder(f"key {key!r} is not a TAESD decoder key (an index first)")
    return int(head)


def infer_config(shapes: Shapes) -> TinyDecoderConfig:
    """The decoder's layout from its keys' shapes; `NotATinyDecoder` when they do not fit."""
    convs: dict[int, tuple[int, ...]] = {}
    blocks: set[int] = set()
    for key, shape in shapes.items():
        index = _index(key)
        rest = key.split(".", 1)[1]
        if rest == "weight":
            convs[index] = shape
        elif rest.startswith("conv."):
            blocks.add(index)
    if not convs:
        raise NotATinyDecoder("no conv weights found")
    order = sorted(convs)
    first = convs[order[0]]
    if len(first) != 4:
        raise NotATinyDecoder(f"the first conv's weight has shape {first}")
    num_blocks: list[int] = []
    channels: list[int] = []
    for before, conv in zip(order, order[1:], strict=False):
        num_blocks.append(sum(1 for b in blocks if before < b < conv))
        channels.append(convs[conv][1])
    if not num_blocks:
        raise NotATinyDecoder("a TAESD decoder has at least one stage after its first conv")
    return TinyDecoderConfig(
        latent_channels=first[1],
        out_channels=convs[order[-1]][0],
        num_blocks=tuple(num_blocks),
        block_out_channels=tuple(channels),
    )


def to_diffusers_key(key: str) -> str:
    """`3.conv.0.weight` -> `layers.2.conv.0.weight` (diffusers has no clamp layer)."""
    index, rest = key.split(".", 1)
    return f"layers.{int(index) - 1}.{rest}"


def to_comfy_key(key: str) -> str:
    """The inverse of `to_diffusers_key` (the kit writes ComfyUI's naming)."""
    if not key.startswith("layers."):
        raise NotATinyDecoder(f"key {key!r} is not a DecoderTiny key")
    index, rest = key.removeprefix("layers.").split(".", 1)
    return f"{int(index) + 1}.{rest}"
