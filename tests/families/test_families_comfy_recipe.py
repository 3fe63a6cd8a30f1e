"""A family's ComfyUI recipe, from a distribution of its own: the importer maps ComfyUI's Chroma
template, `T5TokenizerOptions` included, through the recipe the `tiny_chroma` family returns,
and the imported graph renders what the hand-written primitives render. Nothing outside the
family's package names the class: without the family, the importer does not know it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.device import policy_from_config
from inline_core.engine.runtime import ModelRuntime
from inline_core.importer import ImportResult, import_comfy
from inline_core.importer.recognise import UnsupportedFamily
from inline_core.models.catalog import Catalog
from inline_core.sampling import StepLoopSampler
from tests.families.test_families_second_family import (
    RENDER,
    primitive_graph,
    registry_of,
    run_graph,
)
from tests.importer.comfy_workflows import ui_document, ui_node

Json = dict[str, Any]
PROMPT = "a lighthouse"


def chroma_api(*, min_padding: int = 1, min_length: int = 0) -> Json:
    """ComfyUI's Chroma text-to-image template over the tiny kit's files (API format)."""
    return {
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "chroma_tiny"}},
        "2": {
            "class_type": "CLIPLoader",
            "inputs": {"clip_name": "chroma_tiny_t5", "type": "chroma"},
        },
        "3": {
            "class_type": "T5TokenizerOptions",
            "inputs": {"clip": ["2", 0], "min_padding": min_padding, "min_length": min_length},
        },
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": PROMPT, "clip": ["3", 0]}},
        "5": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["3", 0]}},
        "6": {"class_type": "VAELoader", "inputs": {"vae_name": "chroma_tiny_vae"}},
        "7": {
            "class_type": "EmptySD3LatentImage",
            "inputs": {"width": RENDER["width"], "height": RENDER["height"], "batch_size": 1},
        },
        "8": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["1", 0],
                "positive": ["4", 0],
                "negative": ["5", 0],
                "latent_image": ["7", 0],
                "seed": RENDER["seed"],
                "steps": RENDER["steps"],
                "cfg": RENDER["guidance"],
                "sampler_name": "euler",
                "scheduler": "simple",
                "denoise": 1.0,
            },
        },
        "9": {"class_type": "VAEDecode", "inputs": {"samples": ["8", 0], "vae": ["6", 0]}},
        "10": {"class_type": "SaveImage", "inputs": {"images": ["9", 0], "filename_prefix": "x"}},
    }


def chroma_ui() -> Json:
    """The same template as the ComfyUI frontend saves it (widget values by position)."""
    r = RENDER
    nodes = [
        ui_node(1, "UNETLoader", outputs=[("MODEL", "MODEL")], widgets=["chroma_tiny", "default"]),
        ui_node(
            2,
            "CLIPLoader",
            outputs=[("CLIP", "CLIP")],
            widgets=["chroma_tiny_t5", "chroma", "default"],
        ),
        ui_node(
            3,
            "T5TokenizerOptions",
            inputs=[("clip", "CLIP")],
            outputs=[("CLIP", "CLIP")],
            widgets=[1, 0],
        ),
        ui_node(
            4,
            "CLIPTextEncode",
            inputs=[("clip", "CLIP")],
            outputs=[("CONDITIONING", "CONDITIONING")],
            widgets=[PROMPT],
        ),
        ui_node(
            5,
            "CLIPTextEncode",
            inputs=[("clip", "CLIP")],
            outputs=[("CONDITIONING", "CONDITIONING")],
            widgets=[""],
        ),
        ui_node(6, "VAELoader", outputs=[("VAE", "VAE")], widgets=["chroma_tiny_vae"]),
        ui_node(
            7,
            "EmptySD3LatentImage",
            outputs=[("LATENT", "LATENT")],
            widgets=[r["width"], r["height"], 1],
        ),
        ui_node(
            8,
            "KSampler",
            inputs=[
                ("model", "MODEL"),
                ("positive", "CONDITIONING"),
                ("negative", "CONDITIONING"),
                ("latent_image", "LATENT"),
            ],
            outputs=[("LATENT", "LATENT")],
            widgets=[r["seed"], "fixed", r["steps"], r["guidance"], "euler", "simple", 1.0],
        ),
        ui_node(
            9,
            "VAEDecode",
            inputs=[("samples", "LATENT"), ("vae", "VAE")],
            outputs=[("IMAGE", "IMAGE")],
        ),
        ui_node(10, "SaveImage", inputs=[("images", "IMAGE")], widgets=["x"]),
    ]
    links = [
        (1, 2, 0, 3, 0, "CLIP"),
        (2, 3, 0, 4, 0, "CLIP"),
        (3, 3, 0, 5, 0, "CLIP"),
        (4, 1, 0, 8, 0, "MODEL"),
        (5, 4, 0, 8, 1, "CONDITIONING"),
        (6, 5, 0, 8, 2, "CONDITIONING"),
        (7, 7, 0, 8, 3, "LATENT"),
        (8, 8, 0, 9, 0, "LATENT"),
        (9, 6, 0, 9, 1, "VAE"),
        (10, 9, 0, 10, 0, "IMAGE"),
    ]
    return ui_document(nodes, links)


@pytest.fixture(scope="module")
def catalog(two_families: Path) -> Catalog:
    return Catalog(two_families, ttl_s=0.0)


@pytest.fixture(scope="module")
def families(installed: Path, catalog: Catalog) -> Families:
    return Families.discovered(catalog, {})


def imported(workflow: Json, catalog: Catalog, families: Families) -> ImportResult:
    return import_comfy(workflow, catalog, facts=families)


def test_the_chroma_template_imports_through_the_familys_own_recipe(
    catalog: Catalog, families: Families
) -> None:
    result = imported(chroma_api(), catalog, families)
    assert result.family.family == "chroma"
    assert result.changes == [] and result.unmatched == []
    assert [s.node_id for s in result.skipped] == []  # T5TokenizerOptions mapped, not dropped
    encodes = [n for n in result.graph.nodes if n.type == "encode/text"]
    # The recipe's handler hands the CLIPLoader's encoder on to both prompts.
    assert {n.inputs["text_encoder"][0].source for n in encodes} == {"c2"}
    # The UI format reads the class by the widget order the recipe gives.
    assert imported(chroma_ui(), catalog, families).graph == result.graph


def test_other_tokenizer_options_are_listed_as_changing_the_picture(
    catalog: Catalog, families: Families
) -> None:
    result = imported(chroma_api(min_padding=0), catalog, families)
    [change] = result.changes
    assert (change.node_id, change.class_type) == ("3", "T5TokenizerOptions")
    assert "min_padding 0" in change.reason


def test_without_the_family_the_class_is_unknown_and_its_workflows_refused(
    catalog: Catalog, families: Families
) -> None:
    # No family's recipe: the class is one the importer has no equivalent for.
    bare = import_comfy(chroma_api(), catalog)
    [dropped] = [c for c in bare.changes if c.class_type == "T5TokenizerOptions"]
    assert "no 'T5TokenizerOptions'" in dropped.reason
    # Served families without Chroma: the workflow is Chroma's, so it is refused naming it.
    others = Families([f for f in families if f.name != "chroma"])
    with pytest.raises(UnsupportedFamily, match="Chroma"):
        import_comfy(chroma_api(), catalog, facts=others)


def test_the_imported_workflow_renders_what_the_primitives_render(
    catalog: Catalog, families: Families, tmp_path: Path
) -> None:
    result = imported(chroma_api(), catalog, families)
    config = Config(models_dir=catalog.root, profile="cpu", dtype="float32")
    sampler = StepLoopSampler()
    runtime = ModelRuntime(config, sampler, policy_from_config(config))
    try:
        registry = registry_of(families, catalog, runtime)
        steps, seed = RENDER["steps"], RENDER["seed"]
        graph = primitive_graph(PROMPT, cfg=RENDER["guidance"], seed=seed, steps=steps)
        [expected] = run_graph(registry, catalog, graph, "decode", tmp_path / "hand")
        [got] = run_graph(
            registry, catalog, result.graph.to_json(), result.target, tmp_path / "imported"
        )
    finally:
        sampler.close()
    assert np.array_equal(got, expected)
