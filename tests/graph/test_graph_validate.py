from __future__ import annotations

import re
from typing import Any

import pytest
from graph_harness import Harness, graph, node

from inline_core.errors import InlineError, InvalidGraph, InvalidRequest, ModelMissing
from inline_core.graph.validate import may_wait_on_disk


def _error(h: Harness, raw: dict[str, Any], target: str) -> InlineError:
    with pytest.raises(InlineError) as info:
        h.validate(raw, target)
    return info.value


def test_a_valid_graph_gets_its_closure_order_and_merged_defaults(h: Harness) -> None:
    raw = graph(
        node("unused", "test/echo", {"suffix": "!"}),
        node("t", "input/text", {"text": "hi"}),
        node("e", "test/echo", text="t.text"),
    )
    validated = h.validate(raw, "e")
    assert validated.order == ("t", "e")
    assert validated.target == "e"
    assert validated.graph.node("e").params == {"suffix": ""}
    assert validated.graph.node("t").params == {"text": "hi"}
    assert [n.id for n in validated.graph.nodes] == ["unused", "t", "e"]


def test_bad_target_is_an_invalid_request(h: Harness) -> None:
    err = _error(h, graph(node("t", "input/text")), "missing")
    assert isinstance(err, InvalidRequest)


@pytest.mark.parametrize(
    ("nodes", "node_id", "message"),
    [
        ([node("x", "no/such")], "x", "unknown node type 'no/such'"),
        (
            [node("t", "input/text"), node("x", "test/echo", prompt="t.text")],
            "x",
            "unknown input 'prompt'",
        ),
        ([node("x", "test/echo", text="ghost.text")], "x", "missing node 'ghost'"),
        (
            [node("t", "input/text"), node("x", "test/echo", text="t.image")],
            "x",
            "has no output 'image'",
        ),
        (
            [node("t", "input/text"), node("x", "image/flip", image="t.text")],
            "x",
            "expects image, but 't'.text gives text",
        ),
        (
            [node("t", "input/text"), node("x", "test/echo", text=["t.text", "t.text"])],
            "x",
            "takes one edge, got 2",
        ),
        ([node("x", "test/echo", {"colour": "red"})], "x", "unknown params \\['colour'\\]"),
        ([node("x", "image/flip")], "x", "required input 'image' is not connected"),
        ([node("x", "input/image")], "x", "param 'asset' is required"),
    ],
)
def test_each_error_names_its_node(
    h: Harness, nodes: list[dict[str, Any]], node_id: str, message: str
) -> None:
    err = _error(h, graph(*nodes), node_id)
    assert isinstance(err, InvalidGraph)
    assert err.node_id == node_id
    assert err.status == 422
    assert re.search(message, err.message), err.message


def test_structure_is_checked_outside_the_closure_but_params_and_inputs_are_not(
    h: Harness,
) -> None:
    # Outside the closure: an unwired required input and a bad param do not block the run...
    loose = graph(
        node("t", "input/text"),
        node("flip", "image/flip", {"direction": "sideways"}),
        node("load", "test/load", {"file": "absent.safetensors"}),
    )
    assert h.validate(loose, "t").order == ("t",)
    # ...but a wrong edge kind anywhere does.
    bad_edge = graph(node("t", "input/text"), node("flip", "image/flip", image="t.text"))
    assert _error(h, bad_edge, "t").node_id == "flip"


def test_a_cycle_anywhere_is_refused(h: Harness) -> None:
    raw = graph(
        node("t", "input/text"),
        node("a", "test/echo", text="b.text"),
        node("b", "test/echo", text="a.text"),
    )
    err = _error(h, raw, "t")
    assert isinstance(err, InvalidGraph)
    assert "cycle" in err.message
    assert err.node_id in {"a", "b"}


def test_image_feeds_an_image_list_port(h: Harness) -> None:
    raw = graph(
        node("img", "input/image", {"asset": h.asset("a1", (4, 4))}),
        node("c", "test/collect", one="img.image", images=["img.image", "img.image"]),
    )
    assert h.validate(raw, "c").order == ("img", "c")


def test_primitives_type_check_but_cannot_run_without_runners(h: Harness) -> None:
    h.model_file("z.safetensors")
    (h.models / "vae" / "ae.safetensors").write_bytes(b"vae")
    (h.models / "text_encoders" / "qwen.safetensors").write_bytes(b"te")
    h.catalog.rescan()
    raw = graph(
        node("m", "load/diffusion-model", {"file": "z.safetensors"}),
        node("v", "load/vae", {"file": "ae.safetensors"}),
        node("te", "load/text-encoder", {"file": "qwen.safetensors"}),
        node("p", "input/text", {"text": "a cat"}),
        node("pos", "encode/text", text_encoder="te.text_encoder", prompt="p.text"),
        node("lat", "latent/empty", {"width": 512, "height": 768}),
        node("s", "sample", model="m.model", positive="pos.conditioning", latent="lat.latent"),
        node("d", "vae/decode", vae="v.vae", latent="s.latent"),
    )
    err = _error(h, raw, "d")
    assert isinstance(err, InvalidGraph)
    assert err.node_id == "m"
    assert "cannot run here: no runner registered" in err.message
    # A wrong kind among primitives is a type error, before any runner question.
    raw["nodes"][6]["inputs"]["positive"] = {"from": "p", "output": "text"}
    err = _error(h, raw, "d")
    assert err.node_id == "s"
    assert "expects conditioning, but 'p'.text gives text" in err.message


def test_unavailable_node_type_is_model_missing_with_the_reason(h: Harness) -> None:
    h.registry.mark_unavailable("image/flip", "install the zimage extra")
    raw = graph(
        node("img", "input/image", {"asset": h.asset("a1", (4, 4))}),
        node("f", "image/flip", image="img.image"),
    )
    err = _error(h, raw, "f")
    assert isinstance(err, ModelMissing)
    assert err.code == "model_missing"
    assert err.node_id == "f"
    assert "install the zimage extra" in err.message


def test_runner_check_can_refuse_a_model(h: Harness) -> None:
    h.model_file("refused.safetensors")
    err = _error(h, graph(node("l", "test/load", {"file": "refused.safetensors"})), "l")
    assert isinstance(err, ModelMissing)
    assert err.node_id == "l"


def test_input_image_naming_unknown_media_is_refused_at_submit(h: Harness) -> None:
    raw = graph(node("img", "input/image", {"asset": {"ref": "take", "id": "tk_nope"}}))
    err = _error(h, raw, "img")
    assert isinstance(err, InvalidGraph)
    assert err.node_id == "img"
    assert "tk_nope" in err.message


def test_only_graphs_with_checks_or_pickers_may_wait_on_the_disk(h: Harness) -> None:
    pure = graph(node("t", "input/text", {"text": "a"}), node("e", "test/echo"))
    assert not may_wait_on_disk(pure, h.registry)
    # test/load both checks its file at submit and picks from the catalog.
    assert may_wait_on_disk(graph(node("l", "test/load", {"file": "a.safetensors"})), h.registry)
    media = {"asset": {"ref": "take", "id": "tk_a"}}  # input/image's check resolves its media
    assert may_wait_on_disk(graph(node("img", "input/image", media)), h.registry)
    # Not a graph, or unknown types: refused before any check runs.
    assert not may_wait_on_disk([], h.registry)
    assert not may_wait_on_disk({"nodes": [{"type": "no/such"}, 3]}, h.registry)
