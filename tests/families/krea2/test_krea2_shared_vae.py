"""Qwen-Image and Krea 2 on one runtime decode with one Qwen-Image VAE file: it is loaded once
(resident bytes are the two transformers, the two text encoders and one VAE), and Health's
residency lists it shared."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from inline_core.config import Config
from inline_core.diffusion.footprint import footprint
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import KREA2_DESCRIPTOR
from inline_core.families.krea2.kit import build_kit
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image.descriptor import QWEN_IMAGE_DESCRIPTOR
from inline_core.families.qwen_image.kit import build_kit as build_qwen_kit
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.runner import NodeCall
from inline_core.sampling.loop import StepLoopSampler
from tests.families.node_context import node_context

VAE = "qwen_image_vae_tiny.safetensors"  # Qwen-Image's kit file: the Wan 2.1 layout both read


def run(rig: FamilyRig, tmp: Path, params: dict[str, Any]) -> None:
    ctx = node_context(tmp)
    rig.run(NodeCall(ctx=ctx, node_id="n", params=params, inputs={"prompt": "a fox"}))


def test_one_vae_copy_for_qwen_image_and_krea2(
    tmp_path: Path, krea_sampler: StepLoopSampler
) -> None:
    root = tmp_path / "models"
    build_qwen_kit(root, layouts=("comfy",))
    build_kit(root)
    config = Config(models_dir=root, profile="cpu", dtype="float32")
    krea = family_rig(Krea2Family, root, krea_sampler, config=config)
    qwen = FamilyRig(QwenImageFamily(krea.catalog, config.env), krea.runtime, krea.catalog, config)
    q_params = {p.name: p.default for p in QWEN_IMAGE_DESCRIPTOR.params}
    q_params.update(
        width=64, height=64, steps=2, seed=1, vae=VAE, model="qwen_image_tiny.safetensors"
    )
    run(qwen, tmp_path, q_params)
    k_params = {p.name: p.default for p in KREA2_DESCRIPTOR.params}
    k_params.update(width=64, height=64, steps=2, guidance=0.0, seed=1, vae=VAE)
    run(krea, tmp_path, k_params)
    stacks = krea.runtime.stacks()
    shared = stacks.shared()
    assert [(s["part"], s["format"], s["families"]) for s in shared] == [
        ("vae", "qwen-image-vae", ["krea-2", "qwen-image"])
    ]
    k_pipe: Any = stacks.pipeline(
        krea.family, krea.family.resolve(KREA2_DESCRIPTOR.type, k_params).require()
    )
    q_pipe: Any = stacks.pipeline(
        qwen.family, qwen.family.resolve(QWEN_IMAGE_DESCRIPTOR.type, q_params).require()
    )
    assert k_pipe.vae.autoencoder is q_pipe.vae.autoencoder
    modules = cast(
        list[torch.nn.Module],
        [
            k_pipe.transformer,
            k_pipe.text_encoder.model,
            k_pipe.vae.autoencoder,
            q_pipe.denoiser.transformer,
            q_pipe.text_encoder.model,
        ],
    )
    expected = sum(footprint(m).own_bytes + footprint(m).mapped_bytes for m in modules)
    stats = krea.runtime.residency.stats()
    assert stats.resident_bytes + stats.mapped_bytes == expected
