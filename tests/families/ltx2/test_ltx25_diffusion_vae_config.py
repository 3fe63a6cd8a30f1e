"""ComfyUI's LTX-2.5 video VAE file whose header's config is not ComfyUI's decoder's (a field of
another shape than `NADiffusionDecoder` takes): a clear reason (`problem`, a 422 at submit),
not an exception from the mapping onto diffusers' config. Torch-free: the header alone."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from inline_core.families.ltx2.diffusion_vae_file import MARKER, problem


def _file(path: Path, config: object) -> Path:
    """A safetensors file of the marker's one weight, `config` as its header's JSON."""
    header = {
        "__metadata__": {"config": json.dumps(config)},
        MARKER: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
    }
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(4))
    return path


@pytest.mark.parametrize(
    "decoder",
    [
        pytest.param("not an object", id="decoder-not-an-object"),
        pytest.param({"upsamples": [[[1, 2, 2]]]}, id="upsample-without-its-reduction"),
        pytest.param({"stage_channels": 512}, id="stage-channels-not-a-list"),
        pytest.param({"upsamples": [[[1, 2], 2]]}, id="stride-of-two-axes"),
    ],
)
def test_a_decoder_config_not_comfyui_s_is_a_reason(tmp_path: Path, decoder: object) -> None:
    path = _file(tmp_path / "ltx-2.5-video-vae-bf16.safetensors", {"vae": {"decoder": decoder}})
    why = problem(path)
    assert why is not None and "'decoder'" in why, why
