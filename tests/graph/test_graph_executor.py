from __future__ import annotations

import pytest
from graph_harness import Harness, graph, node
from PIL import Image

from inline_core.errors import Cancelled, NotFound, RunFailed
from inline_core.graph.descriptor import NodeDescriptor, PortSpec
from inline_core.graph.executor import Executor
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind
from inline_core.runtime.progress import NodeDone, NodeFailed, NodeStarted, Progress


def test_runs_only_the_closure_in_order_and_reports_each_node(h: Harness) -> None:
    raw = graph(
        node("broken", "test/fail", text="t.text"),
        node("t", "input/text", {"text": "hello"}),
        node("e1", "test/echo", {"suffix": " a"}, text="t.text"),
        node("e2", "test/echo", {"suffix": " b"}, text="e1.text"),
    )
    result = h.execute(raw, "e2")
    assert result.outputs == {"text": "hello a b"}
    assert result.takes == ()
    assert h.echo.runs == ["e1", "e2"]
    assert [(type(e).__name__, getattr(e, "node_id", None)) for e in h.events] == [
        ("RunPlanned", None),
        ("NodeStarted", "t"),
        ("NodeDone", "t"),
        ("NodeStarted", "e1"),
        ("NodeDone", "e1"),
        ("NodeStarted", "e2"),
        ("NodeDone", "e2"),
    ]
    assert all(not e.cached for e in h.events if isinstance(e, NodeDone))


def test_a_plain_runner_exception_becomes_run_failed_naming_the_node(h: Harness) -> None:
    raw = graph(node("t", "input/text"), node("bad", "test/fail", text="t.text"))
    with pytest.raises(RunFailed) as info:
        h.execute(raw, "bad")
    assert info.value.node_id == "bad"
    assert info.value.message == "ValueError: boom"
    assert isinstance(info.value.__cause__, ValueError)
    assert h.events[-1] == NodeFailed("run-1", "bad", "ValueError: boom")


def test_an_inline_error_from_a_runner_keeps_its_code_and_gains_the_node(h: Harness) -> None:
    raw = graph(node("img", "input/image", {"asset": h.asset("a1", (8, 8))}))
    validated = h.validate(raw, "img")
    del h.media.paths[("asset", "a1")]  # the asset vanished after submit
    with pytest.raises(NotFound) as info:
        Executor(h.catalog).execute(validated, h.ctx())
    assert info.value.node_id == "img"
    assert isinstance(h.events[-1], NodeFailed)


def test_cancel_before_a_node_stops_the_run_there(h: Harness) -> None:
    class CancelAfterFirst(NodeRunner):
        def run(self, call: NodeCall) -> NodeResult:
            call.ctx.cancel.cancel("user asked")
            return NodeResult(outputs={"text": "x"})

    h.registry.register(
        NodeDescriptor("test/canceller", "C", "test", outputs=(PortSpec("text", PortKind.TEXT),)),
        CancelAfterFirst(),
    )
    raw = graph(node("c", "test/canceller"), node("e", "test/echo", text="c.text"))
    with pytest.raises(Cancelled, match="user asked"):
        h.execute(raw, "e")
    assert h.echo.runs == []
    assert not any(isinstance(e, NodeStarted) and e.node_id == "e" for e in h.events)


def test_cancelled_inside_a_runner_propagates_unwrapped(h: Harness) -> None:
    class StopsMidway(NodeRunner):
        def run(self, call: NodeCall) -> NodeResult:
            call.ctx.cancel.cancel()
            call.ctx.cancel.raise_if_cancelled()
            return NodeResult(outputs={"text": "never"})

    h.registry.register(
        NodeDescriptor("test/stops", "S", "test", outputs=(PortSpec("text", PortKind.TEXT),)),
        StopsMidway(),
    )
    with pytest.raises(Cancelled) as info:
        h.execute(graph(node("s", "test/stops")), "s")
    assert type(info.value) is Cancelled
    assert not any(isinstance(e, NodeFailed) for e in h.events)


def test_a_runner_missing_a_declared_output_fails_itself(h: Harness) -> None:
    class Forgetful(NodeRunner):
        def run(self, call: NodeCall) -> NodeResult:
            return NodeResult(outputs={})

    h.registry.register(
        NodeDescriptor("test/forgetful", "F", "test", outputs=(PortSpec("text", PortKind.TEXT),)),
        Forgetful(),
    )
    raw = graph(node("f", "test/forgetful"), node("e", "test/echo", text="f.text"))
    with pytest.raises(RunFailed, match="produced no value for outputs \\['text'\\]") as info:
        h.execute(raw, "e")
    assert info.value.node_id == "f"


def test_image_is_coerced_into_image_lists_and_fan_in_keeps_edge_order(h: Harness) -> None:
    raw = graph(
        node("a", "input/image", {"asset": h.asset("a", (2, 2))}),
        node("b", "input/image", {"asset": h.asset("b", (3, 3))}),
        node("c", "test/collect", one="a.image", images=["b.image", "a.image", "b.image"]),
    )
    assert h.execute(raw, "c").outputs == {"text": "3"}
    seen = h.collect.seen[-1]
    one = seen["one"]
    assert isinstance(one, list) and len(one) == 1  # pyright: ignore[reportUnknownArgumentType]
    images = seen["images"]
    assert [im.size for im in images] == [(3, 3), (2, 2), (3, 3)]
    assert all(isinstance(im, Image.Image) and im.mode == "RGB" for im in images)


def test_progress_events_come_between_start_and_done(h: Harness) -> None:
    raw = graph(
        node("img", "input/image", {"asset": h.asset("a1", (8, 8))}),
        node("f", "image/flip", image="img.image"),
    )
    h.execute(raw, "f")
    flip = [e for e in h.events if getattr(e, "node_id", None) == "f"]
    assert isinstance(flip[0], NodeStarted)
    assert isinstance(flip[-1], NodeDone) and len(flip[-1].takes) == 1
    progress = [e for e in flip if isinstance(e, Progress)]
    assert [p.phase for p in progress] == ["run", "save", "save"]
    assert progress[-1].fraction == 1.0
