from __future__ import annotations

import random
import re
from typing import Any

import pytest
from graph_harness import Harness, graph, node

from inline_core.errors import InvalidGraph
from inline_core.graph.descriptor import SEED_MAX, NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.params import DRAWN_SEED_MAX, normalize_params
from inline_core.graph.primitives import LATENT_EMPTY, SAMPLE
from inline_core.graph.schema import PortKind, parse_graph
from inline_core.graph.validate import validate_graph

SPECS = NodeDescriptor(
    type="test/params",
    title="Params",
    category="test",
    outputs=(PortSpec("text", PortKind.TEXT),),
    params=(
        ParamSpec("name", ParamWidget.TEXT, "x", max_length=5),
        ParamSpec("count", ParamWidget.NUMBER, 2, minimum=1, maximum=10, integer=True),
        ParamSpec("scale", ParamWidget.NUMBER, 1.0, minimum=0.0, maximum=2.0),
        ParamSpec("on", ParamWidget.BOOLEAN, False),
        ParamSpec("pick", ParamWidget.SELECT, "a", options=("a", "b")),
        ParamSpec("model", ParamWidget.SELECT, None, options_from="diffusion_models"),
        ParamSpec("seed", ParamWidget.SEED, -1),
        ParamSpec("asset", ParamWidget.MEDIA, None),
        ParamSpec("must", ParamWidget.TEXT, None, required=True),
    ),
)


def _norm(h: Harness, **params: Any) -> dict[str, Any]:
    return normalize_params(SPECS, "n1", {"must": "m", **params}, h.catalog)


def _refused(h: Harness, **params: Any) -> str:
    with pytest.raises(InvalidGraph) as info:
        _norm(h, **params)
    assert info.value.node_id == "n1"
    return info.value.message


def test_defaults_are_merged_and_numbers_coerced(h: Harness) -> None:
    assert _norm(h) == {
        "name": "x",
        "count": 2,
        "scale": 1.0,
        "on": False,
        "pick": "a",
        "model": None,
        "seed": -1,
        "asset": None,
        "must": "m",
    }
    out = _norm(h, count=4.0, scale=1, name=None)
    assert out["count"] == 4 and type(out["count"]) is int
    assert out["scale"] == 1.0 and type(out["scale"]) is float
    assert out["name"] == "x"  # null means the default


def test_normalising_is_idempotent(h: Harness) -> None:
    once = _norm(h, count=3.0, scale=2, asset={"ref": "asset", "id": "sha256-ab"})
    assert normalize_params(SPECS, "n1", once, h.catalog) == once


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": 3}, "'name' must be a string"),
        ({"name": "toolong"}, "'name' is 7 characters; the limit is 5"),
        ({"count": True}, "'count' must be a number, got bool"),
        ({"count": "3"}, "'count' must be a number, got str"),
        ({"count": 2.5}, "'count' must be a whole number"),
        ({"count": 0}, "'count' must be at least 1"),
        ({"count": 11}, "'count' must be at most 10"),
        ({"scale": float("nan")}, "'scale' must be a finite number"),
        ({"scale": 2.5}, "'scale' must be at most 2"),
        ({"on": 1}, "'on' must be true or false"),
        ({"pick": "c"}, "'pick' is 'c'; choose one of 'a', 'b'"),
        ({"seed": -2}, "'seed' must be -1 \\(random\\)"),
        ({"seed": SEED_MAX + 1}, "'seed' must be -1"),
        ({"seed": 1.5}, "'seed' must be -1"),
        ({"seed": False}, "'seed' must be -1"),
        ({"asset": "sha256-ab"}, "'asset' must be an object"),
        ({"asset": {"ref": "url", "id": "x"}}, "'ref' must be one of asset, take"),
        ({"asset": {"ref": "asset", "id": ""}}, "'id' must be a non-empty string"),
        ({"asset": {"ref": "asset", "id": "x" * 129}}, "'id' must be a non-empty string"),
        ({"asset": {"ref": "asset", "id": "x", "url": "y"}}, "unknown keys \\['url'\\]"),
        ({"must": None}, "'must' is required"),
        ({"extra": 1}, "unknown params \\['extra'\\]"),
    ],
)
def test_bad_values_are_refused_with_the_param_named(
    h: Harness, params: dict[str, Any], message: str
) -> None:
    msg = _refused(h, **params)
    assert re.search(message, msg), msg


