"""The LTX-2 single file's video VAE, audio VAE and vocoder configs as diffusers' classes take
them (torch-free): the `vae`, `audio_vae` and `vocoder` sections of its `__metadata__["config"]`.

Lightricks lists the video VAE's encoder and decoder as blocks in encoder order: `res_x`
(`num_layers` resnets) between `compress_*` resamplers (`space`, `time` or `all`, each with its
channel `multiplier`; the encoder's residual, `_res`, as diffusers builds them). diffusers gives
each list's resnet counts, resampler kinds and widths, in encoder order but for the decoder's
`upsample_type`, which runs in decoding order.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import Any, cast

from inline_core.diffusion.files.header import TensorInfo
from inline_core.families.ltx2.single_file_fields import Fields, SingleFileError

RESAMPLE_KINDS = {"space": "spatial", "time": "temporal", "all": "spatiotemporal"}
TIMESTEP_EMBEDDER = "vae.decoder.last_time_embedder."
VOCODER_IN = "vocoder.conv_pre.weight"
BWE_VOCODER_IN = "vocoder.vocoder.conv_pre.weight"
BWE_IN = "vocoder.bwe_generator.conv_pre.weight"


def _blocks(
    section: Fields, name: str, suffix: str
) -> tuple[list[Fields], list[tuple[str, Fields]]]:
    """A block list's `res_x` entries and its resamplers (kind, params), checked to alternate:
    resnets, a resampler, resnets, ..., resnets."""
    raw = section.get(name)
    if not isinstance(raw, list) or not raw:
        raise SingleFileError(f"its config has no {section.path}.{name} (a list of blocks)")
    resnets: list[Fields] = []
    samplers: list[tuple[str, Fields]] = []
    for i, entry in enumerate(cast(list[Any], raw)):
        where = f"{section.path}.{name}[{i}]"
        pair = cast(list[Any], entry) if isinstance(entry, list) else []
        if len(pair) != 2 or not isinstance(pair[0], str) or not isinstance(pair[1], dict):
            raise SingleFileError(f"its config's {where} is not a [name, params] block")
        kind, params = pair[0], Fields(cast(dict[str, Any], pair[1]), where)
        expected_resnets = i % 2 == 0
        if kind == "res_x" and expected_resnets:
            resnets.append(params)
            continue
        resample = kind.removeprefix("compress_").removesuffix(suffix)
        if expected_resnets or not kind.startswith("compress_") or resample not in RESAMPLE_KINDS:
            raise SingleFileError(
                f"its config's {where} is a {kind!r} block: diffusers' LTX-2 VAE alternates "
                f"res_x blocks with compress_space/time/all{suffix} ones"
            )
        samplers.append((RESAMPLE_KINDS[resample], params))
    if len(resnets) != len(samplers) + 1:
        raise SingleFileError(f"its config's {section.path}.{name} does not end in res_x")
    return resnets, samplers


def _widths(base: int, samplers: list[tuple[str, Fields]]) -> list[int]:
    widths: list[int] = []
    width = base
    for _kind, params in samplers:
        width *= params.integer("multiplier", 1)
        widths.append(width)
    return widths


def vae_config(v: Fields, header: Mapping[str, TensorInfo]) -> dict[str, Any]:
    """`AutoencoderKLLTX2Video`'s config."""
    v.expect("dims", 3)
    latent = v.integer("latent_channels")
    # diffusers' encoder starts as wide as the latents.
    v.expect("encoder_base_channels", latent)
    resnets, downs = _blocks(v, "encoder_blocks", "_res")
    up_resnets, ups = _blocks(v, "decoder_blocks", "")
    patch = v.integer("patch_size", 4)
    padding = v.text("spatial_padding_mode", "zeros")
    return {
        "in_channels": v.integer("in_channels", 3),
        "out_channels": v.integer("out_channels", 3),
        "latent_channels": latent,
        "block_out_channels": tuple(_widths(latent, downs)),
        "down_block_types": ("LTX2VideoDownBlock3D",) * len(downs),
        "decoder_block_out_channels": tuple(
            _widths(v.integer("decoder_base_channels", latent), ups)
        ),
        "layers_per_block": tuple(r.integer("num_layers") for r in resnets),
        "decoder_layers_per_block": tuple(r.integer("num_layers") for r in up_resnets),
        "spatio_temporal_scaling": (True,) * len(downs),
        "decoder_spatio_temporal_scaling": (True,) * len(ups),
        "decoder_inject_noise": tuple(r.boolean("inject_noise", False) for r in up_resnets),
        "downsample_type": tuple(kind for kind, _ in downs),
        "upsample_type": tuple(kind for kind, _ in reversed(ups)),
        "upsample_residual": tuple(p.boolean("residual", False) for _, p in ups),
        "upsample_factor": tuple(p.integer("multiplier", 1) for _, p in ups),
        # Lightricks' readers default it differently: the decoder's keys say.
        "timestep_conditioning": any(k.startswith(TIMESTEP_EMBEDDER) for k in header),
        "patch_size": patch,
        "patch_size_t": 1,
        "resnet_norm_eps": 1e-6,
        "encoder_causal": True,
        "decoder_causal": v.boolean("causal_decoder", False),
        "encoder_spatial_padding_mode": padding,
        # Lightricks' decoder pads by reflection unless its config says otherwise.
        "decoder_spatial_padding_mode": v.text(
            "decoder_spatial_padding_mode", v.text("spatial_padding_mode", "reflect")
        ),
        "spatial_compression_ratio": patch * 2 ** sum(kind != "temporal" for kind, _ in downs),
        "temporal_compression_ratio": 2 ** sum(kind != "spatial" for kind, _ in downs),
    }


