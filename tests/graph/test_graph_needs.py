"""What a run's consumers need of a node's output, gathered at submit through the edges: a source
that makes its output in several variants makes only the ones the run's consumers read, through
nodes that pass them on; a consumer that does not say, or the output being the run's result,
keeps every variant; a consumer outside the run needs nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest
from graph_harness import Harness, graph, node

from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.needs import joined
from inline_core.graph.runner import Needs, NodeCall, NodeResult, NodeRunner, SubmitFacts
from inline_core.graph.schema import PortKind

ALL = frozenset({"a", "b", "c"})


class Variants(NodeRunner):
    """test/variants: text made in the variants its consumers need (prepared at submit)."""

    def check(self, node_id: str, params: Mapping[str, Any]) -> object | None:
        return ALL

    def fitted(self, prepared: object | None, needs: Mapping[str, Needs]) -> object | None:
        wanted = needs["text"]
        return prepared if wanted is None else wanted

    def run(self, call: NodeCall) -> NodeResult:
        made = cast(frozenset[str], call.prepared)
        return NodeResult(outputs={"text": "+".join(sorted(made))})


class Pass(NodeRunner):
    """test/pass: its text as it came; it needs of it what its consumers need."""

    needs_follow = {"text": "text"}

    def run(self, call: NodeCall) -> NodeResult:
        return NodeResult(outputs={"text": call.inputs["text"]})


class Want(NodeRunner):
    """test/want: reads its `variant` of the text."""

    def input_needs(
        self, params: Mapping[str, Any], facts: SubmitFacts, needs: Mapping[str, Needs]
    ) -> Mapping[str, Needs]:
        return {"text": frozenset({str(params["variant"])})}

    def run(self, call: NodeCall) -> NodeResult:
        return NodeResult(outputs={"text": f"{call.params['variant']} of {call.inputs['text']}"})


class Join(NodeRunner):
    """test/join: its texts joined (it says nothing of what it needs)."""

    def run(self, call: NodeCall) -> NodeResult:
        return NodeResult(outputs={"text": " | ".join(call.inputs["texts"])})


def _text_node(node_type: str, *, params: tuple[ParamSpec, ...] = ()) -> NodeDescriptor:
    return NodeDescriptor(
        type=node_type,
        title=node_type,
        category="test",
        inputs=(PortSpec("text", PortKind.TEXT),),
        outputs=(PortSpec("text", PortKind.TEXT),),
        params=params,
    )


@pytest.fixture
def needs(h: Harness) -> Harness:
    text = (PortSpec("text", PortKind.TEXT),)
    h.registry.register(
        NodeDescriptor(type="test/variants", title="Variants", category="test", outputs=text),
        Variants(),
    )
    h.registry.register(_text_node("test/pass"), Pass())
    variant = ParamSpec("variant", ParamWidget.TEXT, default="a")
    h.registry.register(_text_node("test/want", params=(variant,)), Want())
    h.registry.register(
        NodeDescriptor(
            type="test/join",
            title="Join",
            category="test",
            inputs=(PortSpec("texts", PortKind.TEXT, multiple=True),),
            outputs=text,
        ),
        Join(),
    )
    return h


def _graph(*extra: dict[str, Any]) -> dict[str, Any]:
    return graph(
        node("v", "test/variants"),
        node("p", "test/pass", text="v.text"),
        node("wa", "test/want", {"variant": "a"}, text="v.text"),
        node("wb", "test/want", {"variant": "b"}, text="p.text"),
        node("wc", "test/want", {"variant": "c"}, text="v.text"),  # outside the runs below
        *extra,
    )


def test_a_source_makes_only_what_the_runs_consumers_read(needs: Harness) -> None:
    raw = _graph(node("j", "test/join", texts=["wa.text", "wb.text"]))
    assert needs.validate(raw, "j").prepared["v"] == frozenset({"a", "b"})
    assert needs.execute(raw, "j").outputs["text"] == "a of a+b | b of a+b"


def test_the_runs_own_output_keeps_every_variant(needs: Harness) -> None:
    assert needs.validate(_graph(), "v").prepared["v"] == ALL
    assert needs.validate(_graph(), "p").prepared["v"] == ALL  # passed on as the run's result


def test_a_consumer_that_does_not_say_keeps_every_variant(needs: Harness) -> None:
    raw = _graph(
        node("e", "test/echo", text="v.text"), node("j", "test/join", texts=["wa.text", "e.text"])
    )
    assert needs.validate(raw, "j").prepared["v"] == ALL


def test_needs_join() -> None:
    assert joined(frozenset({"a"}), frozenset({"b"})) == frozenset({"a", "b"})
    assert joined(frozenset({"a"}), None) is None
    assert joined(None, frozenset()) is None
