"""The latent formats a preview knows, one entry each (torch-free data).

Each entry holds the published latent-to-RGB factors for a VAE's latents as the transformer sees
them (normalised), from ComfyUI's `comfy/latent_formats.py`, and the names of its tiny decoder's
files in `models/vae_approx/` (ComfyUI's first). A family names its format through its
pipeline's `preview_format` (`components.step.SupportsPreview`); a new VAE adds one entry here.

- `flux`: the FLUX autoencoder's 16 channels (Z-Image uses it). Tiny decoder: `taef1_decoder`
  (TAESD's layout, `tiny_decoder.py`).
- `flux2`: the FLUX.2 autoencoder's 32 channels, the transformer's 128 patchified channels
  unpatchified 2x2 (normalised, as ComfyUI's `Flux2` format previews them). No tiny decoder here
  yet (ComfyUI's `taef2_decoder` is not read).
- `sdxl`: SDXL's VAE's 4 channels at its scale. Tiny decoder: `taesdxl_decoder`.
- `wan21` / `wan22`: the Wan 2.1 (16 channels; Wan 2.2 A14B's too) and Wan 2.2 (48 channels, 16x
  down: the TI2V-5B's) video VAEs. Tiny decoders: lightx2v's `lighttaew2_1` / `lighttaew2_2`, the
  names ComfyUI looks for, or madebyollin's `taew2_1` / `taew2_2` (TAEHV's layout, `taehv.py`),
  which decode raw latents: these formats carry their VAE's statistics to undo the
  normalisation. Video latents `(B, C, F, H, W)` preview their first latent frame, as ComfyUI
  does.
"""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.diffusion.formats import wan22_vae, wan_vae

Factors = tuple[tuple[float, float, float], ...]


@dataclass(frozen=True)
class PreviewFormat:
    name: str
    channels: int
    spatial_factor: int  # pixels per latent cell, each way
    video: bool  # latents carry a frame axis: (B, C, F, H, W)
    rgb_factors: Factors  # one (R, G, B) row per latent channel
    rgb_bias: tuple[float, float, float]
    # Names its tiny decoder's files start with in models/vae_approx/, e.g. "taef1_decoder"
    # (the first found wins, in this order; empty: none).
    tiny_decoders: tuple[str, ...]
    # The VAE's per-channel statistics, for a tiny decoder that takes raw latents (x * std + mean
    # of the normalised ones; None: it takes them as the transformer sees them).
    latents_mean: tuple[float, ...] | None = None
    latents_std: tuple[float, ...] | None = None


FLUX = PreviewFormat(
    name="flux",
    channels=16,
    spatial_factor=8,
    video=False,
    rgb_factors=(
        (-0.0346, 0.0244, 0.0681),
        (0.0034, 0.0210, 0.0687),
        (0.0275, -0.0668, -0.0433),
        (-0.0174, 0.0160, 0.0617),
        (0.0859, 0.0721, 0.0329),
        (0.0004, 0.0383, 0.0115),
        (0.0405, 0.0861, 0.0915),
        (-0.0236, -0.0185, -0.0259),
        (-0.0245, 0.0250, 0.1180),
        (0.1008, 0.0755, -0.0421),
        (-0.0515, 0.0201, 0.0011),
        (0.0428, -0.0012, -0.0036),
        (0.0817, 0.0765, 0.0749),
        (-0.1264, -0.0522, -0.1103),
        (-0.0280, -0.0881, -0.0499),
        (-0.1262, -0.0982, -0.0778),
    ),
    rgb_bias=(-0.0329, -0.0718, -0.0851),
    tiny_decoders=("taef1_decoder",),
)

WAN21 = PreviewFormat(
    name="wan21",
    channels=16,
    spatial_factor=8,
    video=True,
    rgb_factors=(
        (-0.1299, -0.1692, 0.2932),
        (0.0671, 0.0406, 0.0442),
        (0.3568, 0.2548, 0.1747),
        (0.0372, 0.2344, 0.1420),
        (0.0313, 0.0189, -0.0328),
        (0.0296, -0.0956, -0.0665),
        (-0.3477, -0.4059, -0.2925),
        (0.0166, 0.1902, 0.1975),
        (-0.0412, 0.0267, -0.1364),
        (-0.1293, 0.0740, 0.1636),
        (0.0680, 0.3019, 0.1128),
        (0.0032, 0.0581, 0.0639),
        (-0.1251, 0.0927, 0.1699),
        (0.0060, -0.0633, 0.0005),
        (0.3477, 0.2275, 0.2950),
        (0.1984, 0.0913, 0.1861),
    ),
    rgb_bias=(-0.1835, -0.0868, -0.3360),
    tiny_decoders=("lighttaew2_1", "taew2_1"),
    latents_mean=tuple(wan_vae.LATENTS_MEAN),
    latents_std=tuple(wan_vae.LATENTS_STD),
)

