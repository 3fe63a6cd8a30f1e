"""The torch side of step previews: the published latent-to-RGB factors applied as ComfyUI applies
them, a ComfyUI-named tiny decoder (the kit's taef1) loaded into diffusers' `DecoderTiny` with the
same output, the preview size, and taesd falling back to latent2rgb without a decoder file."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

torch = pytest.importorskip("torch")

from PIL import Image  # noqa: E402

from inline_core.diffusion.formats.taesd import (  # noqa: E402
    NotATinyDecoder,
    infer_config,
    to_comfy_key,
    to_diffusers_key,
)
from inline_core.diffusion.libs import load_safetensors  # noqa: E402
from inline_core.diffusion.preview.formats import (  # noqa: E402
    FLUX,
    PREVIEW_FORMATS,
    WAN21,
    WAN22,
    preview_format,
)
from inline_core.diffusion.preview.kit import tiny_decoder_config, write_tiny_decoder  # noqa: E402
from inline_core.diffusion.preview.latent_rgb import latent_to_rgb  # noqa: E402
from inline_core.diffusion.preview.renderer import PreviewRenderer  # noqa: E402
from inline_core.diffusion.preview.tiny_decoder import TinyDecoder, find_decoder  # noqa: E402


def expected_rgb(x: Any, factors: Any, bias: Any) -> npt.NDArray[np.float64]:
    """ComfyUI's latent2rgb by hand (numpy): per cell `x . factors + bias`, (-1, 1) -> 0..255."""
    cells = np.asarray(x, dtype=np.float64)
    c, h, w = cells.shape
    rgb = cells.reshape(c, h * w).T @ np.asarray(factors) + np.asarray(bias)
    return np.clip(np.round((rgb + 1.0) * 127.5), 0, 255).reshape(h, w, 3)


def test_every_format_has_a_factor_row_per_latent_channel() -> None:
    assert set(PREVIEW_FORMATS) == {"flux", "flux2", "wan21", "wan22", "sdxl", "sd15", "ltxv"}
    for fmt in PREVIEW_FORMATS.values():
        assert len(fmt.rgb_factors) == fmt.channels
        assert all(len(row) == 3 for row in fmt.rgb_factors) and len(fmt.rgb_bias) == 3
    assert (FLUX.channels, WAN21.channels, WAN22.channels) == (16, 16, 48)
    assert FLUX.tiny_decoders == ("taef1_decoder",) and not FLUX.video
    assert WAN21.video and WAN22.video and WAN21.tiny_decoders[0] == "lighttaew2_1"
    with pytest.raises(KeyError, match="no preview format 'sd3'"):
        preview_format("sd3")


def test_latent2rgb_is_the_published_linear_map() -> None:
    x = torch.randn(1, 16, 6, 10, generator=torch.Generator().manual_seed(0)) * 3
    image = latent_to_rgb(x, FLUX)
    assert image.size == (10, 6)
    want = expected_rgb(x[0].double().numpy(), np.array(FLUX.rgb_factors), np.array(FLUX.rgb_bias))
    got = np.asarray(image, dtype=np.int16)
    assert np.abs(got - want).max() <= 1  # float32 against float64 rounding


@pytest.mark.parametrize("fmt", [WAN21, WAN22], ids=lambda f: f.name)
def test_video_latents_preview_their_first_frame(fmt: Any) -> None:
    x = torch.randn(1, fmt.channels, 3, 4, 5, generator=torch.Generator().manual_seed(1))
    image = latent_to_rgb(x, fmt)
    assert image.size == (5, 4)
    factors, bias = np.array(fmt.rgb_factors), np.array(fmt.rgb_bias)
    want = expected_rgb(x[0, :, 0].double().numpy(), factors, bias)
    assert np.abs(np.asarray(image, dtype=np.int16) - want).max() <= 1


def test_latents_of_another_format_are_refused() -> None:
    with pytest.raises(ValueError, match="not flux's"):
        latent_to_rgb(torch.zeros(1, 4, 8, 8), FLUX)


def test_the_kit_decoder_loads_with_comfyui_naming_and_decodes_as_diffusers(
    tmp_path: Path,
) -> None:
    from diffusers.models.autoencoders.vae import DecoderTiny

    path = write_tiny_decoder(tmp_path, FLUX, seed=11)
    assert path == tmp_path / "vae_approx" / "taef1_decoder.safetensors"
    assert find_decoder(tmp_path / "vae_approx", FLUX) == path
    state = load_safetensors(path)
    assert "1.weight" in state and not any(k.startswith("layers.") for k in state)
    assert infer_config({k: tuple(v.shape) for k, v in state.items()}) == tiny_decoder_config(FLUX)
    # diffusers' own module with the file's weights under its own names is the reference.
    reference: Any = DecoderTiny(**tiny_decoder_config(FLUX).to_diffusers())  # pyright: ignore[reportArgumentType]
    reference.load_state_dict({to_diffusers_key(k): v for k, v in state.items()})
    x = torch.randn(1, 16, 4, 6, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        pixels = reference.eval()(x)[0].permute(1, 2, 0)
    want = ((pixels + 1.0) * 127.5).clamp(0, 255).round().numpy()
    image = TinyDecoder(path, FLUX).decode(x)
    assert image.size == (48, 32)  # 8x the latents, as the real taef1
    assert np.abs(np.asarray(image, dtype=np.int16) - want).max() <= 1


def test_keys_convert_both_ways_and_foreign_files_are_refused() -> None:
    assert to_diffusers_key("3.conv.0.weight") == "layers.2.conv.0.weight"
    assert to_comfy_key("layers.2.conv.0.weight") == "3.conv.0.weight"
    with pytest.raises(NotATinyDecoder):
        infer_config({"decoder.conv_in.weight": (64, 16, 3, 3)})


def test_a_decoder_for_other_latents_is_refused(tmp_path: Path) -> None:
    path = write_tiny_decoder(tmp_path, FLUX)
    with pytest.raises(ValueError, match="decodes 16 latent channels; wan22 latents have 48"):
        TinyDecoder(path, WAN22)


def jpeg(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    assert image.format == "JPEG"
    return image


def test_previews_take_the_preview_size_or_the_picture_s_own(tmp_path: Path) -> None:
    write_tiny_decoder(tmp_path, FLUX)
    x = torch.randn(1, 16, 8, 12)  # a 96 x 64 picture
    small = PreviewRenderer(tmp_path / "vae_approx", 32)
    for method in ("latent2rgb", "taesd"):
        encoded = small.render(method, x, "flux")
        assert encoded.method == method and (encoded.width, encoded.height) == (32, 21)
        assert jpeg(encoded.data).size == (32, 21)
    large = PreviewRenderer(tmp_path / "vae_approx", 512)
    assert jpeg(large.render("latent2rgb", x, "flux").data).size == (96, 64)
    assert large.fit((1024, 768)) == (512, 384) and large.fit((300, 200)) == (300, 200)


def test_taesd_without_a_decoder_file_falls_back_to_latent2rgb(tmp_path: Path) -> None:
    renderer = PreviewRenderer(tmp_path / "vae_approx", 64)
    x = torch.randn(1, 16, 8, 8)
    encoded = renderer.render("taesd", x, "flux")
    assert encoded.method == "latent2rgb" and jpeg(encoded.data).size == (64, 64)
    assert renderer.render("taesd", x, "flux").data == renderer.render("latent2rgb", x, "flux").data
