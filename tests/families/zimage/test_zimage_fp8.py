"""Z-Image from fp8 transformer files (ComfyUI's `*_fp8_e4m3fn` and `*_fp8_scaled`): a render
keeps the transformer's layers in fp8, mapped, whatever the budget, and its pixels are those of
the same weights upcast by hand; health names the storage dtype."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from lora_harness import picks
from test_zimage_server import submit, take_image, wait, zimage_graph
from zimage_harness import Pixels, make_runner, pixels, render, take_pixels

from inline_core.config import Config
from inline_core.device.policy import Placement
from inline_core.diffusion.layer_cast import CastLinear, ScaledCastLinear
from inline_core.diffusion.loading import load_component
from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.transformer import FORMAT
from inline_core.models.source import Source
from inline_core.sampling.loop import StepLoopSampler
from inline_core.server.app import create_app
from tests.diffusion.fp8_files import write_fp8

DIFFUSION = "diffusion_models/zimage_tiny.safetensors"
PARTS = ("vae", "text_encoders/zimage_tiny_qwen3")


def models_with(kit: KitPaths, root: Path, diffusion: Path) -> Path:
    """The kit's single-file stack with `diffusion` as its transformer."""
    for part in PARTS:
        source, target = kit.root / part, root / part
        target.parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if source.is_dir() else shutil.copy
        copy(source, target)
    (root / DIFFUSION).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(diffusion, root / DIFFUSION)
    return root


def served_render(
    kit: KitPaths, tmp_path: Path, name: str, diffusion: Path
) -> tuple[Pixels, dict[str, Any]]:
    """One render through the HTTP API of a server whose models folder is the kit's stack with
    `diffusion` as its transformer: the take's pixels, and health's residency after it."""
    root = models_with(kit, tmp_path / name, diffusion)
    config = Config(
        models_dir=root, data_dir=tmp_path / f"data-{name}", profile="cpu", dtype="float32"
    )
    with TestClient(create_app(config)) as client:
        state = wait(client, submit(client, zimage_graph("a lighthouse", steps=2, seed=9)))
        assert state["status"] == "done", state
        [take] = state["takes"]
        residency = client.get("/v1/health").json()["models"]["residency"]
        return pixels(take_image(client, take)), residency


@pytest.mark.parametrize("scaled", [False, True], ids=["fp8_e4m3fn", "fp8_scaled"])
def test_an_fp8_transformer_renders_the_pixels_of_its_weights_upcast_by_hand(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path, scaled: bool
) -> None:
    assert kit.diffusion_file is not None
    fp8, by_hand = tmp_path / "fp8.safetensors", tmp_path / "by_hand.safetensors"
    write_fp8(kit.diffusion_file, fp8, by_hand, scaled=scaled, dtype=torch.float8_e4m3fn)
    stored = make_runner(models_with(kit, tmp_path / "fp8", fp8), sampler)
    upcast = make_runner(models_with(kit, tmp_path / "by_hand", by_hand), sampler)
    want = take_pixels(render(upcast, tmp_path, seed=5))
    got = take_pixels(render(stored, tmp_path, seed=5))
    assert np.array_equal(got, want)
    # No budget asked for it: an fp8 file is kept so, mapped, and health says in which dtype.
    assert stored.runtime.residency.stats().mapped_bytes > 0
    shown = {row["part"]: row for row in stored.runtime.stats()["keptWeights"]}
    assert shown["Z-Image transformer"]["kept"] == "float8_e4m3fn"
    assert shown["Z-Image transformer"]["computes"] == "float32"
    assert "keptWeights" not in upcast.runtime.stats()


def test_a_scaled_layer_multiplies_its_stored_weight_by_its_scale(
    kit: KitPaths, tmp_path: Path
) -> None:
    assert kit.diffusion_file is not None
    fp8, by_hand = tmp_path / "fp8.safetensors", tmp_path / "by_hand.safetensors"
    write_fp8(kit.diffusion_file, fp8, by_hand, scaled=True, dtype=torch.float8_e4m3fn)
    kept = Placement(device="cpu", dtype="float32", storage="float8_e4m3fn")
    model = load_component(FORMAT, Source(fp8), kept)
    reference = load_component(FORMAT, Source(by_hand), Placement(device="cpu", dtype="float32"))
    # The file's fused qkv is split into three views of the stored tensor, each scaled.
    q = model.get_submodule("layers.0.attention.to_q")
    assert isinstance(q, ScaledCastLinear) and q.weight.dtype == torch.float8_e4m3fn
    want = reference.get_submodule("layers.0.attention.to_q")
    assert isinstance(want, torch.nn.Linear) and torch.equal(q.computed_weight(), want.weight)
    # Computed at load: diffusers casts the timestep to its first weight's dtype.
    assert {p.dtype for p in model.get_submodule("t_embedder").parameters()} == {torch.float32}
    assert any(
        isinstance(m, CastLinear) and m.weight.dtype == torch.float8_e4m3fn for m in model.modules()
    )


def test_a_server_renders_from_an_fp8_transformer_in_its_models_folder(
    kit: KitPaths, tmp_path: Path
) -> None:
    """ComfyUI's `z_image_turbo_fp8_e4m3fn`-style file dropped into `diffusion_models/`: picked,
    rendered through the HTTP API with the pixels of its weights upcast by hand, and shown in
    health as kept in fp8."""
    assert kit.diffusion_file is not None
    fp8, by_hand = tmp_path / "fp8.safetensors", tmp_path / "by_hand.safetensors"
    write_fp8(kit.diffusion_file, fp8, by_hand, scaled=True, dtype=torch.float8_e4m3fn)
    renders: list[Pixels] = []
    for name, weights in (("fp8", fp8), ("by_hand", by_hand)):
        image, residency = served_render(kit, tmp_path, name, weights)
        renders.append(image)
        kept = {row["part"]: row["kept"] for row in residency.get("keptWeights", [])}
        assert kept == ({"Z-Image transformer": "float8_e4m3fn"} if name == "fp8" else {})
    assert np.array_equal(renders[0], renders[1])


def test_a_lora_on_a_scaled_fp8_transformer_adds_its_deltas_per_row(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """A held stack is never fused onto fp8 layers (the copy would round its deltas to fp8): it
    runs per row, with the pixels of the same LoRAs on the weights upcast by hand."""
    assert kit.diffusion_file is not None
    fp8, by_hand = tmp_path / "fp8.safetensors", tmp_path / "by_hand.safetensors"
    write_fp8(kit.diffusion_file, fp8, by_hand, scaled=True, dtype=torch.float8_e4m3fn)
    rigs: list[FamilyRig] = []
    for name, weights in (("fp8", fp8), ("by_hand", by_hand)):
        root = models_with(kit, tmp_path / name, weights)
        shutil.copytree(kit.root / "loras", root / "loras")
        rigs.append(make_runner(root, sampler, no_lora_fusing=name == "by_hand"))
    stored, upcast = rigs
    stack = [("a", 0.8), ("b", 0.5)]
    params: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "guidance": 0.0, "seed": 3}
    got = take_pixels(render(stored, tmp_path, loras=picks(stored, kit, stack), **params))
    want = take_pixels(render(upcast, tmp_path, loras=picks(upcast, kit, stack), **params))
    assert np.array_equal(got, want)
    counts = stored.runtime.adapter_totals.to_json()
    assert counts["mode"] == "fuse-held" and counts["fuses"] == 0  # it may fuse; it did not
    assert counts["perRowForwards"] == params["steps"]