WAN22 = PreviewFormat(
    name="wan22",
    channels=48,
    spatial_factor=16,
    video=True,
    rgb_factors=(
        (0.0119, 0.0103, 0.0046),
        (-0.1062, -0.0504, 0.0165),
        (0.0140, 0.0409, 0.0491),
        (-0.0813, -0.0677, 0.0607),
        (0.0656, 0.0851, 0.0808),
        (0.0264, 0.0463, 0.0912),
        (0.0295, 0.0326, 0.0590),
        (-0.0244, -0.0270, 0.0025),
        (0.0443, -0.0102, 0.0288),
        (-0.0465, -0.0090, -0.0205),
        (0.0359, 0.0236, 0.0082),
        (-0.0776, 0.0854, 0.1048),
        (0.0564, 0.0264, 0.0561),
        (0.0006, 0.0594, 0.0418),
        (-0.0319, -0.0542, -0.0637),
        (-0.0268, 0.0024, 0.0260),
        (0.0539, 0.0265, 0.0358),
        (-0.0359, -0.0312, -0.0287),
        (-0.0285, -0.1032, -0.1237),
        (0.1041, 0.0537, 0.0622),
        (-0.0086, -0.0374, -0.0051),
        (0.0390, 0.0670, 0.2863),
        (0.0069, 0.0144, 0.0082),
        (0.0006, -0.0167, 0.0079),
        (0.0313, -0.0574, -0.0232),
        (-0.1454, -0.0902, -0.0481),
        (0.0714, 0.0827, 0.0447),
        (-0.0304, -0.0574, -0.0196),
        (0.0401, 0.0384, 0.0204),
        (-0.0758, -0.0297, -0.0014),
        (0.0568, 0.1307, 0.1372),
        (-0.0055, -0.0310, -0.0380),
        (0.0239, -0.0305, 0.0325),
        (-0.0663, -0.0673, -0.0140),
        (-0.0416, -0.0047, -0.0023),
        (0.0166, 0.0112, -0.0093),
        (-0.0211, 0.0011, 0.0331),
        (0.1833, 0.1466, 0.2250),
        (-0.0368, 0.0370, 0.0295),
        (-0.3441, -0.3543, -0.2008),
        (-0.0479, -0.0489, -0.0420),
        (-0.0660, -0.0153, 0.0800),
        (-0.0101, 0.0068, 0.0156),
        (-0.0690, -0.0452, -0.0927),
        (-0.0145, 0.0041, 0.0015),
        (0.0421, 0.0451, 0.0373),
        (0.0504, -0.0483, -0.0356),
        (-0.0837, 0.0168, 0.0055),
    ),
    rgb_bias=(0.0317, -0.0878, -0.1388),
    tiny_decoders=("lighttaew2_2", "taew2_2"),
    latents_mean=tuple(wan22_vae.LATENTS_MEAN),
    latents_std=tuple(wan22_vae.LATENTS_STD),
)

SDXL = PreviewFormat(
    name="sdxl",
    channels=4,
    spatial_factor=8,
    video=False,
    rgb_factors=(
        (0.3651, 0.4232, 0.4341),
        (-0.2533, -0.0042, 0.1068),
        (0.1076, 0.1111, -0.0362),
        (-0.3165, -0.2492, -0.2188),
    ),
    rgb_bias=(0.1084, -0.0175, -0.0011),
    tiny_decoders=("taesdxl_decoder",),
)

FLUX2 = PreviewFormat(
    name="flux2",
    channels=32,
    spatial_factor=8,
    video=False,
    rgb_factors=(
        (0.0058, 0.0113, 0.0073),
        (0.0495, 0.0443, 0.0836),
        (-0.0099, 0.0096, 0.0644),
        (0.2144, 0.3009, 0.3652),
        (0.0166, -0.0039, -0.0054),
        (0.0157, 0.0103, -0.0160),
        (-0.0398, 0.0902, -0.0235),
        (-0.0052, 0.0095, 0.0109),
        (-0.3527, -0.2712, -0.1666),
        (-0.0301, -0.0356, -0.0180),
        (-0.0107, 0.0078, 0.0013),
        (0.0746, 0.0090, -0.0941),
        (0.0156, 0.0169, 0.0070),
        (-0.0034, -0.0040, -0.0114),
        (0.0032, 0.0181, 0.0080),
        (-0.0939, -0.0008, 0.0186),
        (0.0018, 0.0043, 0.0104),
        (0.0284, 0.0056, -0.0127),
        (-0.0024, -0.0022, -0.0030),
        (0.1207, -0.0026, 0.0065),
        (0.0128, 0.0101, 0.0142),
        (0.0137, -0.0072, -0.0007),
        (0.0095, 0.0092, -0.0059),
        (0.0000, -0.0077, -0.0049),
        (-0.0465, -0.0204, -0.0312),
        (0.0095, 0.0012, -0.0066),
        (0.0290, -0.0034, 0.0025),
        (0.0220, 0.0169, -0.0048),
        (-0.0332, -0.0457, -0.0468),
        (-0.0085, 0.0389, 0.0609),
        (-0.0076, 0.0003, -0.0043),
        (-0.0111, -0.0460, -0.0614),
    ),
    rgb_bias=(-0.0329, -0.0718, -0.0851),
    tiny_decoders=(),
)

PREVIEW_FORMATS: dict[str, PreviewFormat] = {
    f.name: f for f in (FLUX, FLUX2, WAN21, WAN22, SDXL)
}


def preview_format(name: str) -> PreviewFormat:
    found = PREVIEW_FORMATS.get(name)
    if found is None:
        raise KeyError(f"no preview format {name!r}; known: {sorted(PREVIEW_FORMATS)}")
    return found
