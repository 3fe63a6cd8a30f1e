from __future__ import annotations

import pytest
from graph_harness import graph, node

from inline_core.errors import InvalidGraph, InvalidRequest
from inline_core.graph.schema import parse_graph
from inline_core.graph.topo import topological_order, upstream_closure


def test_closure_holds_the_target_and_everything_upstream_only() -> None:
    g = parse_graph(
        graph(
            node("a", "test/echo"),
            node("b", "test/echo", text="a.text"),
            node("side", "test/echo", text="a.text"),
            node("c", "test/echo", text="b.text"),
        )
    )
    assert upstream_closure(g, "c") == {"a", "b", "c"}
    assert upstream_closure(g, "a") == {"a"}


def test_unknown_target_is_an_invalid_request() -> None:
    g = parse_graph(graph(node("a", "test/echo")))
    with pytest.raises(InvalidRequest, match="'nope'"):
        upstream_closure(g, "nope")


def test_order_is_topological_with_ties_in_order_of_appearance() -> None:
    # Ready nodes run in order of appearance: after a, b (1), c (2) and then d (0) beat z (4).
    g = parse_graph(
        graph(
            node("d", "test/collect", images=["c.image", "b.image"]),
            node("b", "image/flip", image="a.image"),
            node("c", "image/flip", image="a.image"),
            node("a", "input/image"),
            node("z", "input/text"),
        )
    )
    assert topological_order(g, {"a", "b", "c", "d", "z"}) == ("a", "b", "c", "d", "z")
    assert topological_order(g, {"a", "b", "c", "d"}) == ("a", "b", "c", "d")


def test_cycle_is_named() -> None:
    g = parse_graph(
        graph(
            node("start", "input/text"),
            node("x", "test/echo", text="y.text"),
            node("y", "test/echo", text="x.text"),
        )
    )
    with pytest.raises(InvalidGraph, match="cycle: x -> y -> x|cycle: y -> x -> y") as info:
        topological_order(g, {"start", "x", "y"})
    assert info.value.node_id in {"x", "y"}


def test_self_loop_is_a_cycle() -> None:
    g = parse_graph(graph(node("s", "test/echo", text="s.text")))
    with pytest.raises(InvalidGraph, match="cycle: s -> s") as info:
        topological_order(g, {"s"})
    assert info.value.node_id == "s"