def vae_factors(vae: Mapping[str, Any]) -> tuple[int, int]:
    """(spatial, temporal) compression of a `vae_config`."""
    return int(vae["spatial_compression_ratio"]), int(vae["temporal_compression_ratio"])


def audio_vae_config(a: Fields) -> dict[str, Any]:
    """`AutoencoderKLLTX2Audio`'s config: the `ddconfig` and the mel preprocessing."""
    dd = a.section("model").section("params").section("ddconfig")
    mel = a.section("preprocessing")
    attn = dd.get("attn_resolutions")
    return {
        "base_channels": dd.integer("ch"),
        "output_channels": dd.integer("out_ch"),
        "ch_mult": tuple(dd.ints("ch_mult")),
        "num_res_blocks": dd.integer("num_res_blocks"),
        "attn_resolutions": tuple(cast(list[int], attn)) if attn else None,
        "in_channels": dd.integer("in_channels"),
        "resolution": dd.integer("resolution"),
        "latent_channels": dd.integer("z_channels"),
        "norm_type": dd.text("norm_type", "pixel"),
        "causality_axis": dd.text("causality_axis", "height"),
        "dropout": dd.number("dropout", 0.0),
        "mid_block_add_attention": dd.boolean("mid_block_add_attention", False),
        "sample_rate": mel.section("audio").integer("sampling_rate"),
        "mel_hop_length": mel.section("stft").integer("hop_length"),
        "is_causal": mel.section("stft").boolean("causal", True),
        "mel_bins": dd.integer("mel_bins"),
        "double_z": dd.boolean("double_z", True),
    }


def vocoder_config(v: Fields, audio: Fields, header: Mapping[str, TensorInfo]) -> dict[str, Any]:
    """The vocoder's config: LTX-2.0's HiFi-GAN (`LTX2Vocoder`), or LTX-2.3's with its
    bandwidth extension (`vocoder` and `bwe` sections: `LTX2VocoderWithBWE`, named in the
    config's `_class_name`)."""
    if isinstance(v.get("bwe"), dict):
        return _bwe_config(v.section("vocoder"), v.section("bwe"), header)
    v.expect("resblock", "1")  # HiFi-GAN's plain residual blocks (leaky ReLU)
    rates = v.ints("upsample_rates")
    mel = audio.section("preprocessing")
    per_second = mel.section("audio").integer("sampling_rate") / mel.section("stft").integer(
        "hop_length"
    )
    return {
        "_class_name": "LTX2Vocoder",
        **_generator(v, _in_channels(header, VOCODER_IN)),
        "leaky_relu_negative_slope": 0.1,
        "final_act_fn": "tanh" if v.boolean("use_tanh_at_final", True) else None,
        "final_bias": v.boolean("use_bias_at_final", True),
        "output_sampling_rate": round(per_second * prod(rates)),
    }


def _in_channels(header: Mapping[str, TensorInfo], key: str) -> int:
    info = header.get(key)
    if info is None:
        raise SingleFileError(f"it has no tensor {key}")
    return info.shape[1]  # the mel bins of every channel, stacked


def _generator(v: Fields, in_channels: int, prefix: str = "") -> dict[str, Any]:
    """One HiFi-GAN's widths and kernels, under diffusers' names (`prefix`: the BWE's)."""
    return {
        f"{prefix}in_channels": in_channels,
        f"{prefix}hidden_channels": v.integer("upsample_initial_channel"),
        f"{prefix}out_channels": 2 if v.boolean("stereo", True) else 1,
        f"{prefix}upsample_kernel_sizes": v.ints("upsample_kernel_sizes"),
        f"{prefix}upsample_factors": v.ints("upsample_rates"),
        f"{prefix}resnet_kernel_sizes": v.ints("resblock_kernel_sizes"),
        f"{prefix}resnet_dilations": _dilations(v),
    }


def _amp(v: Fields, prefix: str, final: bool) -> dict[str, Any]:
    """An anti-aliased (AMP1, snake-beta) generator's activations and final layer."""
    v.expect("resblock", "AMP1")
    v.expect("activation", "snakebeta")
    tanh = v.boolean("use_tanh_at_final", False) and v.boolean("apply_final_activation", final)
    return {
        f"{prefix}act_fn": "snakebeta",
        f"{prefix}leaky_relu_negative_slope": 0.1,
        f"{prefix}antialias": True,
        f"{prefix}antialias_ratio": 2,
        f"{prefix}antialias_kernel_size": 12,
        f"{prefix}final_act_fn": "tanh" if tanh else None,
        f"{prefix}final_bias": v.boolean("use_bias_at_final", False),
    }


def _bwe_config(v: Fields, bwe: Fields, header: Mapping[str, TensorInfo]) -> dict[str, Any]:
    return {
        "_class_name": "LTX2VocoderWithBWE",
        **_generator(v, _in_channels(header, BWE_VOCODER_IN)),
        **_amp(v, "", True),
        **_generator(bwe, _in_channels(header, BWE_IN), "bwe_"),
        **_amp(bwe, "bwe_", False),
        "filter_length": bwe.integer("n_fft"),
        "hop_length": bwe.integer("hop_length"),
        "window_length": bwe.integer("win_size"),
        "num_mel_channels": bwe.integer("num_mels"),
        "input_sampling_rate": bwe.integer("input_sampling_rate"),
        "output_sampling_rate": bwe.integer("output_sampling_rate"),
    }


def _dilations(v: Fields) -> list[list[int]]:
    raw = v.get("resblock_dilation_sizes")
    rows = cast(list[Any], raw) if isinstance(raw, list) else None
    if not rows or not all(isinstance(r, list) for r in rows):
        raise SingleFileError(
            f"its config's {v.path}.resblock_dilation_sizes is not a list of lists: {raw!r}"
        )
    return [[int(d) for d in cast(list[Any], r)] for r in rows]
