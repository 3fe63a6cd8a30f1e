"""`taesd` previews of video latents: Wan's TAEHV decoders (`lighttaew2_1` / `lighttaew2_2` as
ComfyUI names them, or `taew2_1` / `taew2_2`) read from their keys, built and loaded as they are,
causal in time, decoding a preview's normalised latents through the VAE's own statistics into
the video's first frame; files that cannot serve are refused by name, and a renderer given one
falls back to latent2rgb, saying why."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from inline_core.diffusion.formats import wan_vae  # noqa: E402
from inline_core.diffusion.formats.taehv import NotATinyVideoDecoder, infer_config  # noqa: E402
from inline_core.diffusion.libs import load_safetensors  # noqa: E402
from inline_core.diffusion.preview.formats import WAN21, WAN22, PreviewFormat  # noqa: E402
from inline_core.diffusion.preview.kit import (  # noqa: E402
    tiny_video_decoder_config,
    write_tiny_decoder,
)
from inline_core.diffusion.preview.latent_rgb import to_image  # noqa: E402
from inline_core.diffusion.preview.renderer import PreviewRenderer  # noqa: E402
from inline_core.diffusion.preview.taehv import TinyVideoDecoder, decode_frames  # noqa: E402
from inline_core.diffusion.preview.tiny_decoder import find_decoder  # noqa: E402


def test_wan_2_1_statistics_are_its_vae_s_defaults() -> None:
    from diffusers import AutoencoderKLWan  # pyright: ignore[reportPrivateImportUsage]

    defaults = inspect.signature(AutoencoderKLWan.__init__).parameters
    assert defaults["latents_mean"].default == wan_vae.LATENTS_MEAN
    assert defaults["latents_std"].default == pytest.approx(wan_vae.LATENTS_STD)


@pytest.mark.parametrize(("fmt", "factor"), [(WAN21, 8), (WAN22, 16)], ids=["wan21", "wan22"])
def test_the_kit_decoder_loads_by_comfyui_s_name_and_previews_at_full_size(
    tmp_path: Path, fmt: PreviewFormat, factor: int
) -> None:
    path = write_tiny_decoder(tmp_path, fmt)
    assert path == tmp_path / "vae_approx" / f"{fmt.tiny_decoders[0]}.safetensors"
    assert find_decoder(tmp_path / "vae_approx", fmt) == path
    state = load_safetensors(path)
    assert all(k.startswith("decoder.") for k in state)
    config = infer_config({k: tuple(v.shape) for k, v in state.items()})
    assert config == tiny_video_decoder_config(fmt) and config.spatial_factor == factor
    x = torch.randn(1, fmt.channels, 3, 4, 5, generator=torch.Generator().manual_seed(1))
    assert TinyVideoDecoder(path, fmt).decode(x).size == (5 * factor, 4 * factor)


def test_decoding_is_causal_and_a_preview_is_the_first_latent_frame_s_last_frame(
    tmp_path: Path,
) -> None:
    decoder = TinyVideoDecoder(write_tiny_decoder(tmp_path, WAN21, seed=3), WAN21)
    config = decoder.config
    raw = torch.randn(1, 2, 16, 4, 6, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        both = decode_frames(decoder.decoder, config, raw)
        first = decode_frames(decoder.decoder, config, raw[:, :1])
    assert both.shape == (1, 2 * config.time_factor, 3, 32, 48)
    # A later latent frame never changes the frames before it.
    assert torch.allclose(both[:, : config.time_factor], first, atol=1e-6)
    # The preview takes normalised latents: the VAE's statistics make them raw again.
    mean = torch.tensor(WAN21.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(WAN21.latents_std).view(1, -1, 1, 1, 1)
    normalised = (raw.transpose(1, 2) - mean) / std  # (1, C, F, h, w), as the transformer's
    got = np.asarray(decoder.decode(normalised), dtype=np.int16)
    frame = first[0, config.time_factor - 1].permute(1, 2, 0)
    want = np.asarray(to_image(frame, value_range=(0.0, 1.0)), dtype=np.int16)
    assert np.abs(got - want).max() <= 1  # float rounding of the round trip


def test_comfyui_s_name_wins_and_madebyollin_s_is_found_alone(tmp_path: Path) -> None:
    comfy = write_tiny_decoder(tmp_path, WAN22)
    other = comfy.with_name("taew2_2.pth")
    torch.save(load_safetensors(comfy), other)
    assert find_decoder(comfy.parent, WAN22) == comfy
    comfy.unlink()
    assert find_decoder(comfy.parent, WAN22) == other
    assert TinyVideoDecoder(other, WAN22).config == tiny_video_decoder_config(WAN22)


def shapes_of(path: Path) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in load_safetensors(path).items()}


def test_files_that_cannot_serve_are_refused_by_name(tmp_path: Path) -> None:
    shapes: dict[str, Any] = shapes_of(write_tiny_decoder(tmp_path, WAN21))
    with pytest.raises(NotATinyVideoDecoder, match="'_super' decoder"):
        infer_config({**shapes, "decoder.0.weight": (512, 16, 1, 1)})
    with pytest.raises(NotATinyVideoDecoder, match="no decoder.8.weight"):
        infer_config({k: v for k, v in shapes.items() if not k.startswith("decoder.8.")})
    wan22 = write_tiny_decoder(tmp_path, WAN22)
    with pytest.raises(ValueError, match="decodes 48 latent channels; wan21 latents have 16"):
        TinyVideoDecoder(wan22, WAN21)


def test_taesd_with_a_decoder_that_does_not_load_falls_back_to_latent2rgb(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "vae_approx" / "lighttaew2_1.safetensors"
    broken.parent.mkdir()
    broken.write_bytes(b"not a safetensors file")
    renderer = PreviewRenderer(broken.parent, 64)
    x = torch.randn(1, 16, 2, 4, 6)
    with caplog.at_level(logging.WARNING):
        encoded = renderer.render("taesd", x, "wan21")
        renderer.render("taesd", x, "wan21")
    assert encoded.method == "latent2rgb" and (encoded.width, encoded.height) == (48, 32)
    said = [r.getMessage() for r in caplog.records if "does not load" in r.getMessage()]
    assert len(said) == 1 and "lighttaew2_1.safetensors" in said[0]  # once
