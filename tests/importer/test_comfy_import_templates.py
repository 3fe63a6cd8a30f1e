"""Every official ComfyUI template: mapped onto a family this server runs (Z-Image's onto the
low-level nodes, Wan's template chains onto `alibaba/wan`, Qwen-Image's onto
`alibaba/qwen-image`, FLUX.2 klein's and dev's onto `bfl/flux-2`), or refused naming the
family it is for, the node it cannot run, or that it makes no image (audio, 3D, text). None
imports into another family. (`tests/families/zimage/`, `tests/families/wan/`,
`tests/families/flux2/test_flux2_import.py`, `test_flux2_dev_import.py` and
`tests/server/test_qwen_image_import.py` render the ones mapped, with the tiny models.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from comfy_harness import imported
from comfy_templates import Outcome, outcome_of, templates

from inline_core.contract.registry import Families
from inline_core.models.catalog import Catalog


def test_every_template_is_mapped_or_refused_naming_why(models_root: Path) -> None:
    # As the server has them: the families discovered once at start-up, over a catalog that
    # rescans its folder once a second (not at every look-up; nothing changes it here).
    catalog = Catalog(models_root)
    served = Families.discovered(catalog, {})
    outcomes: dict[str, Outcome] = {}
    for name, workflow in templates():
        outcomes[name] = outcome_of(
            lambda workflow=workflow: imported(workflow, catalog, families=served)
        )
    kinds = Counter(o.kind for o in outcomes.values())
    families = Counter(o.family for o in outcomes.values() if o.kind == "other family")
    print("\ntemplates:", dict(kinds), "\nrefused for:", dict(families.most_common()))
    mapped = {name for name, o in outcomes.items() if o.kind == "mapped"}
    # Mapped: templates built for Z-Image only (its model files), each node it dropped on the
    # way to the image listed as changing the picture.
    assert {"image_z_image.json", "image_z_image_turbo.json"} <= mapped
    assert {"text_to_video_wan.json", "video_wan2_2_5B_ti2v.json"} <= mapped
    qwen = ("image_qwen_image", "image_qwen_Image_2512", "image_qwen_image_edit_2509")
    assert {f"{name}.json" for name in (*qwen, "image_qwen_image_edit_2511")} <= mapped
    assert {"image_flux2_klein_text_to_image.json", "image_flux2_text_to_image_9b.json"} <= mapped
    assert {"image_flux2_text_to_image.json", "image_flux2.json", "image_flux2_fp8.json"} <= mapped
    assert {"video_ltx2_t2v.json", "video_ltx2_i2v.json", "video_ltx2_t2v_distilled.json"} <= mapped
    for name in mapped:
        outcome = outcomes[name]
        assert outcome.result is not None, name
        if outcome.family == "wan":  # one alibaba/wan node, naming the workflow's files
            (node,) = [n for n in outcome.result.graph.nodes if n.type == "alibaba/wan"]
            assert str(node.params.get("model")).startswith("wan"), (name, node.params)
            assert node.params.get("vae") and node.params.get("text_encoder"), (name, node.params)
            continue
        if outcome.family == "qwen-image":  # one alibaba/qwen-image node, its workflow's files
            (node,) = [n for n in outcome.result.graph.nodes if n.type == "alibaba/qwen-image"]
            assert "qwen_image" in str(node.params.get("model")), (name, node.params)
            continue
        if outcome.family == "flux-2":  # one bfl/flux-2 node, on the workflow's FLUX.2 file
            (node,) = [n for n in outcome.result.graph.nodes if n.type == "bfl/flux-2"]
            model = str(node.params.get("model"))
            assert "klein" in model or "flux2_dev" in model, (name, node.params)
            continue
        if outcome.family == "ltx2":  # one lightricks/ltx-2 node, its two stages as `upscale`
            (node,) = [n for n in outcome.result.graph.nodes if n.type == "lightricks/ltx-2"]
            assert str(node.params.get("model")).startswith("ltx-2"), (name, node.params)
            assert node.params.get("upscale") is True, (name, node.params)
            assert "gemma_3_12B_it" in str(node.params.get("text_encoder")), (name, node.params)
            continue
        if outcome.family == "sdxl":  # one stability/sdxl node, on the workflow's checkpoint
            (node,) = [n for n in outcome.result.graph.nodes if n.type == "stability/sdxl"]
            assert node.params.get("model"), (name, node.params)
            continue
        assert outcome.family == "z-image", name
        loaded = [
            n.params["file"]
            for n in outcome.result.graph.nodes
            if n.type.startswith("load/diffusion")
        ]
        assert loaded and all("z_image" in f for f in loaded), (name, loaded)
        for change in outcome.result.changes:
            assert any(
                w.startswith(f"changes the picture: {change.class_type}")
                for w in outcome.result.warnings
            )
    # Each template refused for its family names it (none is "cannot tell" for this package).
    assert families[None] == 0, families
    # The families ComfyUI ships the most templates for are each refused by name.
    for family in ("Wan", "Qwen-Image", "FLUX.1", "FLUX.2", "SDXL", "LTX-Video"):
        assert families[family] > 0, family
    # Z-Image's control template maps onto `load/controlnet`; its Canny preprocessor has no
    # equivalent here, so the photo itself becomes the control image, said in changesPicture.
    control = outcomes["image_z_image_turbo_fun_union_controlnet.json"]
    assert control.kind == "mapped" and control.result is not None
    [patch] = [n for n in control.result.graph.nodes if n.type == "load/controlnet"]
    assert patch.params["name"] == "Z-Image-Turbo-Fun-Controlnet-Union.safetensors"
    assert [c.class_type for c in control.result.changes] == ["Canny"]
    assert set(kinds) <= {
        "mapped",
        "other family",
        "node it cannot run",
        "no image",
        "sampler not run",
    }
