"""The Z-Image control model format read from tensor shapes alone: the released union layouts'
configs (1.0, 2.0, 2.1 over Z-Image Turbo's 30 layers), and files that are not control models."""

from __future__ import annotations

import pytest

from inline_core.diffusion.files.shapes import ConfigInferenceError, read_shapes
from inline_core.families.zimage import controlnet
from inline_core.families.zimage.kit import KitPaths

DIM, HEAD = 3840, 128


def union_shapes(blocks: int, in_dim: int, refiner: str | None) -> dict[str, tuple[int, ...]]:
    """The header of a released union file: `blocks` control blocks, and its refiner blocks
    (`plain`: 1.0's transformer blocks; `control`: 2.x's control blocks; None: none)."""
    shapes: dict[str, tuple[int, ...]] = {controlnet.MARKER: (DIM, 4 * in_dim)}
    for i in range(blocks):
        shapes[f"control_layers.{i}.attention.norm_q.weight"] = (HEAD,)
        shapes[f"control_layers.{i}.after_proj.weight"] = (DIM, DIM)
    for i in range(2 if refiner else 0):
        shapes[f"control_noise_refiner.{i}.attention_norm1.weight"] = (DIM,)
        if refiner == "control":
            shapes[f"control_noise_refiner.{i}.after_proj.weight"] = (DIM, DIM)
            if i == 0:
                shapes[f"control_noise_refiner.{i}.before_proj.weight"] = (DIM, DIM)
    return shapes


def test_union_1_0_places_a_block_every_fifth_layer() -> None:
    config = controlnet.infer_config(union_shapes(6, 16, "plain"))
    assert config["control_layers_places"] == [0, 5, 10, 15, 20, 25]
    assert config["control_in_dim"] == 16 and config["add_control_noise_refiner"] is None
    assert config["n_heads"] == 30 and config["dim"] == DIM


@pytest.mark.parametrize(
    ("zero", "mode"), [(False, "control_noise_refiner"), (True, "control_layers")]
)
def test_union_2_x_is_told_apart_by_its_refiners_before_proj(zero: bool, mode: str) -> None:
    config = controlnet.infer_config(union_shapes(15, 33, "control"), before_proj_zero=zero)
    assert config["control_layers_places"] == list(range(0, 30, 2))
    assert config["control_in_dim"] == 33 and config["add_control_noise_refiner"] == mode
    assert controlnet.takes_inpaint(config, 16)


def test_a_union_that_does_not_spread_over_the_model_is_refused() -> None:
    with pytest.raises(ConfigInferenceError, match="7 control blocks"):
        controlnet.infer_config(union_shapes(7, 16, "plain"))


def test_other_files_are_not_control_models(kit: KitPaths) -> None:
    for path in (kit.loras["a"], kit.diffusion_file):
        assert path is not None
        shapes = read_shapes(path)
        assert shapes is not None and not controlnet.is_zimage_control(shapes)
    union = read_shapes(kit.controls["union"])
    assert union is not None and controlnet.is_zimage_control(union)


def test_a_control_model_of_another_width_cannot_drive_the_model() -> None:
    config = controlnet.infer_config(union_shapes(6, 16, "plain"))
    why = controlnet.mismatch(config, {"dim": 64, "in_channels": 16})
    assert why is not None and "width is 3840" in why