def test_integer_steps_are_enforced(h: Harness) -> None:
    ok = normalize_params(LATENT_EMPTY, "l", {"width": 512, "height": 80}, h.catalog)
    assert ok == {"width": 512, "height": 80, "batch": 1}
    with pytest.raises(InvalidGraph, match="'width' must be a multiple of 16"):
        normalize_params(LATENT_EMPTY, "l", {"width": 500}, h.catalog)


def test_model_picker_accepts_only_files_the_catalog_lists(h: Harness) -> None:
    assert "no models in diffusion_models/" in _refused(h, model="z.safetensors")
    h.model_file("z.safetensors")
    h.model_file("other.safetensors")
    (h.models / "diffusion_models" / "notes.txt").write_text("not a weight file")
    assert _norm(h, model="z.safetensors")["model"] == "z.safetensors"
    msg = _refused(h, model="notes.txt")
    assert "choose one of 'other.safetensors', 'z.safetensors'" in msg
    assert "'../z.safetensors'" in _refused(h, model="../z.safetensors")


def test_a_missing_model_lists_every_file_as_model_missing(h: Harness) -> None:
    for i in range(30):
        (h.models / "diffusion_models" / f"m{i:02}.safetensors").write_bytes(b"w")
    h.catalog.rescan()
    with pytest.raises(InvalidGraph) as info:
        _norm(h, model="nope")
    assert info.value.code == "model_missing"
    assert "'m00.safetensors'" in info.value.message and "'m29.safetensors'" in info.value.message
    assert "more)" not in info.value.message


def test_random_seeds_are_resolved_at_validation_reproducibly(h: Harness) -> None:
    h.registry.register(
        NodeDescriptor(
            type="test/seeded",
            title="Seeded",
            category="test",
            outputs=(PortSpec("text", PortKind.TEXT),),
            params=(ParamSpec("seed", ParamWidget.SEED, -1),),
        ),
        h.echo,
    )
    raw = graph(node("a", "test/seeded"), node("b", "test/seeded", {"seed": 42}))
    first = h.validate(raw, "a", rng=random.Random(1)).graph.node("a").params["seed"]
    again = h.validate(raw, "a", rng=random.Random(1)).graph.node("a").params["seed"]
    other = h.validate(raw, "a", rng=random.Random(2)).graph.node("a").params["seed"]
    assert first == again != other
    assert 0 <= first <= DRAWN_SEED_MAX
    # Outside the closure nothing is resolved; an explicit seed is kept.
    validated = h.validate(raw, "a")
    assert validated.graph.node("b").params == {"seed": 42}
    assert h.validate(raw, "b").graph.node("b").params == {"seed": 42}
    # The default random source (SystemRandom) also resolves a seed in range.
    system = validate_graph(parse_graph(raw), "a", h.registry, h.catalog)
    assert 0 <= system.graph.node("a").params["seed"] <= DRAWN_SEED_MAX


def test_sample_defaults(h: Harness) -> None:
    params = normalize_params(SAMPLE, "s", {}, h.catalog)
    assert params == {
        "steps": 8,
        "cfg": 1.0,
        "sampler": "euler",
        "scheduler": "simple",
        "seed": -1,
        "denoise": 1.0,
        "start_step": 0,  # the whole schedule from noise (KSamplerAdvanced's defaults)
        "end_step": 10000,
        "add_noise": True,
        "leftover_noise": False,
        "shift": None,  # the model's own
        "mu": None,
    }


def test_an_empty_model_picker_means_choose_for_me(h: Harness) -> None:
    assert _norm(h, model="")["model"] is None
    assert "pick" in _refused(h, pick="")  # a fixed select has no such meaning
