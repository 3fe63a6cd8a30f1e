"""The Qwen-Image VAE format: ComfyUI's file naming <-> diffusers' `AutoencoderKLQwenImage`, on a
tiny random VAE written the way ComfyUI's `vae/qwen_image_vae.safetensors` is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from inline_core.device.policy import Placement
from inline_core.diffusion.files.shapes import ConfigInferenceError, read_shapes
from inline_core.diffusion.formats import qwen_image_vae, wan22_vae, wan_vae
from inline_core.diffusion.libs import diffusers, load_safetensors, manual_seed, save_safetensors
from inline_core.diffusion.loading import load_component
from inline_core.models.source import Source

TINY: dict[str, Any] = {
    "base_dim": 8,
    "z_dim": 16,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
}


def _tiny_vae(input_channels: int = 3) -> Any:
    manual_seed(0)
    vae: Any = diffusers().AutoencoderKLQwenImage(**TINY, input_channels=input_channels)
    with torch.no_grad():
        for p in vae.parameters():  # RMS gammas start at one: make every weight count
            p.add_(torch.randn_like(p) * 0.05)
    return vae.eval()


def _comfy_file(vae: Any, path: Path) -> Path:
    state = {k: v.contiguous() for k, v in vae.state_dict().items()}
    save_safetensors(qwen_image_vae.to_original(state), path)
    return path


@pytest.fixture(scope="module")
def vae() -> Any:
    return _tiny_vae()


@pytest.fixture(scope="module")
def comfy_file(vae: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _comfy_file(vae, tmp_path_factory.mktemp("qvae") / "qwen_image_vae.safetensors")


def test_header_is_recognised_and_configured(comfy_file: Path) -> None:
    shapes = read_shapes(comfy_file)
    assert shapes is not None
    assert qwen_image_vae.is_qwen_image_vae(shapes)
    assert qwen_image_vae.infer_config(shapes) == {**TINY, "input_channels": 3}


def test_keys_round_trip(vae: Any, comfy_file: Path) -> None:
    original = load_safetensors(comfy_file)
    assert wan_vae.MARKER in original
    back = qwen_image_vae.from_original(dict(original), {})
    assert set(back) == set(vae.state_dict())
    assert all(torch.equal(back[k], v) for k, v in vae.state_dict().items())


def test_loaded_file_encodes_and_decodes_as_the_model(vae: Any, comfy_file: Path) -> None:
    loaded = load_component(
        qwen_image_vae.FORMAT, Source(comfy_file), Placement(device="cpu", dtype="float32")
    )
    assert type(loaded).__name__ == qwen_image_vae.CLASS_NAME
    image = torch.rand(1, 3, 1, 32, 48, generator=torch.Generator().manual_seed(1)) * 2 - 1
    want_latent, want = _round_trip(vae, image)
    got_latent, got = _round_trip(loaded, image)
    assert got_latent.shape == (1, 16, 1, 4, 6)
    assert torch.equal(got_latent, want_latent)
    assert torch.equal(got, want)


def _round_trip(model: Any, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        latent = cast(torch.Tensor, model.encode(image).latent_dist.mode())
        return latent, cast(torch.Tensor, model.decode(latent).sample)


def test_rgba_layout_is_read_from_the_header(tmp_path: Path) -> None:
    path = _comfy_file(_tiny_vae(input_channels=4), tmp_path / "layered_vae.safetensors")
    shapes = read_shapes(path)
    assert shapes is not None
    assert qwen_image_vae.infer_config(shapes)["input_channels"] == 4


def test_wan22_and_other_channel_counts_are_not_this_vae() -> None:
    wan22 = {
        wan_vae.MARKER: (32,),
        wan22_vae.MARKER: (1,),
        "encoder.conv1.weight": (8, 12, 3, 3, 3),
    }
    wider = {
        wan_vae.MARKER: (32,),
        "encoder.conv1.weight": (8, 3, 3, 3, 3),
        "conv2.weight": (32, 32, 1, 1, 1),
    }
    assert not qwen_image_vae.is_qwen_image_vae({**wan22, "conv2.weight": (48, 48, 1, 1, 1)})
    assert not qwen_image_vae.is_qwen_image_vae(wider)
    with pytest.raises(ConfigInferenceError):
        qwen_image_vae.infer_config(wider)


def test_folder_config_is_recognised() -> None:
    assert qwen_image_vae.is_qwen_image_vae_config({"_class_name": "AutoencoderKLQwenImage"})
    assert not qwen_image_vae.is_qwen_image_vae_config({"_class_name": "AutoencoderKLWan"})
    assert not qwen_image_vae.is_qwen_image_vae_config(None)


def test_module_is_torch_free_at_import() -> None:
    code = (
        "import sys; import inline_core.diffusion.formats.qwen_image_vae; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
